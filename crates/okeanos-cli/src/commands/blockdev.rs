//! `okeanos blockdev`: block-level manylogs (MLB) disks. Make one, export it over NBD, check
//! it, show its map and logs, and checkpoint it (docs/MLB.md).

use crate::*;
use okeanos::device::{MlbDevice, MlbGeometry, OverlayDevice};
use okeanos::nbd::{NbdConfig, NbdServer};

#[derive(clap::Subcommand)]
pub(crate) enum BlockdevCmd {
    /// Make an MLB disk on a file (created with --size if missing) or a block device.
    Create {
        disk: PathBuf,
        /// Size of a new file, such as 1G (default: the size of an existing file or device).
        #[arg(long)]
        size: Option<String>,
        /// The size of a group, data then log, such as 100M (the paper's GroupSize; the default
        /// is 100M, or a quarter of a disk smaller than 400M).
        #[arg(long, value_name = "SIZE")]
        log_group_size: Option<String>,
        /// The size of every group's log, such as 10M (default: a tenth of the group).
        #[arg(long, value_name = "SIZE")]
        log_size: Option<String>,
        /// Writes of at most this many bytes are logged (LoggedWriteSize: 256K as MLB-256, the
        /// default, or 32K as MLB-32).
        #[arg(long, value_name = "SIZE")]
        logged_write_size: Option<String>,
        /// Overwrite an existing MLB disk or Okeanos file system (never one in use).
        #[arg(long)]
        force: bool,
    },
    /// Export an MLB disk over NBD (fixed newstyle; FLUSH, FUA, TRIM and WRITE_ZEROES) until
    /// SIGTERM or SIGINT, then snapshot its map. A client's FLUSH (or FUA write) returns once
    /// what it covers is durable on the disk.
    Serve {
        disk: PathBuf,
        /// Address to listen on, such as 127.0.0.1:10809 (port 0: any free port, printed).
        #[arg(long, value_name = "HOST:PORT")]
        nbd: String,
        /// The export's name (a client asking for the default export, "", gets it too).
        #[arg(long, default_value = "okeanos")]
        name: String,
        /// Most clients served at once; more are refused.
        #[arg(long, default_value = "16")]
        max_connections: usize,
        /// Refuse writes.
        #[arg(long)]
        read_only: bool,
        /// Export DISK as it is, without MLB (any file or device): the baseline of a
        /// comparison through the same server.
        #[arg(long)]
        plain: bool,
        /// Time every I/O on DISK as this device model says, in real time (timed emulation,
        /// as `okeanos mount -o device_model=`): sata7200, cheetah15k, ... (`okeanos sim models`).
        #[arg(long, value_name = "PRESET")]
        device_model: Option<String>,
    },
    /// Check that every log holds whole records from tail to head and every map entry points
    /// at its block in one of them; exits 0 clean, 4 with problems, 8 when it cannot check.
    /// Changes nothing (recovery runs in memory).
    Check {
        disk: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The disk's geometry, its map (MTL table) size and how full each log is. Changes
    /// nothing (recovery runs in memory).
    Stat {
        disk: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Copy every logged block home and empty the logs (the paper's off-hours checkpoint);
    /// prints the blocks copied and the time it took.
    Checkpoint {
        disk: PathBuf,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Opens a disk for inspection: unlocked if someone serves it (said on stderr), recovery into
/// memory only.
fn open_read_only(disk: &Path) -> Result<MlbDevice, String> {
    let base = open_inspect(disk)?;
    MlbDevice::open(Arc::new(OverlayDevice::new(base))).map_err(|e| format!("{}: {e}", disk.display()))
}

fn open_locked(disk: &Path) -> Result<MlbDevice, String> {
    let dev = open_dev(disk, true)?;
    MlbDevice::open(dev).map_err(|e| format!("{}: {e}", disk.display()))
}

fn mib(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes >> 10)
    }
}

pub(crate) fn blockdev(cmd: BlockdevCmd) -> Result<ExitCode, String> {
    match cmd {
        BlockdevCmd::Create { disk, size, log_group_size, log_size, logged_write_size, force } => {
            if let Some(s) = &size {
                let bytes = parse_size(s)?;
                if !disk.exists() {
                    let f = std::fs::File::create(&disk).map_err(|e| format!("{}: {e}", disk.display()))?;
                    f.set_len(bytes).map_err(|e| format!("{}: {e}", disk.display()))?;
                }
            } else if !disk.exists() {
                return Err(format!("{} does not exist: give --size to make a new file", disk.display()));
            }
            let dev = open_dev(&disk, true)?;
            if !force {
                let mut b = vec![0u8; 4096.min(dev.len_bytes() as usize)];
                if b.len() == 4096 {
                    dev.read_at(0, &mut b).map_err(|e| e.to_string())?;
                    if okeanos::format::mlb::MlbSuper::decode(&b).is_ok() {
                        return Err(format!("{} is an MLB disk already: give --force to make a new one over it", disk.display()));
                    }
                    if okeanos::format::Superblock::decode(&b).is_ok() {
                        return Err(format!("{} holds an Okeanos file system: give --force to make an MLB disk over it", disk.display()));
                    }
                }
            }
            let mut g = MlbGeometry::for_disk(dev.len_bytes());
            if let Some(v) = &log_group_size {
                g.group_bytes = parse_size(v)?;
                if log_size.is_none() {
                    g.log_bytes = MlbGeometry::log_for(g.group_bytes);
                }
            }
            if let Some(v) = &log_size {
                g.log_bytes = parse_size(v)?;
            }
            if let Some(v) = &logged_write_size {
                g.logged_write_bytes = parse_size(v)?;
            } else {
                g.logged_write_bytes = MlbGeometry::logged_for(g.log_bytes);
            }
            let sb = MlbDevice::create(&*dev, g).map_err(|e| format!("{}: {e}", disk.display()))?;
            outln!(
                "{}: MLB disk of {} bytes exported ({} on disk): {} groups of {}, each with a log of {}; writes of at most {} are logged; map snapshots of {} x 2",
                disk.display(),
                sb.user_bytes,
                sb.disk_bytes,
                sb.groups,
                mib(sb.group_blocks as u64 * 4096),
                mib(sb.log_blocks as u64 * 4096),
                mib(sb.logged_write_blocks as u64 * 4096),
                mib(sb.snapshot_blocks as u64 * 4096)
            );
            Ok(ExitCode::SUCCESS)
        }
        BlockdevCmd::Serve { disk, nbd, name, max_connections, read_only, plain, device_model } => {
            use std::io::Write;
            if max_connections == 0 {
                return Err("--max-connections must be at least 1".into());
            }
            let mut base = open_dev(&disk, true)?;
            if let Some(m) = &device_model {
                let model = okeanos::models::preset(m).map_err(|e| format!("--device-model: {e}"))?;
                base = Arc::new(okeanos::device::TimedDevice::new(base, model));
            }
            let mlb = if plain { None } else { Some(Arc::new(MlbDevice::open(base.clone()).map_err(|e| format!("{}: {e}", disk.display()))?)) };
            let dev: Arc<dyn Device> = match &mlb {
                Some(m) => m.clone(),
                None => base.clone(),
            };
            let server = Arc::new(NbdServer::bind(&nbd, dev.clone(), NbdConfig { name: name.clone(), max_connections, read_only }).map_err(|e| format!("listen on {nbd}: {e}"))?);
            let addr = server.local_addr().map_err(|e| e.to_string())?;
            let recovered = mlb.as_ref().map_or(0, |m| m.stats().recovered_records);
            let what = if plain { ", plain: no MLB" } else { "" };
            let timed = device_model.as_deref().map_or(String::new(), |m| format!(", timed as {m}"));
            println!(
                "okeanos blockdev: serving {} ({} bytes, export {name:?}{what}{timed}) on nbd://{addr}{}",
                disk.display(),
                dev.len_bytes(),
                if recovered > 0 { format!("; recovered {recovered} records") } else { String::new() }
            );
            let _ = std::io::stdout().flush();
            super::server::stop_on_signal(server.stop_flag(), addr)?;
            // Idle work (log swaps of logs over 80% full, §III-G) once no request came for
            // IDLE; between swaps it looks again, so a request that arrives waits for at most
            // the swap under way.
            let idle = mlb.clone().map(|m| {
                let (server, stop) = (server.clone(), server.stop_flag());
                std::thread::spawn(move || {
                    const IDLE: std::time::Duration = std::time::Duration::from_millis(100);
                    let mut seen = server.activity();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::thread::sleep(IDLE);
                        let now = server.activity();
                        if now == seen {
                            while server.activity() == now && !stop.load(std::sync::atomic::Ordering::Relaxed) {
                                match m.idle_work() {
                                    Ok(true) => {}
                                    Ok(false) => break,
                                    Err(e) => {
                                        eprintln!("okeanos blockdev: idle work: {e}");
                                        return;
                                    }
                                }
                            }
                        }
                        seen = now;
                    }
                })
            });
            server.run();
            if let Some(t) = idle {
                let _ = t.join();
            }
            eprintln!("okeanos blockdev: stopped: {}", server.stats().summary());
            drop(server);
            drop(dev);
            match mlb {
                Some(m) => {
                    let st = m.stats();
                    eprintln!(
                        "okeanos blockdev: MLB: {} writes logged, {} in place, {} log swaps ({} when idle), {} checkpoints, {} blocks mapped",
                        st.logged_writes, st.in_place_writes, st.log_swaps, st.idle_swaps, st.checkpoints, st.mapped_blocks
                    );
                    let m = Arc::try_unwrap(m).map_err(|_| "the device is still shared after the server stopped".to_string())?;
                    m.close().map_err(|e| format!("{}: snapshot at exit: {e}", disk.display()))?;
                }
                None => base.flush().map_err(|e| format!("{}: flush at exit: {e}", disk.display()))?,
            }
            Ok(ExitCode::SUCCESS)
        }
        BlockdevCmd::Check { disk, json } => {
            let dev = match open_read_only(&disk) {
                Ok(d) => d,
                Err(e) => {
                    eprintln!("okeanos: {e}");
                    return Ok(ExitCode::from(8));
                }
            };
            let c = dev.check().map_err(|e| e.to_string())?;
            if json {
                outln!("{}", serde_json::to_string_pretty(&c).unwrap_or_default());
            } else {
                outln!("{}: {} records in the logs, {} blocks mapped", disk.display(), c.records, c.mapped_blocks);
                for p in &c.problems {
                    outln!("PROBLEM: {p}");
                }
                if c.is_clean() {
                    outln!("clean");
                }
            }
            Ok(if c.is_clean() { ExitCode::SUCCESS } else { ExitCode::from(4) })
        }
        BlockdevCmd::Stat { disk, json } => {
            let dev = open_read_only(&disk)?;
            let sb = dev.superblock().clone();
            let st = dev.stats();
            if json {
                let v = serde_json::json!({
                    "disk": disk.display().to_string(),
                    "disk_bytes": sb.disk_bytes,
                    "user_bytes": sb.user_bytes,
                    "groups": sb.groups,
                    "group_bytes": sb.group_blocks as u64 * 4096,
                    "log_bytes": sb.log_blocks as u64 * 4096,
                    "logged_write_bytes": sb.logged_write_blocks as u64 * 4096,
                    "stats": st,
                });
                outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
                return Ok(ExitCode::SUCCESS);
            }
            let used: u64 = st.log_used_sectors.iter().sum();
            let busy = st.log_used_sectors.iter().filter(|&&u| u > 0).count();
            let fullest = st.log_used_sectors.iter().copied().max().unwrap_or(0);
            outln!("disk: {} ({} bytes; {} exported)", disk.display(), sb.disk_bytes, sb.user_bytes);
            outln!("groups: {} of {}, logs of {}; writes of at most {} are logged", sb.groups, mib(sb.group_blocks as u64 * 4096), mib(sb.log_blocks as u64 * 4096), mib(sb.logged_write_blocks as u64 * 4096));
            outln!("map: {} blocks logged; the table is {} bytes", st.mapped_blocks, st.table_bytes);
            outln!(
                "logs: {busy} of {} hold records, {} KiB in all; the fullest is {:.0}% full",
                sb.groups,
                used * 512 / 1024,
                100.0 * fullest as f64 / st.log_sectors as f64
            );
            outln!("recovery (in memory) found {} records past the map's snapshot; epoch {}", st.recovered_records, st.epoch);
            Ok(ExitCode::SUCCESS)
        }
        BlockdevCmd::Checkpoint { disk, json } => {
            let dev = open_locked(&disk)?;
            let before = dev.stats();
            let t = std::time::Instant::now();
            let blocks = dev.checkpoint_all().map_err(|e| format!("checkpoint: {e}"))?;
            let secs = t.elapsed().as_secs_f64();
            dev.close().map_err(|e| e.to_string())?;
            if json {
                outln!("{}", serde_json::json!({ "blocks": blocks, "mapped_before": before.mapped_blocks, "seconds": secs }));
            } else {
                outln!("checkpoint: {blocks} blocks copied home in {secs:.3} s; the logs are empty");
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
