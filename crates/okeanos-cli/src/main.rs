//! The `okeanos` command: make, check, inspect and use Okeanos file systems without a mount,
//! run the benchmarks (bench), the simulator (sim) and reports of saved runs (report).

mod bench;
mod fuse;
mod helpers;
mod mount;
mod plot;
mod read_cache;
mod report;
mod sim;

use clap::{CommandFactory, Parser, Subcommand};
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

/// An image and, for a file system made with `mkfs --journal-device`, its external journal:
/// every command that opens an image takes the journal the same way.
#[derive(clap::Args)]
struct ImageArg {
    /// Image file or block device holding the file system.
    image: PathBuf,
    /// The external journal (device or file) of a file system made with --journal-device.
    #[arg(long, value_name = "PATH")]
    journal: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Make a file system on an image file (created if missing) or a block device.
    Mkfs {
        /// Image file (created with --size if missing) or block device.
        image: PathBuf,
        /// Size of a new image file, such as 1G or 512M (default: the size of an existing file or device).
        #[arg(long)]
        size: Option<String>,
        /// Block size in bytes (a power of two from 1024 to 65536).
        #[arg(long, default_value = "4096")]
        block_size: u32,
        /// Journal size, such as 64M (default: scaled to the device as mke2fs does, at most 128M).
        #[arg(long)]
        journal_size: Option<String>,
        /// Put the journal on this device or file (created with --journal-size if missing).
        #[arg(long)]
        journal_device: Option<PathBuf>,
        /// Where the journal lives: internal (default), external (with --journal-device),
        /// remote (on --journal-server), jetstream (a replicated NATS JetStream stream on
        /// --jetstream), nvm (with --nvm) or manylogs (a small log in every group, each commit
        /// in the one nearest the disk head); remote and jetstream keep the internal journal as
        /// their local fallback.
        #[arg(long, value_name = "KIND")]
        journal: Option<String>,
        /// The journal server of a remote journal, host:port.
        #[arg(long, value_name = "HOST:PORT")]
        journal_server: Option<String>,
        /// The NATS servers of a jetstream journal: nats://host:port URLs, comma-separated.
        #[arg(long, value_name = "URLS")]
        jetstream: Option<String>,
        /// The non-volatile memory of an nvm journal (UBJ): a DAX device such as /dev/pmem0,
        /// a file on a dax-mounted file system, or any file (then msync, see docs/JOURNALING.md).
        #[arg(long, value_name = "PATH")]
        nvm: Option<PathBuf>,
        /// Size of a new NVM file, such as 256M.
        #[arg(long, value_name = "SIZE", default_value = "256M")]
        nvm_size: String,
        /// Bytes of file system per inode (at least 1024).
        #[arg(long, default_value = "16384")]
        bytes_per_inode: u64,
        /// Blocks per group reserved for scattered logs (manylogs; --log-size says it in bytes).
        #[arg(long, default_value = "0")]
        log_area_blocks: u32,
        /// Manylogs: the size of a group, one log each, such as 100M (the default; at most 8
        /// blocks per byte of a block, 128M with 4 KiB blocks).
        #[arg(long, value_name = "SIZE")]
        log_group_size: Option<String>,
        /// Manylogs: the size of every group's log, such as 10M (default: a tenth of the group).
        #[arg(long, value_name = "SIZE")]
        log_size: Option<String>,
        /// A name for the file system (up to 32 bytes).
        #[arg(long, default_value = "")]
        label: String,
        /// Overwrite an existing Okeanos file system or journal (never one in use).
        #[arg(long)]
        force: bool,
        /// Write only the journal's first block, not the whole ring (mke2fs's
        /// lazy_journal_init): quicker, but on an image file or a loop device over a sparse
        /// file the host then allocates the ring's space during the first pass of commits.
        #[arg(long)]
        lazy_journal_init: bool,
    },
    /// Check every structure; exits as e2fsck: 0 clean, 1 when it cleared the error state of a
    /// file system that checked out, 4 when problems remain, 8 when it could check nothing (not
    /// an Okeanos image, a missing journal, an image in use without -n). Replays the journal
    /// first; with -n into memory only.
    Fsck {
        #[command(flatten)]
        img: ImageArg,
        /// Open read-only and change nothing: the journal is replayed in memory, nothing is
        /// cleared (works on an image in use).
        #[arg(short = 'n')]
        no_write: bool,
    },
    /// Replay the journal of an unmounted file system.
    Recover {
        #[command(flatten)]
        img: ImageArg,
    },
    /// Journal inspection.
    Journal {
        #[command(subcommand)]
        cmd: JournalCmd,
    },
    /// Superblock, space, journal state and lifetime counters of an image; for a mount point,
    /// the live counters of the mount (--json for JSON; Prometheus text is in
    /// MOUNTPOINT/.okeanos-metrics).
    Stat {
        #[command(flatten)]
        img: ImageArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write every committed block home and empty the journal now (recovering first if the
    /// image needs it); for a mount point, checkpoint the live mount. Prints what was written,
    /// how many merged device writes that took, what was copied from manylogs logs and which
    /// logged copies were skipped (superseded or freed).
    Checkpoint {
        #[command(flatten)]
        img: ImageArg,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy a local file into the file system (into DEST/NAME when DEST is a directory or ends in /).
    Put {
        #[command(flatten)]
        img: ImageArg,
        /// The local file to copy.
        source: PathBuf,
        /// Where it goes in the file system, such as /logs/a.log or /logs/.
        dest: String,
        /// Mount options, such as data=wasteless.
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Print a file of the file system.
    Cat {
        #[command(flatten)]
        img: ImageArg,
        /// Path in the file system.
        path: String,
        /// Mount options (the image is always opened read-only).
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// List a directory of the file system.
    Ls {
        #[command(flatten)]
        img: ImageArg,
        /// Directory in the file system.
        #[arg(default_value = "/")]
        path: String,
        /// Long listing: type and permissions, links, owner, size, modification time, inode.
        #[arg(short = 'l')]
        long: bool,
        /// Mount options (the image is always opened read-only).
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Make a directory in the file system.
    Mkdir {
        #[command(flatten)]
        img: ImageArg,
        /// Path of the new directory.
        path: String,
        /// Mount options.
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Remove a file or an empty directory from the file system.
    Rm {
        #[command(flatten)]
        img: ImageArg,
        /// Path to remove.
        path: String,
        /// Mount options.
        #[arg(short, long, default_value = "")]
        options: String,
    },
    /// Mount an image with FUSE so that any program can use it.
    Mount {
        #[command(flatten)]
        img: ImageArg,
        /// An existing empty directory.
        mountpoint: PathBuf,
        /// Options: data=, commit=, journal_path=, ro, errors=, dmeta, write_threshold=, ...
        /// (README, "The okeanos command"), and for FUSE: writeback_cache, page_cache,
        /// allow_other, threads=N, metrics_file=PATH.
        #[arg(short, long, default_value = "")]
        options: String,
        /// Stay in the foreground (log to stderr unless --log).
        #[arg(short)]
        foreground: bool,
        /// Log file of the daemon (default: one per mount point in the temporary directory).
        #[arg(long)]
        log: Option<PathBuf>,
    },
    /// Unmount a mounted Okeanos file system cleanly (or clear a stale mount).
    Umount {
        /// The mount point.
        mountpoint: PathBuf,
    },
    /// Serve remote journals: one journal per (host, file system) under --dir, each APPEND
    /// acknowledged after its fdatasync, group-committed across connections (docs/REMOTE.md).
    JournalServer {
        /// Address to listen on, such as 127.0.0.1:7070 (port 0: any free port, printed).
        #[arg(long)]
        listen: String,
        /// Directory for the journals.
        #[arg(long)]
        dir: PathBuf,
        /// File of "host-name secret" lines (mode 600); hosts prove they know their secret.
        #[arg(long, conflicts_with = "no_auth")]
        secrets: Option<PathBuf>,
        /// Accept every host without a secret (tests on 127.0.0.1 only).
        #[arg(long)]
        no_auth: bool,
        /// Bytes one journal may hold; a full journal answers "full" and the host checkpoints.
        #[arg(long, default_value = "1G")]
        quota: String,
        /// Most connections served at once.
        #[arg(long, default_value = "256")]
        max_connections: usize,
        /// Serve TLS with this PEM certificate chain (hosts mount with remote_tls_ca=).
        #[arg(long, requires = "tls_key", conflicts_with = "tls_self_signed")]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert.
        #[arg(long, requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Serve TLS with a new self-signed certificate for the --listen host, 127.0.0.1 and
        /// localhost, written to this file for hosts to trust (remote_tls_ca=); the key stays
        /// in memory. For tests and quick starts.
        #[arg(long, value_name = "CERT_OUT")]
        tls_self_signed: Option<PathBuf>,
    },
    /// Benchmarks on Okeanos and on Linux file systems: multistream, recovery, mixed.
    Bench(bench::BenchArgs),
    /// Install the mount(8) helpers (mount -t fuse.okeanos, fstab), shell completions and the
    /// man page.
    InstallHelpers {
        /// Install under this directory instead of / (for packaging).
        #[arg(long, default_value = "/")]
        root: PathBuf,
        /// Where the okeanos binary is on the installed system, which the mount helpers link
        /// to. Default: this binary without --root, /usr/bin/okeanos with it (a package's
        /// path, not the build tree's).
        #[arg(long)]
        bin: Option<PathBuf>,
    },
    /// Run the model-based randomized exerciser in a new directory under DIR (an Okeanos mount,
    /// or any file system to compare): writes at holes, appends, truncates, every fallocate
    /// mode, copy_file_range, mmap, rename, link, unlink and fsync, each checked against a model
    /// of what the files must hold. Exits 1 on the first difference, naming the seed.
    Exercise {
        /// Directory to work in (a subdirectory is made and removed).
        dir: PathBuf,
        /// Seed of the run's choices (default: from the clock, printed).
        #[arg(long)]
        seed: Option<u64>,
        /// Operations to run.
        #[arg(long, default_value_t = 10_000)]
        ops: usize,
        /// Leave the files for inspection.
        #[arg(long)]
        keep: bool,
    },
    /// Print shell completions (bash, zsh, fish, elvish, powershell).
    Completions {
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
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
    /// Transactions, tags and block kinds of the journal, as recovery would read them (works
    /// on an image in use, and says so).
    Dump {
        #[command(flatten)]
        img: ImageArg,
    },
}

/// Parses 4096, 64K, 128M, 1G, 2T.
pub fn parse_size(s: &str) -> Result<u64, String> {
    okeanos::engine::image::parse_size(s)
}

/// Opens an image or journal: locked for writing, shared for reading (a writer refuses both).
fn open_dev(path: &Path, write: bool) -> Result<Arc<dyn Device>, String> {
    let d = if write { FileDevice::open(path) } else { FileDevice::open_read_only(path) };
    Ok(Arc::new(d.map_err(|e| in_use_hint(e.to_string()))?))
}

/// Opens for inspection without a lock; says on stderr when the image is in use (what is read
/// may then be behind the live file system).
fn open_inspect(path: &Path) -> Result<Arc<dyn Device>, String> {
    if let Some(h) = okeanos::device::lock::holder(path) {
        eprintln!("okeanos: {} is in use by {h}; what follows may lag behind the live file system", path.display());
    }
    Ok(Arc::new(FileDevice::open_unlocked(path).map_err(|e| e.to_string())?))
}

fn in_use_hint(e: String) -> String {
    if e.contains(" is in use by ") {
        format!("{e}. Unmount it first (okeanos umount MOUNTPOINT), or inspect it read-only with fsck -n, stat or journal dump")
    } else {
        e
    }
}

fn devices(img: &ImageArg, write: bool) -> Result<(Arc<dyn Device>, Option<Arc<dyn Device>>), String> {
    let dev = open_dev(&img.image, write)?;
    let jdev = img.journal.as_deref().map(|j| open_dev(j, write)).transpose()?;
    Ok((dev, jdev))
}

/// The image and journal opened without a lock and without a word (the caller said why).
fn devices_inspect_quiet(img: &ImageArg) -> Result<(Arc<dyn Device>, Option<Arc<dyn Device>>), String> {
    let open = |p: &Path| FileDevice::open_unlocked(p).map(|d| Arc::new(d) as Arc<dyn Device>).map_err(|e| e.to_string());
    Ok((open(&img.image)?, img.journal.as_deref().map(open).transpose()?))
}

fn devices_inspect(img: &ImageArg) -> Result<(Arc<dyn Device>, Option<Arc<dyn Device>>), String> {
    let dev = open_inspect(&img.image)?;
    let jdev = img.journal.as_deref().map(open_inspect).transpose()?;
    Ok((dev, jdev))
}

/// Mount options from `-o` with the image's `--journal` folded in.
fn mount_options(img: &ImageArg, options: &str, read_only: bool) -> Result<MountOptions, String> {
    let mut opts = MountOptions::parse(options)?;
    if let Some(j) = &img.journal {
        opts.journal_path = Some(j.clone());
    }
    opts.read_only |= read_only;
    Ok(opts)
}

/// Mounts the image, runs `op`, and unmounts cleanly whether `op` succeeded or not, so that a
/// failed command (a missing path, an existing name, ENOSPC) leaves the image clean.
/// A read-only command (`ls`, `cat`) on an image that is mounted reads what is on disk, with
/// the live journal replayed into memory, as debugfs reads a mounted ext4: a view as of the last
/// commit that reached the disk, said on stderr.
fn with_mount<R>(img: &ImageArg, options: &str, read_only: bool, op: impl FnOnce(&Okeanos) -> Result<R, String>) -> Result<R, String> {
    let opts = mount_options(img, options, read_only)?;
    let holder = if read_only { okeanos::device::lock::holder(&img.image) } else { None };
    let fs = match holder {
        Some(h) => {
            eprintln!("okeanos: {} is mounted (by {h}): reading what is on disk with its journal replayed in memory; it may lag behind the live file system", img.image.display());
            let (dev, jdev) = devices_inspect_quiet(img)?;
            Okeanos::mount(dev, jdev, opts)
        }
        None => Okeanos::open(&img.image, opts),
    };
    let fs = fs.map_err(|e| in_use_hint(format!("{}: {e}", img.image.display())))?;
    let r = op(&fs);
    let u = fs.unmount().map_err(|e| format!("unmount: {e}"));
    let r = r?;
    u?;
    Ok(r)
}

/// Writes to stdout; a closed pipe (`| head`) ends the command quietly, as it does for
/// coreutils, instead of a panic.
fn out(args: std::fmt::Arguments) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(args).and_then(|_| o.write_all(b"\n")) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("okeanos: stdout: {e}");
        std::process::exit(1);
    }
}

macro_rules! outln {
    ($($t:tt)*) => { out(format_args!($($t)*)) };
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn main() -> ExitCode {
    // Called by mount(8) as mount.fuse.okeanos or mount.okeanos (symlinks to this binary).
    let argv: Vec<String> = std::env::args().collect();
    let called = argv.first().map(|a| Path::new(a).file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())).unwrap_or_default();
    // mount.fuse3 (what mount -t fuse.okeanos runs when no mount.fuse.okeanos is installed)
    // runs `okeanos IMAGE MOUNTPOINT -o OPTIONS`: the same helper.
    let fuse3_form = argv.len() >= 3 && !argv[1].starts_with('-') && Cli::command().find_subcommand(&argv[1]).is_none() && Path::new(&argv[1]).exists() && Path::new(&argv[2]).is_dir();
    if helpers::HELPER_NAMES.contains(&called.as_str()) || fuse3_form {
        return match helpers::mount_helper(&argv[1..]) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("{called}: {e}");
                ExitCode::from(32) // mount(8)'s "mount failure"
            }
        };
    }
    let cli = Cli::parse();
    if !matches!(cli.cmd, Cmd::Mount { .. } | Cmd::Bench(_) | Cmd::JournalServer { .. }) {
        // A closed pipe ends these commands as it ends cat or ls. The mount daemon and the
        // benchmarks keep SIGPIPE ignored (sockets; cleanup of loop devices) and see EPIPE.
        // SAFETY: setting a signal disposition to its default before any thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
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
        Cmd::Mkfs { image, size, block_size, journal_size, journal_device, journal, journal_server, jetstream, nvm, nvm_size, bytes_per_inode, mut log_area_blocks, log_group_size, log_size, label, force, lazy_journal_init } => {
            let manylogs = journal.as_deref() == Some("manylogs");
            if !manylogs && (log_group_size.is_some() || log_size.is_some()) {
                return Err("--log-group-size and --log-size go with --journal manylogs".into());
            }
            let blocks_of = |what: &str, v: &str| -> Result<u32, String> {
                let b = parse_size(v)? / block_size.max(1) as u64;
                u32::try_from(b).map_err(|_| format!("{what} {v} is too large"))
            };
            let group_blocks = log_group_size.as_deref().map(|v| blocks_of("--log-group-size", v)).transpose()?;
            if let Some(v) = log_size.as_deref() {
                log_area_blocks = blocks_of("--log-size", v)?;
            }
            if manylogs {
                if journal_device.is_some() || journal_server.is_some() || jetstream.is_some() || nvm.is_some() || journal_size.is_some() {
                    return Err("--journal manylogs keeps its logs in the file system's groups: leave out --journal-size, --journal-device, --journal-server, --jetstream and --nvm".into());
                }
                return mkfs(&image, size.as_deref(), block_size, None, None, None, bytes_per_inode, log_area_blocks, label, force, Some(group_blocks), lazy_journal_init);
            }
            let nvm = match (journal.as_deref(), nvm) {
                (Some("nvm"), Some(p)) => {
                    if journal_device.is_some() || journal_server.is_some() || jetstream.is_some() {
                        return Err("--journal nvm keeps the journal in NVM: leave out --journal-device, --journal-server and --jetstream".into());
                    }
                    Some((p, parse_size(&nvm_size)?))
                }
                (Some("nvm"), None) => return Err("--journal nvm needs --nvm PATH (a DAX device or a file)".into()),
                (_, Some(_)) => return Err("--nvm goes with --journal nvm".into()),
                _ => None,
            };
            if let Some((p, bytes)) = nvm {
                let journal_size = journal_size.or(Some(format!("{}", okeanos::fs::mkfs::MIN_JOURNAL_BLOCKS * block_size as u64)));
                return mkfs_nvm(&image, size.as_deref(), block_size, journal_size.as_deref(), &p, bytes, bytes_per_inode, log_area_blocks, label, force);
            }
            let remote = match (journal.as_deref(), journal_server, jetstream) {
                (Some("jetstream"), None, Some(urls)) => {
                    if urls.split(',').any(|u| !okeanos::remote::jetstream::is_nats(u.trim())) {
                        return Err(format!("--jetstream {urls}: give nats://host:port URLs, comma-separated"));
                    }
                    Some(urls)
                }
                (Some("jetstream"), _, None) => return Err("--journal jetstream needs --jetstream nats://HOST:PORT[,...]".into()),
                (_, _, Some(_)) => return Err("--jetstream goes with --journal jetstream".into()),
                (j, s, None) => match (j, s) {
                (None | Some("internal"), None) => None,
                (Some("external"), None) if journal_device.is_some() => None,
                (Some("external"), None) => return Err("--journal external needs --journal-device".into()),
                (Some("remote"), Some(s)) => Some(s),
                (Some("remote"), None) => return Err("--journal remote needs --journal-server HOST:PORT".into()),
                (None, Some(_)) | (Some(_), Some(_)) => return Err("--journal-server goes with --journal remote".into()),
                (Some(k), None) => return Err(format!("--journal {k}: use internal, external, remote, jetstream, nvm or manylogs")),
                },
            };
            if remote.is_some() && journal_device.is_some() {
                return Err("a remote journal falls back to the internal journal: leave out --journal-device".into());
            }
            mkfs(&image, size.as_deref(), block_size, journal_size.as_deref(), journal_device.as_deref(), remote, bytes_per_inode, log_area_blocks, label, force, None, lazy_journal_init)
        }
        Cmd::Fsck { img, no_write } => fsck(&img, no_write),
        Cmd::Recover { img } => {
            let (dev, jdev) = devices(&img, true)?;
            match okeanos::inspect::recover_image(dev, jdev).map_err(|e| e.to_string())? {
                Some(r) if r.nvm_slots_scanned > 0 => {
                    outln!("replayed {} blocks from the NVM journal in {:.3} ms: {}", r.blocks_replayed, (r.scan_ns + r.replay_ns) as f64 / 1e6, r.end_reason);
                }
                Some(r) => {
                    outln!(
                        "replayed {} transactions ({}..={}), {} blocks, {} revoked; scan {:.3} ms, revoke {:.3} ms, replay {:.3} ms; log ended: {}",
                        r.transactions, r.first_tid, r.last_tid, r.blocks_replayed, r.revoke_records,
                        r.scan_ns as f64 / 1e6, r.revoke_ns as f64 / 1e6, r.replay_ns as f64 / 1e6, r.end_reason
                    );
                    if let Some(d) = &r.damage {
                        outln!("DAMAGE: {d}");
                        outln!("the file system is marked with errors: run `okeanos fsck {}` before mounting it read-write", img.image.display());
                        return Ok(ExitCode::from(4));
                    }
                }
                None => outln!("journal is clean; nothing to recover"),
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Journal { cmd: JournalCmd::Dump { img } } => {
            let (dev, jdev) = devices_inspect(&img)?;
            journal_dump(dev, jdev)
        }
        Cmd::Stat { img, json } if img.image.is_dir() => mount::stat_mounted(&img.image, json),
        Cmd::Checkpoint { img, json } if img.image.is_dir() => mount::checkpoint_mounted(&img.image, json),
        Cmd::Checkpoint { img, json } => {
            let counts = with_mount(&img, "", false, |fs| fs.checkpoint().map_err(|e| format!("checkpoint: {e}")))?;
            print_checkpoint(&counts, json);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Mount { img, mountpoint, options, foreground, log } => {
            let options = match &img.journal {
                Some(j) => format!("{options},journal_path={}", j.display()),
                None => options,
            };
            mount::mount(&img.image, &mountpoint, &options, foreground, log)
        }
        Cmd::Umount { mountpoint } => mount::umount(&mountpoint),
        Cmd::Stat { img, json } => {
            let (dev, jdev) = devices_inspect(&img)?;
            stat(&img, dev, jdev, json)
        }
        Cmd::Put { img, source, dest, options } => put(&img, &source, &dest, &format!("{STREAM_CACHE},{options}")),
        Cmd::Cat { img, path, options } => with_mount(&img, &format!("{STREAM_CACHE},{options}"), true, |fs| cat(fs, &path)).map(|_| ExitCode::SUCCESS),
        Cmd::Ls { img, path, long, options } => with_mount(&img, &options, true, |fs| ls(fs, &path, long)).map(|_| ExitCode::SUCCESS),
        Cmd::Mkdir { img, path, options } => {
            with_mount(&img, &options, false, |fs| fs.mkdir_path(&path).map(|_| ()).map_err(|e| format!("{path}: {e}"))).map(|_| ExitCode::SUCCESS)
        }
        Cmd::Rm { img, path, options } => with_mount(&img, &options, false, |fs| rm(fs, &path)).map(|_| ExitCode::SUCCESS),
        Cmd::JournalServer { listen, dir, secrets, no_auth, quota, max_connections, tls_cert, tls_key, tls_self_signed } => {
            let tls = match (tls_cert, tls_key, tls_self_signed) {
                (Some(c), Some(k), _) => Some(okeanos::remote::transport::server_tls(&c, &k).map_err(|e| format!("--tls-cert/--tls-key: {e}"))?),
                (_, _, Some(out)) => Some(self_signed(&listen, &out)?),
                _ => None,
            };
            journal_server(&listen, dir, secrets.as_deref(), no_auth, &quota, max_connections, tls)
        }
        Cmd::Bench(args) => bench::run(args),
        Cmd::InstallHelpers { root, bin } => helpers::install(&root, bin),
        Cmd::Completions { shell } => helpers::completions(shell),
        Cmd::Exercise { dir, seed, ops, keep } => {
            let seed = seed.unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64));
            let work = dir.join(format!("okeanos-exercise-{}", std::process::id()));
            std::fs::create_dir(&work).map_err(|e| format!("{}: {e}", work.display()))?;
            outln!("exercising {} with seed {seed}, {ops} operations", work.display());
            let mut t = okeanos::exercise::DirTarget { dir: work.clone() };
            let r = okeanos::exercise::run(&mut t, seed, ops, true);
            if !keep {
                let _ = std::fs::remove_dir_all(&work);
            }
            let s = r?;
            outln!("{} operations, {} checks against the model, no difference (seed {seed})", s.ops, s.checks);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Man => helpers::man(),
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

#[allow(clippy::too_many_arguments)]
fn mkfs(
    image: &Path,
    size: Option<&str>,
    block_size: u32,
    journal_size: Option<&str>,
    journal_device: Option<&Path>,
    remote_server: Option<String>,
    bytes_per_inode: u64,
    log_area_blocks: u32,
    label: String,
    force: bool,
    // Manylogs, with its group size if given.
    manylogs: Option<Option<u32>>,
    lazy_journal_init: bool,
) -> Result<ExitCode, String> {
    let created: Vec<PathBuf> = [Some(image), journal_device].into_iter().flatten().filter(|p| !p.exists()).map(Path::to_path_buf).collect();
    let made = (|| {
        let dev = prepare(image, size, force)?;
        let journal_blocks = match journal_size {
            Some(j) => parse_size(j)? / block_size.max(1) as u64,
            None => okeanos::fs::mkfs::default_journal_blocks(dev.len_bytes() / block_size.max(1) as u64),
        };
        let jdev = match journal_device {
            Some(j) => Some(prepare(j, Some(&format!("{}", journal_blocks * block_size as u64)), force)?),
            None => None,
        };
        let opts = MkfsOptions {
            block_size,
            journal_blocks,
            external_journal: jdev.is_some(),
            bytes_per_inode,
            log_area_blocks,
            blocks_per_group: manylogs.flatten(),
            manylogs: manylogs.is_some(),
            label,
            remote_server: remote_server.clone(),
            nvm_path: None,
            zero_journal: !lazy_journal_init,
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
    let jblocks = match sb.journal {
        JournalLocation::Internal { blocks, .. } | JournalLocation::External { blocks, .. } => blocks,
    };
    if let Some(r) = &sb.remote {
        outln!("{}: journal on the server {}, falling back to the internal journal of {} blocks", image.display(), r.server, jblocks);
    }
    if sb.manylogs() {
        let mib = |b: u64| b as f64 * sb.block_size as f64 / (1 << 20) as f64;
        outln!(
            "{}: {} blocks of {} bytes, {} inodes, manylogs: {} of {} blocks ({:.1} MiB), one in every group of {} blocks ({:.1} MiB)",
            image.display(),
            sb.block_count,
            sb.block_size,
            sb.inode_count,
            plural(sb.group_count as u64, "log", "logs"),
            sb.log_area_blocks,
            mib(sb.log_area_blocks as u64),
            sb.blocks_per_group,
            mib(sb.blocks_per_group as u64)
        );
        return Ok(ExitCode::SUCCESS);
    }
    outln!(
        "{}: {} blocks of {} bytes, {}, {} inodes, {} journal of {} blocks ({} MiB)",
        image.display(),
        sb.block_count,
        sb.block_size,
        plural(sb.group_count as u64, "group", "groups"),
        sb.inode_count,
        if external { "external" } else { "internal" },
        jblocks,
        jblocks * sb.block_size as u64 >> 20
    );
    Ok(ExitCode::SUCCESS)
}

/// `mkfs --journal nvm`: the image with an unused minimal internal journal, and the NVM (a
/// DAX device used as it is, or a file created with `nvm_bytes`) formatted as its journal.
#[allow(clippy::too_many_arguments)]
fn mkfs_nvm(image: &Path, size: Option<&str>, block_size: u32, journal_size: Option<&str>, nvm: &Path, nvm_bytes: u64, bytes_per_inode: u64, log_area_blocks: u32, label: String, force: bool) -> Result<ExitCode, String> {
    use std::os::unix::fs::FileTypeExt;
    let created: Vec<PathBuf> = [image, nvm].into_iter().filter(|p| !p.exists()).map(Path::to_path_buf).collect();
    let made = (|| {
        let dev = prepare(image, size, force)?;
        let journal_blocks = parse_size(journal_size.unwrap_or("1M"))? / block_size.max(1) as u64;
        let device = std::fs::metadata(nvm).map(|m| m.file_type().is_block_device() || m.file_type().is_char_device()).unwrap_or(false);
        let region = if device {
            okeanos::nvm::MappedNvm::open(nvm, true)
        } else {
            if nvm.exists() && !force {
                return Err(format!("{} exists: give --force to overwrite it", nvm.display()));
            }
            okeanos::nvm::MappedNvm::create(nvm, nvm_bytes, true)
        }
        .map_err(|e| e.to_string())?;
        let path = std::fs::canonicalize(nvm).map_err(|e| format!("{}: {e}", nvm.display()))?;
        let opts = MkfsOptions { block_size, journal_blocks, bytes_per_inode, log_area_blocks, label, nvm_path: Some(path.display().to_string()), ..Default::default() };
        let sb = Okeanos::mkfs_nvm(dev.as_ref(), &region, &opts).map_err(|e| e.to_string())?;
        use okeanos::nvm::Nvm;
        Ok::<_, String>((sb, path, region.len(), region.durability()))
    })();
    let (sb, path, len, durability) = match made {
        Ok(x) => x,
        Err(e) => {
            for p in &created {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    let h = okeanos::format::nvm::NvmHeader::layout(len, sb.block_size, sb.uuid).map_err(|e| e.to_string())?;
    outln!(
        "{}: {} blocks of {} bytes, {}, {} inodes, journal in NVM {} ({} MiB, {} slots; durable against {})",
        image.display(),
        sb.block_count,
        sb.block_size,
        plural(sb.group_count as u64, "group", "groups"),
        sb.inode_count,
        path.display(),
        len >> 20,
        h.slots,
        durability.describe()
    );
    Ok(ExitCode::SUCCESS)
}

/// fsck's exit codes, as e2fsck's: 0 clean, 1 errors corrected, 4 errors left uncorrected,
/// 8 operational error (nothing could be checked: not an Okeanos image, a missing journal, an
/// image in use without -n).
const FSCK_CORRECTED: u8 = 1;
const FSCK_UNCORRECTED: u8 = 4;
const FSCK_OPERATIONAL: u8 = 8;

fn fsck(img: &ImageArg, no_write: bool) -> Result<ExitCode, String> {
    match fsck_checked(img, no_write) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("okeanos fsck: {e}");
            Ok(ExitCode::from(FSCK_OPERATIONAL))
        }
    }
}

fn fsck_checked(img: &ImageArg, no_write: bool) -> Result<ExitCode, String> {
    let (mut dev, mut jdev) = if no_write { devices_inspect(img)? } else { devices(img, true).map_err(in_use_hint)? };
    if no_write {
        // A journal that needs recovery (a crashed image, or one mounted now: its journal is
        // live) is replayed into memory, as `ls` and `mount -o ro` do, and what it would give is
        // checked; nothing is written. Not for nvm and remote journals, whose recovery reaches
        // outside the image.
        let mounted = okeanos::device::lock::holder(&img.image);
        if let Some(h) = &mounted {
            outln!("{} is mounted (by {h}): checking what is on disk with its live journal replayed in memory", img.image.display());
        }
        let (sb, _) = okeanos::runtime::open::read_meta(dev.as_ref()).map_err(|e| e.to_string())?;
        if sb.nvm.is_none() && sb.remote.is_none() {
            let ov: Arc<dyn Device> = Arc::new(okeanos::device::OverlayDevice::new(dev.clone()));
            let jov = jdev.clone().map(|j| Arc::new(okeanos::device::OverlayDevice::new(j)) as Arc<dyn Device>);
            if let Some(r) = okeanos::inspect::recover_image(ov.clone(), jov.clone()).map_err(|e| e.to_string())? {
                let what = if mounted.is_some() { "the live journal" } else { "the journal needs recovery:" };
                outln!("{what} replayed in memory, nothing written ({} transactions, {} blocks)", r.transactions, r.blocks_replayed);
                if let Some(d) = &r.damage {
                    outln!("DAMAGE: {d}");
                }
                (dev, jdev) = (ov, jov);
            }
        }
    } else if let Some(r) = okeanos::inspect::recover_image(dev.clone(), jdev.clone()).map_err(|e| e.to_string())? {
        outln!("journal replayed: {} transactions ({}..={}), {} blocks", r.transactions, r.first_tid, r.last_tid, r.blocks_replayed);
        if let Some(d) = &r.damage {
            outln!("DAMAGE: {d}");
        }
    }
    let r = okeanos::fsck(dev.clone(), jdev.clone());
    if let Some(why) = &r.unreadable {
        return Err(why.clone());
    }
    outln!("journal: {}", r.journal);
    outln!(
        "{}, {}, {}, {}; {} and {} in use",
        plural(r.files, "file", "files"),
        plural(r.directories, "directory", "directories"),
        plural(r.symlinks, "symlink", "symlinks"),
        plural(r.orphans, "orphan", "orphans"),
        plural(r.blocks_used, "block", "blocks"),
        plural(r.inodes_used, "inode", "inodes")
    );
    if !no_write && r.only_error_state() {
        okeanos::inspect::clear_errors(dev, jdev).map_err(|e| e.to_string())?;
        outln!("every structure checks out; cleared the error state ({})", r.error_state.as_deref().unwrap_or(""));
        outln!("the file system may be mounted read-write again");
        return Ok(ExitCode::from(FSCK_CORRECTED));
    }
    for p in &r.problems {
        outln!("PROBLEM: {p}");
    }
    if r.is_clean() {
        outln!("clean");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{}", plural(r.problems.len() as u64, "problem", "problems"));
    Ok(ExitCode::from(FSCK_UNCORRECTED))
}

/// The readable form of an nvm journal's table.
fn nvm_summary(t: &okeanos::inspect::NvmTable) -> String {
    let a = &t.analysis;
    format!(
        "journal         nvm {} ({} slots of {} bytes; durable against {}), commit word {}: {} frozen copies to write home, {} clean, {} tombstones, {} above the commit word, {} torn{}",
        t.path,
        t.header.slots,
        t.header.block_size,
        t.durability.describe(),
        t.commit_word,
        a.frozen,
        a.clean,
        a.tombstones,
        a.uncommitted,
        a.invalid,
        if a.frozen + a.tombstones + a.uncommitted + a.invalid > 0 { " (needs recovery)" } else { "" }
    )
}

fn journal_dump(dev: Arc<dyn Device>, jdev: Option<Arc<dyn Device>>) -> Result<ExitCode, String> {
    if let Some(t) = okeanos::inspect::nvm_table(&dev).map_err(|e| e.to_string())? {
        outln!("{}", nvm_summary(&t));
        for &(block, slot, _) in &t.analysis.replay {
            outln!("  block {block}: newest committed copy in slot {slot}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let d = okeanos::inspect::dump_journal(dev, jdev).map_err(|e| e.to_string())?;
    outln!("journal: {}", d.state.summary);
    if d.state.kind != "manylogs" {
        outln!("ring: {} blocks ({}), start {}, sequence {}", d.jsb.total_blocks, d.region.name(), d.jsb.start, d.jsb.sequence);
    }
    use okeanos::format::journal::tag_flags;
    use okeanos::journal::recovery::ScanItem;
    for (t, rev) in d.transactions.iter().zip(&d.revoked) {
        let full = t.items.iter().filter(|i| matches!(i, ScanItem::Full { .. })).count();
        let meta = t.items.iter().filter(|i| i.tag().is_metadata()).count();
        outln!(
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
                ScanItem::Full { pos, .. } => outln!("  log {pos:>8} -> block {:>10}  {kind} whole block{flags}", g.fs_block),
                ScanItem::Record { bytes, .. } => outln!("  record     -> block {:>10}  {kind} {} bytes at {}{flags}", g.fs_block, bytes.len(), g.offset),
            }
        }
        for b in rev {
            outln!("  revoke block {b}");
        }
    }
    outln!("end of log: {}", d.end_reason);
    if let Some(dmg) = &d.damage {
        outln!("DAMAGE: {dmg}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What a checkpoint did, for people or as JSON.
pub fn print_checkpoint(c: &okeanos::stats::CheckpointCounts, json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(c).unwrap_or_default());
        return;
    }
    println!("checkpoint: {} blocks written home in {} device writes ({} copied from logs)", c.blocks, c.runs, c.copied);
    println!("skipped: {} logged copies of the released transactions (superseded by newer copies, or freed)", c.skipped);
}

fn stat(img: &ImageArg, dev: Arc<dyn Device>, jdev: Option<Arc<dyn Device>>, json: bool) -> Result<ExitCode, String> {
    let (sb, gdt, jsb, js) = okeanos::inspect::describe(dev.clone(), jdev).map_err(|e| e.to_string())?;
    let free_blocks: u64 = gdt.iter().map(|g| g.free_blocks as u64).sum();
    let free_inodes: u64 = gdt.iter().map(|g| g.free_inodes as u64).sum();
    let st = state::describe(sb.state);
    let jblocks = match sb.journal {
        JournalLocation::Internal { blocks, .. } | JournalLocation::External { blocks, .. } => blocks,
    };
    let in_use = okeanos::device::lock::holder(&img.image);
    if json {
        let v = serde_json::json!({
            "block_size": sb.block_size, "blocks": sb.block_count, "blocks_free": free_blocks,
            "inodes": sb.inode_count, "inodes_free": free_inodes, "groups": sb.group_count,
            "state": st, "errors": sb.state & state::ERRORS != 0, "error": sb.error, "in_use_by": in_use,
            "mount_count": sb.mount_count, "journal": js.kind, "journal_blocks": jblocks, "journal_state": js.summary,
            "journal_clean": !js.needs_recovery && js.problem.is_none(), "mkfs_time_ns": sb.mkfs_time_ns, "journal_sequence": js.next_tid,
            "remote_server": sb.remote.as_ref().map(|r| r.server.clone()),
            "remote_fallen_back": sb.remote.as_ref().map(|_| jsb.remote.local), "remote_epoch": sb.remote.as_ref().map(|_| jsb.remote.epoch),
            "lifetime": sb.lifetime, "lifetime_as_of": "the last clean unmount",
        });
        outln!("{v:#}");
        return Ok(ExitCode::SUCCESS);
    }
    outln!("block size      {}", sb.block_size);
    outln!("blocks          {} ({} free)", sb.block_count, free_blocks);
    outln!("inodes          {} ({} free)", sb.inode_count, free_inodes);
    outln!("groups          {} of {} blocks, {} inodes", sb.group_count, sb.blocks_per_group, sb.inodes_per_group);
    outln!("state           {st}, mounted {}", plural(sb.mount_count as u64, "time", "times"));
    if sb.error.tid != 0 {
        outln!("error           journal transaction {} damaged, {} after it not replayed", sb.error.tid, plural(sb.error.following, "transaction", "transactions"));
    }
    if let Some(h) = &in_use {
        outln!("in use by       {h}");
    }
    if sb.nvm.is_some() {
        match okeanos::inspect::nvm_table(&dev) {
            Ok(Some(t)) => outln!("{}", nvm_summary(&t)),
            Ok(None) => {}
            Err(e) => outln!("journal         nvm: {e}"),
        }
    } else {
        outln!("journal         {}", js.summary);
    }
    if let Some(r) = &sb.remote {
        if jsb.remote.local {
            outln!("remote journal  {} (epoch {}): fell back to the internal journal after transaction {}; returns at the next mount that reaches the server", r.server, jsb.remote.epoch, jsb.remote.upto);
        } else {
            outln!("remote journal  {} (epoch {}), the internal journal is its fallback", r.server, jsb.remote.epoch);
        }
    }
    let l = &sb.lifetime;
    // Kept in the superblock at each clean unmount: a mount that crashed is not counted.
    let crashed = if js.needs_recovery || sb.state & state::CLEAN == 0 { ", not counting the mount that did not unmount cleanly" } else { "" };
    outln!("lifetime        to the last clean unmount{crashed}:");
    outln!("                {} commits, {} syncs", l.commits, l.syncs);
    outln!("                {} payload bytes, {} journal bytes, {} final-location bytes", l.payload_bytes, l.journal_bytes, l.final_bytes);
    if l.payload_bytes > 0 {
        outln!("                {:.2} journal and {:.2} final-location bytes per payload byte", l.journal_bytes as f64 / l.payload_bytes as f64, l.final_bytes as f64 / l.payload_bytes as f64);
    }
    Ok(ExitCode::SUCCESS)
}

/// Bytes `put` and `cat` move per call.
const CHUNK: usize = 1 << 20;
/// `put` syncs after every this many chunks, so that the data the engine holds until a commit
/// stays bounded too.
const SYNC_CHUNKS: u64 = 8;
/// The buffer cache of `put` and `cat` (the user's `-o cache_blocks=` comes later and wins):
/// with it, the chunks and the sync step, memory stays at a few tens of MiB whatever the file's
/// size (data journaling also holds the blocks it owes to a checkpoint: at most the journal).
const STREAM_CACHE: &str = "cache_blocks=1024";

/// Copies in chunks, syncing every so often so that the engine's dirty data stays bounded too;
/// a failure removes the file it created (nothing half-copied is left under the name).
fn put(img: &ImageArg, source: &Path, dest: &str, options: &str) -> Result<ExitCode, String> {
    use std::io::Read;
    let mut src = std::fs::File::open(source).map_err(|e| format!("{}: {e}", source.display()))?;
    if src.metadata().map_err(|e| format!("{}: {e}", source.display()))?.is_dir() {
        return Err(format!("{} is a directory", source.display()));
    }
    with_mount(img, options, false, |fs| {
        let base = source.file_name().map(|n| n.to_string_lossy().into_owned()).ok_or_else(|| format!("{} has no file name", source.display()))?;
        let into_dir = dest.ends_with('/') || fs.resolve(dest).and_then(|i| fs.getattr(i)).is_ok_and(|a| a.kind == okeanos::format::FileType::Directory);
        let dest = if into_dir { format!("{}/{base}", dest.trim_end_matches('/')) } else { dest.to_string() };
        let existed = fs.resolve(&dest).is_ok();
        let mut copy = || -> Result<(), String> {
            let f = fs.create_file(&dest).map_err(|e| format!("{dest}: {e}"))?;
            let mut buf = vec![0u8; CHUNK];
            let mut off = 0u64;
            loop {
                let n = src.read(&mut buf).map_err(|e| format!("{}: {e}", source.display()))?;
                if n == 0 {
                    break;
                }
                f.write_at(off, &buf[..n]).map_err(|e| format!("{dest}: {e}"))?;
                off += n as u64;
                if off % (SYNC_CHUNKS * CHUNK as u64) < n as u64 {
                    f.fdatasync().map_err(|e| format!("{dest}: {e}"))?;
                }
            }
            f.fsync().map_err(|e| format!("{dest}: {e}"))
        };
        let r = copy();
        if r.is_err() && !existed {
            let _ = fs.remove_path(&dest);
        }
        r
    })?;
    Ok(ExitCode::SUCCESS)
}

fn cat(fs: &Okeanos, path: &str) -> Result<(), String> {
    use std::io::Write;
    let ino = fs.resolve(path).map_err(|e| format!("{path}: {e}"))?;
    let a = fs.getattr(ino).map_err(|e| format!("{path}: {e}"))?;
    if a.kind == okeanos::format::FileType::Directory {
        return Err(format!("{path}: is a directory"));
    }
    let mut o = std::io::stdout().lock();
    let mut off = 0u64;
    while off < a.size {
        let data = fs.read(ino, off, CHUNK).map_err(|e| format!("{path}: {e}"))?;
        if data.is_empty() {
            break;
        }
        o.write_all(&data).map_err(|e| format!("stdout: {e}"))?;
        off += data.len() as u64;
    }
    o.flush().map_err(|e| format!("stdout: {e}"))
}

fn ls(fs: &Okeanos, path: &str, long: bool) -> Result<(), String> {
    let entries = fs.list_path(path).map_err(|e| format!("{path}: {e}"))?;
    if long {
        outln!("{:<11} {:>5} {:>5} {:>5} {:>12} {:<19} {:>8} NAME", "MODE", "LINKS", "UID", "GID", "SIZE", "MODIFIED (UTC)", "INODE");
    }
    for e in entries {
        let name = String::from_utf8_lossy(&e.name);
        if !long {
            outln!("{name}");
            continue;
        }
        let a = fs.getattr(e.ino).map_err(|e| e.to_string())?;
        let t = match a.kind {
            okeanos::format::FileType::Directory => 'd',
            okeanos::format::FileType::Symlink => 'l',
            okeanos::format::FileType::Regular => '-',
            okeanos::format::FileType::Fifo => 'p',
            okeanos::format::FileType::CharDevice => 'c',
            okeanos::format::FileType::BlockDevice => 'b',
            okeanos::format::FileType::Socket => 's',
        };
        outln!("{t}{:<10} {:>5} {:>5} {:>5} {:>12} {:<19} {:>8} {name}", rwx(a.perm), a.nlink, a.uid, a.gid, a.size, utc(a.mtime_ns), a.ino);
    }
    Ok(())
}

/// "rwxr-xr-x" from permission bits.
fn rwx(perm: u32) -> String {
    (0..9).map(|i| if perm & (1 << (8 - i)) != 0 { ['r', 'w', 'x'][i % 3] } else { '-' }).collect()
}

/// "2026-11-22 16:23:57" from ns since the epoch (UTC; civil-from-days, Howard Hinnant).
fn utc(ns: i64) -> String {
    let secs = ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

fn rm(fs: &Okeanos, path: &str) -> Result<(), String> {
    if path.trim_matches('/').is_empty() {
        return Err(format!("{path}: cannot remove the root directory"));
    }
    let ino = fs.resolve(path).map_err(|e| format!("{path}: {e}"))?;
    let r = match fs.getattr(ino).map_err(|e| e.to_string())?.kind {
        okeanos::format::FileType::Directory => fs.rmdir_path(path),
        _ => fs.remove_path(path),
    };
    r.map_err(|e| format!("{path}: {e}"))
}

/// Reads "host-name secret" lines; refuses a file others can read.
fn read_secrets(path: &Path) -> Result<std::collections::HashMap<String, Vec<u8>>, String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!("{}: secrets must not be readable by others (chmod 600)", path.display()));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = std::collections::HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.split_once(char::is_whitespace) {
            Some((host, secret)) if !secret.trim().is_empty() => {
                out.insert(host.to_string(), secret.trim().as_bytes().to_vec());
            }
            _ => return Err(format!("{}:{}: expected \"host-name secret\"", path.display(), n + 1)),
        }
    }
    if out.is_empty() {
        return Err(format!("{}: no hosts", path.display()));
    }
    Ok(out)
}

/// A self-signed certificate for the host of `listen` (and 127.0.0.1, localhost), its PEM
/// written to `out`, the key in memory only.
fn self_signed(listen: &str, out: &Path) -> Result<okeanos::remote::transport::ServerTls, String> {
    let host = okeanos::remote::transport::host_of(listen);
    let mut names = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    if !names.iter().any(|n| n == host) && host != "0.0.0.0" && host != "::" {
        names.push(host.to_string());
    }
    let c = rcgen::generate_simple_self_signed(names).map_err(|e| format!("--tls-self-signed: {e}"))?;
    std::fs::write(out, c.cert.pem()).map_err(|e| format!("--tls-self-signed {}: {e}", out.display()))?;
    okeanos::remote::transport::server_tls_pem(c.cert.pem().as_bytes(), c.key_pair.serialize_pem().as_bytes()).map_err(|e| format!("--tls-self-signed: {e}"))
}

fn journal_server(listen: &str, dir: PathBuf, secrets: Option<&Path>, no_auth: bool, quota: &str, max_connections: usize, tls: Option<okeanos::remote::transport::ServerTls>) -> Result<ExitCode, String> {
    use std::io::Write;
    let secrets = match (secrets, no_auth) {
        (Some(p), _) => Some(read_secrets(p)?),
        (None, true) => None,
        (None, false) => return Err("give --secrets FILE (or --no-auth to accept every host, for tests on 127.0.0.1)".into()),
    };
    let quota_bytes = parse_size(quota)?;
    if max_connections == 0 {
        return Err("--max-connections must be at least 1".into());
    }
    let tls_note = if tls.is_some() { ", TLS" } else { "" };
    let cfg = okeanos::remote::server::ServerConfig { dir: dir.clone(), secrets, quota_bytes, max_connections, tls };
    let server = okeanos::remote::server::Server::bind(listen, cfg).map_err(|e| format!("listen on {listen} (journals in {}): {e}", dir.display()))?;
    let addr = server.local_addr().map_err(|e| e.to_string())?;
    println!("okeanos journal-server listening on {addr}{tls_note}, journals in {}", dir.display());
    let _ = std::io::stdout().flush();
    let stop = server.stop_flag();
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT]).map_err(|e| e.to_string())?;
    std::thread::spawn(move || {
        if signals.forever().next().is_some() {
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            // Wake the accept loop.
            let _ = std::net::TcpStream::connect(addr);
        }
    });
    server.run();
    eprintln!("okeanos journal-server stopped: {}", server.stats().summary());
    Ok(ExitCode::SUCCESS)
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
