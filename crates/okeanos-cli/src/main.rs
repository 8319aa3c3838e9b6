//! The `okeanos` command: make, check, inspect and use Okeanos file systems without a mount,
//! run the benchmarks (bench), the simulator (sim) and reports of saved runs (report).

mod bench;
mod fuse;
mod mount;
mod plot;
mod report;
mod sim;

use clap::{Parser, Subcommand};
use okeanos::format::superblock::{state, JournalLocation};
use okeanos::{Device, FileDevice, MkfsOptions, MountOptions, Okeanos};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Parser)]
#[command(name = "okeanos", version, about = "A journaling file system and storage engine for many concurrent streams of small synchronous writes")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make a file system on an image file (created if missing) or a block device.
    Mkfs {
        image: PathBuf,
        /// Size of a new image file, such as 1G or 512M (default: the size of an existing file or device).
        #[arg(long)]
        size: Option<String>,
        #[arg(long, default_value = "4096")]
        block_size: u32,
        /// Journal size, such as 128M (internal journal).
        #[arg(long, default_value = "128M")]
        journal_size: String,
        /// Put the journal on this device or file (created with --journal-size if missing).
        #[arg(long)]
        journal_device: Option<PathBuf>,
        /// Bytes of file system per inode.
        #[arg(long, default_value = "16384")]
        bytes_per_inode: u64,
        /// Blocks per group reserved for scattered logs (manylogs).
        #[arg(long, default_value = "0")]
        log_area_blocks: u32,
        #[arg(long, default_value = "")]
        label: String,
        /// Overwrite an existing Okeanos file system.
        #[arg(long)]
        force: bool,
    },
    /// Check every structure; exits non-zero if anything is wrong. Replays the journal first
    /// unless -n.
    Fsck {
        image: PathBuf,
        #[arg(long)]
        journal: Option<PathBuf>,
        /// Open read-only: do not replay the journal.
        #[arg(short = 'n')]
        no_write: bool,
    },
    /// Replay the journal of an unmounted file system.
    Recover {
        image: PathBuf,
        #[arg(long)]
        journal: Option<PathBuf>,
    },
    /// Journal inspection.
    Journal {
        #[command(subcommand)]
        cmd: JournalCmd,
    },
    /// Superblock, space, journal state and lifetime counters of an unmounted file system
    /// (--json for JSON); for a mount point, the live counters of the mount (JSON).
    Stat {
        image: PathBuf,
        #[arg(long)]
        journal: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Copy a local file into the file system.
    Put {
        image: PathBuf,
        source: PathBuf,
        dest: String,
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Print a file of the file system.
    Cat {
        image: PathBuf,
        path: String,
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// List a directory of the file system.
    Ls {
        image: PathBuf,
        #[arg(default_value = "/")]
        path: String,
        #[arg(short = 'l')]
        long: bool,
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Make a directory in the file system.
    Mkdir {
        image: PathBuf,
        path: String,
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Remove a file or an empty directory from the file system.
    Rm {
        image: PathBuf,
        path: String,
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Mount an image with FUSE so that any program can use it.
    Mount {
        image: PathBuf,
        mountpoint: PathBuf,
        /// Options: data=, commit=, journal_path=, ro, errors=, dmeta, write_threshold=, ...,
        /// and for FUSE: writeback_cache, allow_other, threads=N.
        #[arg(short, long, default_value = "")]
        options: String,
        /// Stay in the foreground (log to stderr unless --log).
        #[arg(short)]
        foreground: bool,
        /// Log file of the daemon.
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// Unmount a mounted Okeanos file system cleanly (or clear a stale mount).
    Umount { mountpoint: PathBuf },
    /// Benchmarks on Okeanos and on Linux file systems: multistream, recovery, mixed.
    Bench(bench::BenchArgs),
    /// The deterministic simulator: the engine in virtual time on modelled disks; crash fuzzing.
    Sim(sim::SimArgs),
    /// Tables and plots from saved JSON reports (of bench or sim), several merged into one.
    Report {
        /// JSON files written with --json.
        #[arg(required = true)]
        json: Vec<PathBuf>,
        /// Write plots into this directory.
        #[arg(long)]
        plot: Option<PathBuf>,
        /// File-name prefix of the plots.
        #[arg(long, default_value = "report")]
        prefix: String,
        /// Print the table as markdown.
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Subcommand)]
enum JournalCmd {
    /// Transactions, tags and block kinds of the journal, as recovery would read them.
    Dump {
        image: PathBuf,
        #[arg(long)]
        journal: Option<PathBuf>,
    },
}

/// Parses 4096, 64K, 128M, 1G, 2T.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let (num, mult) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1u64 << 10,
                'M' => 1 << 20,
                'G' => 1 << 30,
                'T' => 1 << 40,
                _ => return Err(format!("size {s:?}: unknown unit {c:?} (use K, M, G or T)")),
            };
            (&s[..i], m)
        }
        _ => (s, 1),
    };
    let n: u64 = num.parse().map_err(|_| format!("size {s:?} is not a number"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size {s:?} is too large"))
}

fn open_dev(path: &Path, write: bool) -> Result<Arc<dyn Device>, String> {
    let d = if write { FileDevice::open(path) } else { FileDevice::open_read_only(path) };
    Ok(Arc::new(d.map_err(|e| e.to_string())?))
}

fn mount(image: &Path, options: &str) -> Result<Okeanos, String> {
    let opts = MountOptions::parse(options)?;
    Okeanos::open(image, opts).map_err(|e| format!("{}: {e}", image.display()))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.cmd) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("okeanos: {e}");
            ExitCode::from(1)
        }
    }
}

fn run(cmd: Cmd) -> Result<ExitCode, String> {
    match cmd {
        Cmd::Mkfs { image, size, block_size, journal_size, journal_device, bytes_per_inode, log_area_blocks, label, force } => {
            let jbytes = parse_size(&journal_size)?;
            let opts = MkfsOptions {
                block_size,
                journal_blocks: jbytes / block_size.max(1) as u64,
                external_journal: journal_device.is_some(),
                bytes_per_inode,
                log_area_blocks,
                label,
            };
            let created: Vec<PathBuf> = [Some(&image), journal_device.as_ref()].into_iter().flatten().filter(|p| !p.exists()).cloned().collect();
            let made = (|| {
                let dev = prepare(&image, size.as_deref(), force)?;
                let jdev = match &journal_device {
                    Some(j) => Some(prepare(j, Some(&journal_size), force)?),
                    None => None,
                };
                let sb = Okeanos::mkfs(dev.as_ref(), jdev.as_deref(), &opts).map_err(|e| e.to_string())?;
                Ok::<_, String>((sb, jdev.is_some()))
            })();
            let (sb, external) = match made {
                Ok(x) => x,
                Err(e) => {
                    // Leave nothing behind that this command created.
                    for p in &created {
                        let _ = std::fs::remove_file(p);
                    }
                    return Err(e);
                }
            };
            println!(
                "{}: {} blocks of {} bytes, {} groups, {} inodes, {} journal of {} blocks",
                image.display(),
                sb.block_count,
                sb.block_size,
                sb.group_count,
                sb.inode_count,
                if external { "external" } else { "internal" },
                match sb.journal {
                    JournalLocation::Internal { blocks, .. } | JournalLocation::External { blocks, .. } => blocks,
                }
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Fsck { image, journal, no_write } => {
            let dev = open_dev(&image, !no_write)?;
            let jdev = journal.as_deref().map(|j| open_dev(j, !no_write)).transpose()?;
            if !no_write {
                if let Some(r) = okeanos::inspect::recover_image(dev.clone(), jdev.clone()).map_err(|e| e.to_string())? {
                    println!("journal replayed: {} transactions ({}..={}), {} blocks", r.transactions, r.first_tid, r.last_tid, r.blocks_replayed);
                }
            }
            let r = okeanos::fsck(dev, jdev);
            println!("journal: {}", r.journal);
            println!("{} files, {} directories, {} symlinks, {} orphans; {} blocks and {} inodes in use", r.files, r.directories, r.symlinks, r.orphans, r.blocks_used, r.inodes_used);
            for p in &r.problems {
                println!("PROBLEM: {p}");
            }
            if r.is_clean() {
                println!("clean");
                Ok(ExitCode::SUCCESS)
            } else {
                println!("{} problems", r.problems.len());
                Ok(ExitCode::from(4))
            }
        }
        Cmd::Recover { image, journal } => {
            let dev = open_dev(&image, true)?;
            let jdev = journal.as_deref().map(|j| open_dev(j, true)).transpose()?;
            match okeanos::inspect::recover_image(dev, jdev).map_err(|e| e.to_string())? {
                Some(r) => println!(
                    "replayed {} transactions ({}..={}), {} blocks, {} revoked; scan {:.3} ms, revoke {:.3} ms, replay {:.3} ms; log ended: {}",
                    r.transactions, r.first_tid, r.last_tid, r.blocks_replayed, r.revoke_records,
                    r.scan_ns as f64 / 1e6, r.revoke_ns as f64 / 1e6, r.replay_ns as f64 / 1e6, r.end_reason
                ),
                None => println!("journal is clean; nothing to recover"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Journal { cmd: JournalCmd::Dump { image, journal } } => {
            let dev = open_dev(&image, false)?;
            let jdev = journal.as_deref().map(|j| open_dev(j, false)).transpose()?;
            let d = okeanos::inspect::dump_journal(dev, jdev).map_err(|e| e.to_string())?;
            println!(
                "journal: {} blocks ({}), start {}, sequence {}, {}",
                d.jsb.total_blocks,
                d.region.name(),
                d.jsb.start,
                d.jsb.sequence,
                if d.jsb.start == 0 { "clean" } else { "needs recovery" }
            );
            use okeanos::format::journal::tag_flags;
            use okeanos::journal::recovery::ScanItem;
            for (t, rev) in d.transactions.iter().zip(&d.revoked) {
                let full = t.items.iter().filter(|i| matches!(i, ScanItem::Full { .. })).count();
                let meta = t.items.iter().filter(|i| i.tag().is_metadata()).count();
                println!(
                    "transaction {}: log blocks {}..{}, {} handles, {} whole blocks, {} records, {} metadata, {} revoked",
                    t.tid, t.start, t.end, t.handle_count, full, t.items.len() - full, meta, rev.len()
                );
                for item in &t.items {
                    let g = item.tag();
                    let kind = if g.is_metadata() { "metadata" } else { "data" };
                    let mut flags = String::new();
                    if g.flags & tag_flags::ESCAPED != 0 {
                        flags.push_str(" escaped");
                    }
                    if g.flags & tag_flags::FRESH != 0 {
                        flags.push_str(" fresh");
                    }
                    match item {
                        ScanItem::Full { pos, .. } => println!("  log {pos:>8} -> block {:>10}  {kind} whole block{flags}", g.fs_block),
                        ScanItem::Record { bytes, .. } => {
                            println!("  record     -> block {:>10}  {kind} {} bytes at {}{flags}", g.fs_block, bytes.len(), g.offset)
                        }
                    }
                }
                for b in rev {
                    println!("  revoke block {b}");
                }
            }
            println!("end of log: {}", d.end_reason);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Stat { image, .. } if image.is_dir() => mount::stat_mounted(&image),
        Cmd::Mount { image, mountpoint, options, foreground, log } => mount::mount(&image, &mountpoint, &options, foreground, log),
        Cmd::Umount { mountpoint } => mount::umount(&mountpoint),
        Cmd::Stat { image, journal, json } => {
            let dev = open_dev(&image, false)?;
            let jdev = journal.as_deref().map(|j| open_dev(j, false)).transpose()?;
            let (sb, gdt, jsb) = okeanos::inspect::describe(dev, jdev).map_err(|e| e.to_string())?;
            let free_blocks: u64 = gdt.iter().map(|g| g.free_blocks as u64).sum();
            let free_inodes: u64 = gdt.iter().map(|g| g.free_inodes as u64).sum();
            let st = match sb.state {
                state::CLEAN => "clean",
                state::MOUNTED => "mounted or not cleanly unmounted",
                _ => "errors",
            };
            let (jkind, jblocks) = match sb.journal {
                JournalLocation::Internal { blocks, .. } => ("internal", blocks),
                JournalLocation::External { blocks, .. } => ("external", blocks),
            };
            if json {
                let v = serde_json::json!({
                    "block_size": sb.block_size, "blocks": sb.block_count, "blocks_free": free_blocks,
                    "inodes": sb.inode_count, "inodes_free": free_inodes, "groups": sb.group_count,
                    "state": st, "mount_count": sb.mount_count, "journal": jkind, "journal_blocks": jblocks,
                    "journal_clean": jsb.start == 0, "mkfs_time_ns": sb.mkfs_time_ns, "journal_sequence": jsb.sequence,
                    "lifetime": sb.lifetime,
                });
                println!("{v:#}");
            } else {
                println!("block size      {}", sb.block_size);
                println!("blocks          {} ({} free)", sb.block_count, free_blocks);
                println!("inodes          {} ({} free)", sb.inode_count, free_inodes);
                println!("groups          {} of {} blocks, {} inodes", sb.group_count, sb.blocks_per_group, sb.inodes_per_group);
                println!("state           {st}, mounted {} times", sb.mount_count);
                println!("journal         {jkind}, {jblocks} blocks, {}, next transaction {}", if jsb.start == 0 { "clean" } else { "needs recovery" }, jsb.sequence);
                let l = &sb.lifetime;
                println!("lifetime        {} commits, {} syncs", l.commits, l.syncs);
                println!("                {} payload bytes, {} journal bytes, {} final-location bytes", l.payload_bytes, l.journal_bytes, l.final_bytes);
                if l.payload_bytes > 0 {
                    println!("                {:.2} journal and {:.2} final-location bytes per payload byte", l.journal_bytes as f64 / l.payload_bytes as f64, l.final_bytes as f64 / l.payload_bytes as f64);
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Put { image, source, dest, options } => {
            let data = std::fs::read(&source).map_err(|e| format!("{}: {e}", source.display()))?;
            let fs = mount(&image, &options)?;
            let f = fs.create_file(&dest).map_err(|e| format!("{dest}: {e}"))?;
            f.write_at(0, &data).map_err(|e| format!("{dest}: {e}"))?;
            f.fsync().map_err(|e| format!("{dest}: {e}"))?;
            drop(f);
            fs.unmount().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Cat { image, path, options } => {
            let fs = mount(&image, &format!("ro,{options}"))?;
            let data = fs.read_path(&path).map_err(|e| format!("{path}: {e}"))?;
            use std::io::Write;
            std::io::stdout().write_all(&data).map_err(|e| e.to_string())?;
            fs.unmount().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Ls { image, path, long, options } => {
            let fs = mount(&image, &format!("ro,{options}"))?;
            for e in fs.list_path(&path).map_err(|e| format!("{path}: {e}"))? {
                let name = String::from_utf8_lossy(&e.name);
                if long {
                    let a = fs.getattr(e.ino).map_err(|e| e.to_string())?;
                    let t = match a.kind {
                        okeanos::format::FileType::Directory => 'd',
                        okeanos::format::FileType::Symlink => 'l',
                        okeanos::format::FileType::Regular => '-',
                    };
                    println!("{t}{:o} {:>3} {:>5} {:>5} {:>12} {:>8} {name}", a.perm, a.nlink, a.uid, a.gid, a.size, a.ino);
                } else {
                    println!("{name}");
                }
            }
            fs.unmount().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Mkdir { image, path, options } => {
            let fs = mount(&image, &options)?;
            fs.mkdir_path(&path).map_err(|e| format!("{path}: {e}"))?;
            fs.unmount().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Rm { image, path, options } => {
            let fs = mount(&image, &options)?;
            let ino = fs.resolve(&path).map_err(|e| format!("{path}: {e}"))?;
            let r = match fs.getattr(ino).map_err(|e| e.to_string())?.kind {
                okeanos::format::FileType::Directory => fs.rmdir_path(&path),
                _ => fs.remove_path(&path),
            };
            r.map_err(|e| format!("{path}: {e}"))?;
            fs.unmount().map_err(|e| e.to_string())?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench(args) => bench::run(args),
        Cmd::Sim(args) => sim::run(args),
        Cmd::Report { json, plot, prefix, markdown } => {
            let mut runs = Vec::new();
            for j in &json {
                runs.extend(report::read_json(j)?);
            }
            if markdown {
                report::print_markdown(&runs);
            } else {
                report::print_table(&runs);
            }
            if let Some(d) = plot {
                let mut files = plot::plot_multistream(&d, &prefix, &runs)?;
                files.extend(plot::plot_recovery(&d, &prefix, &runs)?);
                eprintln!("wrote {} plot files into {}", files.len(), d.display());
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Opens `path` for mkfs: creates a file of `size` if missing; refuses to overwrite an
/// existing Okeanos file system without `force`.
fn prepare(path: &Path, size: Option<&str>, force: bool) -> Result<Arc<dyn Device>, String> {
    if path.exists() {
        let dev = FileDevice::open(path).map_err(|e| e.to_string())?;
        if !force {
            let mut b = vec![0u8; 512];
            if dev.len_bytes() >= 512 && dev.read_at(0, &mut b).is_ok()
                && (okeanos::format::Superblock::decode(&b).is_ok() || okeanos::format::journal::JournalSuperblock::decode(&b).is_ok()) {
                    return Err(format!("{} already holds an Okeanos file system or journal; use --force to overwrite it", path.display()));
                }
        }
        if let Some(s) = size {
            let want = parse_size(s)?;
            let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
            if meta.is_file() && meta.len() != want {
                drop(dev);
                let f = std::fs::OpenOptions::new().write(true).open(path).map_err(|e| e.to_string())?;
                f.set_len(want).map_err(|e| e.to_string())?;
                return Ok(Arc::new(FileDevice::open(path).map_err(|e| e.to_string())?));
            }
        }
        return Ok(Arc::new(dev));
    }
    let size = size.ok_or_else(|| format!("{} does not exist: give --size to create it", path.display()))?;
    let bytes = parse_size(size)?;
    Ok(Arc::new(FileDevice::create(path, bytes, false).map_err(|e| e.to_string())?))
}
