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
    /// Turn journal features on or off on an unmounted file system whose journal is clean (as
    /// tune2fs -O does): the forms of commit a newer binary writes, for an image made before
    /// them (fast_commit, fast_commit_span, fast_commit_compact, fast_commit_notes, fast_commit_short_notes, in_place_tags), or off again so that an older
    /// binary can mount it. Without --enable or --disable, prints the journal's features.
    Tune {
        #[command(flatten)]
        img: ImageArg,
        /// Features to turn on, comma-separated, or `all` for every one mkfs sets today.
        #[arg(long, value_name = "FEATURES", value_delimiter = ',')]
        enable: Vec<String>,
        /// Features to turn off, comma-separated.
        #[arg(long, value_name = "FEATURES", value_delimiter = ',')]
        disable: Vec<String>,
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
    /// Block-level manylogs (MLB) disks: create, serve over NBD, check, stat, checkpoint.
    Blockdev {
        #[command(subcommand)]
        cmd: BlockdevCmd,
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

// After the macro, which the commands use.
mod commands;
use commands::*;

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
    if !matches!(cli.cmd, Cmd::Mount { .. } | Cmd::Bench(_) | Cmd::JournalServer { .. } | Cmd::Blockdev { cmd: BlockdevCmd::Serve { .. } }) {
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
        Cmd::Tune { img, enable, disable } => tune(&img, &enable, &disable),
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
        Cmd::Blockdev { cmd } => blockdev(cmd),
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
