//! Where a benchmark runs: the library in-process (`engine`: an image file with an internal
//! journal, `engine:external` with an external journal file, `engine:loop` on two loop
//! devices), any mounted directory (`mount:PATH`, such as an Okeanos FUSE mount), or a Linux
//! file system the command makes on loop devices (`kernel:ext4-journal`, `kernel:ext4-ordered`,
//! `kernel:ext4-writeback`, `kernel:ext4-fastcommit`, `kernel:xfs`), or no file system at all
//! (`device:loop`, the floor line: bench/rawdev.rs; `device:jetstream`, the JetStream placement's:
//! bench/rawstream.rs). An [`Env`] is one prepared target for one mode:
//! it opens stream files, measures what has been written so far, and finishes (sync and
//! unmount, so deferred writes are counted).

use super::loopdev::{self, LoopSet};
use crate::report::{Bytes, DeviceBytes};
use okeanos::device::FileDevice;
use okeanos::journal::content::ContentConfig;
use okeanos::{Device, MkfsOptions, MountOptions, Okeanos};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The library: an image file (internal journal), with an external journal file, on loop
    /// devices, or with a remote journal on a journal server this benchmark starts on
    /// 127.0.0.1.
    Engine(Placement),
    Mount(PathBuf),
    Kernel(String),
    /// The floor line: a raw loop device, each record one 4 KiB O_DIRECT write and a flush
    /// (bench/rawdev.rs).
    Device,
    /// The JetStream placement's floor line: each record one acknowledged message on a 3-node
    /// R3 cluster on 127.0.0.1 (bench/rawstream.rs).
    StreamFloor,
}

/// Where the engine target's file system and journal are: one value per placement, each with its
/// own target name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Placement {
    /// An image file with its internal journal (`engine`).
    Image,
    /// An image file and an external journal file (`engine:external`).
    External,
    /// A loop device and an external journal on a second loop device, O_DIRECT (`engine:loop`).
    Loop,
    /// A loop device, the journal in an NVM file on tmpfs (`engine:nvm`).
    Nvm,
    /// A loop device formatted with a log in every group (`engine:manylogs`).
    Manylogs,
    /// An image file, the journal on a journal server this benchmark starts on 127.0.0.1,
    /// over TLS or not (`engine:remote`, `engine:remote-tls`).
    Remote { tls: bool },
    /// An image file, the journal on a 3-node NATS JetStream cluster on 127.0.0.1.
    JetStream(NatsSync),
}

impl Placement {
    const ALL: [Placement; 9] = [
        Placement::Image,
        Placement::External,
        Placement::Loop,
        Placement::Nvm,
        Placement::Manylogs,
        Placement::Remote { tls: false },
        Placement::Remote { tls: true },
        Placement::JetStream(NatsSync::Always),
        Placement::JetStream(NatsSync::Default),
    ];

    fn parse(s: &str) -> Option<Placement> {
        Placement::ALL.into_iter().find(|p| p.name() == s)
    }

    pub fn name(self) -> &'static str {
        match self {
            Placement::Image => "engine",
            Placement::External => "engine:external",
            Placement::Loop => "engine:loop",
            Placement::Nvm => "engine:nvm",
            Placement::Manylogs => "engine:manylogs",
            Placement::Remote { tls: false } => "engine:remote",
            Placement::Remote { tls: true } => "engine:remote-tls",
            Placement::JetStream(NatsSync::Always) => "engine:jetstream",
            Placement::JetStream(NatsSync::Default) => "engine:jetstream-default-fsync",
        }
    }

    /// On loop devices (root).
    fn loop_devices(self) -> bool {
        matches!(self, Placement::Loop | Placement::Nvm | Placement::Manylogs)
    }
}

pub const KERNEL_KINDS: [&str; 5] = ["ext4-journal", "ext4-ordered", "ext4-writeback", "ext4-fastcommit", "xfs"];

impl Target {
    pub fn parse(s: &str) -> Result<Target, String> {
        if let Some(p) = Placement::parse(s) {
            return Ok(Target::Engine(p));
        }
        match s {
            "engine:image" => Ok(Target::Engine(Placement::Image)),
            "device:loop" => Ok(Target::Device),
            "device:jetstream" => Ok(Target::StreamFloor),
            _ => {
                if let Some(p) = s.strip_prefix("mount:") {
                    let p = PathBuf::from(p);
                    if !p.is_dir() {
                        return Err(format!("target {s}: {} is not a directory", p.display()));
                    }
                    Ok(Target::Mount(p))
                } else if let Some(k) = s.strip_prefix("kernel:") {
                    if !KERNEL_KINDS.contains(&k) {
                        return Err(format!("target {s}: use kernel:{}", KERNEL_KINDS.join(", kernel:")));
                    }
                    Ok(Target::Kernel(k.to_string()))
                } else {
                    Err(format!("unknown target {s:?}: use engine, engine:external, engine:loop, engine:nvm, engine:manylogs, engine:remote, engine:remote-tls, engine:jetstream, engine:jetstream-default-fsync, mount:PATH, kernel:ext4-journal|ext4-ordered|ext4-writeback|ext4-fastcommit|xfs, device:loop or device:jetstream"))
                }
            }
        }
    }

    pub fn name(&self) -> String {
        match self {
            Target::Engine(p) => p.name().into(),
            Target::Mount(p) => format!("mount:{}", p.display()),
            Target::Kernel(k) => format!("kernel:{k}"),
            Target::Device => "device:loop".into(),
            Target::StreamFloor => "device:jetstream".into(),
        }
    }

    /// The mode column of a target that has one mode of its own.
    pub fn mode_name(&self) -> String {
        match self {
            Target::Kernel(k) => k.clone(),
            Target::Mount(_) => "mount".into(),
            Target::Engine(_) => "engine".into(),
            Target::Device => "raw-4k-write+flush".into(),
            Target::StreamFloor => "r3-append+ack".into(),
        }
    }

    /// Whether `--modes` applies (the engine), or the target has one mode of its own.
    pub fn takes_modes(&self) -> bool {
        matches!(self, Target::Engine(_))
    }

    pub fn needs_root(&self) -> bool {
        match self {
            Target::Kernel(_) | Target::Device => true,
            Target::Engine(p) => p.loop_devices(),
            Target::Mount(_) | Target::StreamFloor => false,
        }
    }
}

/// Cumulative counts of a target at one moment.
#[derive(Debug, Clone, Default)]
pub struct Measure {
    pub bytes: Bytes,
    pub commits: Option<u64>,
    pub device: Option<DeviceBytes>,
    pub counters: Option<okeanos::Counters>,
}

impl Measure {
    /// `self - base`, field by field.
    pub fn since(&self, base: &Measure) -> Measure {
        let sub = |a: Option<u64>, b: Option<u64>| a.map(|a| a - b.unwrap_or(0));
        let mut per_kind = self.bytes.per_kind.clone();
        for (k, v) in per_kind.iter_mut() {
            *v -= base.bytes.per_kind.get(k).copied().unwrap_or(0);
        }
        Measure {
            bytes: Bytes {
                payload_bytes: self.bytes.payload_bytes - base.bytes.payload_bytes,
                journal_bytes: sub(self.bytes.journal_bytes, base.bytes.journal_bytes),
                final_bytes: sub(self.bytes.final_bytes, base.bytes.final_bytes),
                per_kind,
            },
            commits: sub(self.commits, base.commits),
            device: match (&self.device, &base.device) {
                (Some(a), Some(b)) => Some(DeviceBytes {
                    source: a.source.clone(),
                    fs_written: a.fs_written - b.fs_written,
                    journal_written: sub(a.journal_written, b.journal_written),
                    flushes: sub(a.flushes, b.flushes),
                }),
                (a, _) => a.clone(),
            },
            counters: match (&self.counters, &base.counters) {
                (Some(a), Some(b)) => Some(a.since(b)),
                (a, _) => a.clone(),
            },
        }
    }
}

/// A stream file: a library handle or an ordinary file.
pub trait Stream: Send {
    fn append(&mut self, data: &[u8]) -> Result<(), String>;
    fn write_at(&mut self, off: u64, data: &[u8]) -> Result<(), String>;
    fn read_at(&mut self, off: u64, len: usize) -> Result<usize, String>;
    fn sync(&mut self, full: bool) -> Result<(), String>;
}

impl Stream for okeanos::File {
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        okeanos::File::append(self, data).map(|_| ()).map_err(|e| e.to_string())
    }
    fn write_at(&mut self, off: u64, data: &[u8]) -> Result<(), String> {
        okeanos::File::write_at(self, off, data).map(|_| ()).map_err(|e| e.to_string())
    }
    fn read_at(&mut self, off: u64, len: usize) -> Result<usize, String> {
        okeanos::File::read_at(self, off, len).map(|v| v.len()).map_err(|e| e.to_string())
    }
    fn sync(&mut self, full: bool) -> Result<(), String> {
        if full { self.fsync() } else { self.fdatasync() }.map_err(|e| e.to_string())
    }
}

impl Stream for std::fs::File {
    fn append(&mut self, data: &[u8]) -> Result<(), String> {
        std::io::Write::write_all(self, data).map_err(|e| e.to_string())
    }
    fn write_at(&mut self, off: u64, data: &[u8]) -> Result<(), String> {
        std::os::unix::fs::FileExt::write_all_at(self, data, off).map_err(|e| e.to_string())
    }
    fn read_at(&mut self, off: u64, len: usize) -> Result<usize, String> {
        let mut buf = vec![0u8; len];
        std::os::unix::fs::FileExt::read_at(self, &mut buf, off).map_err(|e| e.to_string())
    }
    fn sync(&mut self, full: bool) -> Result<(), String> {
        if full { self.sync_all() } else { self.sync_data() }.map_err(|e| e.to_string())
    }
}

/// How to size and mount a target.
#[derive(Debug, Clone)]
pub struct Setup {
    /// Where image files and loop-device backing files go.
    pub dir: PathBuf,
    pub fs_bytes: u64,
    pub journal_bytes: u64,
    /// Extra engine mount options (`commit=1,max_batch_time=0`).
    pub mount_options: String,
    /// Leave the engine's journal ring unwritten at mkfs ([`MkfsOptions::zero_journal`] off).
    pub lazy_journal_init: bool,
}

/// One prepared target for one mode.
pub trait Env {
    fn target(&self) -> String;
    fn mode(&self) -> String;
    /// Creates (or opens) stream file `name`.
    fn open(&self, name: &str) -> Result<Box<dyn Stream>, String>;
    fn measure(&self) -> Result<Measure, String>;
    /// Okeanos targets: how new whole blocks are written, and whether the mount took its
    /// device to seek ([`Run::new_blocks`](crate::report::Run), `fs_seeks`).
    fn choices(&self) -> (Option<String>, Option<bool>) {
        (None, None)
    }
    /// Syncs and unmounts; returns the final counts.
    fn finish(self: Box<Self>) -> Result<Measure, String>;
    /// Simulates a crash: drops the mount without syncing or unmounting (engine targets).
    fn crash(self: Box<Self>) -> Result<Crashed, String> {
        Err(format!("target {} cannot be crashed on purpose", self.target()))
    }
}

/// What is left after [`Env::crash`]: the devices, to mount again (recovery).
pub struct Crashed {
    pub image: PathBuf,
    pub journal: Option<PathBuf>,
    pub direct: bool,
    pub cfg: ContentConfig,
    pub extra_options: String,
    /// Loop devices stay attached until the recovery mount is done.
    pub _keep: Option<LoopSet>,
    /// So does the journal server of engine:remote,
    pub _server: Option<ServerProcess>,
    /// and the NATS cluster of engine:jetstream (its stores are in `_tmp`, dropped after it).
    pub _cluster: Option<okeanos::remote::nats_cluster::Cluster>,
    pub _tmp: Option<tempfile::TempDir>,
}

pub fn prepare(t: &Target, cfg: Option<ContentConfig>, s: &Setup) -> Result<Box<dyn Env>, String> {
    match t {
        Target::Engine(p) => {
            let cfg = cfg.ok_or("the engine target needs a mode")?;
            Ok(Box::new(EngineEnv::new(*p, cfg, s)?))
        }
        Target::Mount(p) => Ok(Box::new(DirEnv::mount(p)?)),
        Target::Kernel(k) => Ok(Box::new(DirEnv::kernel(k, s)?)),
        Target::Device => Ok(Box::new(super::rawdev::RawEnv::new(s)?)),
        Target::StreamFloor => Ok(Box::new(super::rawstream::StreamEnv::new(s)?)),
    }
}

pub fn engine_options(cfg: ContentConfig, extra: &str) -> Result<MountOptions, String> {
    let mut o = if extra.is_empty() { MountOptions::default() } else { MountOptions::parse(extra)? };
    o = o.policy_of(cfg);
    o.content()?;
    Ok(o)
}

/// The engine in-process.
pub struct EngineEnv {
    fs: Okeanos,
    cfg: ContentConfig,
    target: String,
    loops: Option<LoopSet>,
    image: PathBuf,
    journal: Option<PathBuf>,
    extra: String,
    tmp: Option<tempfile::TempDir>,
    server: Option<ServerProcess>,
    /// The NATS cluster of engine:jetstream (stopped when dropped, after the file system).
    _cluster: Option<okeanos::remote::nats_cluster::Cluster>,
}

/// How the benchmark's NATS cluster syncs (engine:jetstream and its ablation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NatsSync {
    /// `sync_interval: always`: acknowledged after a quorum's fsync.
    Always,
    /// nats-server's default (fsync every two minutes): not durable; a labelled ablation.
    Default,
}

/// A journal server this benchmark started (engine:remote): `okeanos journal-server` on
/// 127.0.0.1 with its journals in the run's directory, stopped (SIGTERM) when dropped.
pub struct ServerProcess {
    child: std::process::Child,
    pub addr: String,
}

impl ServerProcess {
    /// With `tls_cert`, the server serves TLS with a self-signed certificate written there.
    fn start(dir: &Path, tls_cert: Option<&Path>) -> Result<ServerProcess, String> {
        use std::io::BufRead;
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["journal-server", "--listen", "127.0.0.1:0", "--no-auth", "--dir"]).arg(dir);
        if let Some(c) = tls_cert {
            cmd.arg("--tls-self-signed").arg(c);
        }
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("journal server: {e}"))?;
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line).map_err(|e| format!("journal server: {e}"))?;
        let addr = line.split_whitespace().nth(4).map(|a| a.trim_end_matches(',').to_string());
        match addr {
            Some(addr) => Ok(ServerProcess { child, addr }),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!("journal server did not start: {line:?}"))
            }
        }
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
    }
}

impl EngineEnv {
    fn new(placement: Placement, cfg: ContentConfig, s: &Setup) -> Result<EngineEnv, String> {
        let external = matches!(placement, Placement::External | Placement::Loop);
        let nats = match placement {
            Placement::JetStream(sync) => Some(sync),
            _ => None,
        };
        let (remote, tls) = match placement {
            Placement::Remote { tls } => (true, tls),
            _ => (false, false),
        };
        let mut opts = engine_options(cfg, &s.mount_options)?;
        let bs = 4096u64;
        let mut mkfs = MkfsOptions { journal_blocks: s.journal_bytes / bs, external_journal: external, zero_journal: !s.lazy_journal_init, ..Default::default() };
        let mut extra = s.mount_options.clone();
        let mut server = None;
        let mut cluster = None;
        let target = placement.name();
        let (fs, loops, image, journal, tmp) = if placement == Placement::Nvm {
            // The file system on a loop device (O_DIRECT, as engine:loop), its journal in an
            // NVM file on tmpfs: this machine has no persistent memory, so msync to memory
            // stands in for clwb + sfence (docs/BENCHMARKS.md says what that measures).
            let loops = LoopSet::new(&s.dir, s.fs_bytes, 1 << 20)?;
            let shm = tempfile::Builder::new().prefix("okeanos-bench-nvm-").tempdir_in("/dev/shm").map_err(|e| format!("/dev/shm: {e}"))?;
            let path = shm.path().join("journal.nvm");
            let region = okeanos::nvm::MappedNvm::create(&path, s.journal_bytes.max(32 << 20), false).map_err(|e| e.to_string())?;
            let fsd: Arc<dyn Device> = Arc::new(FileDevice::open_direct(&loops.fs_dev, true).map_err(|e| e.to_string())?);
            let m = MkfsOptions { journal_blocks: okeanos::fs::mkfs::MIN_JOURNAL_BLOCKS, nvm_path: Some(path.display().to_string()), ..Default::default() };
            Okeanos::mkfs_nvm(fsd.as_ref(), &region, &m).map_err(|e| e.to_string())?;
            drop(region);
            let fs = Okeanos::mount(fsd, None, opts).map_err(|e| e.to_string())?;
            let i = loops.fs_dev.clone();
            (fs, Some(loops), i, None, Some(shm))
        } else if placement == Placement::Manylogs {
            // A log in every group of the loop device (mkfs's default geometry), as
            // `okeanos mkfs --journal manylogs` makes it; the log table in the journal region.
            let loops = LoopSet::new(&s.dir, s.fs_bytes, 1 << 20)?;
            let fsd: Arc<dyn Device> = Arc::new(FileDevice::open_direct(&loops.fs_dev, true).map_err(|e| e.to_string())?);
            let m = MkfsOptions { manylogs: true, ..mkfs };
            Okeanos::mkfs(fsd.as_ref(), None, &m).map_err(|e| e.to_string())?;
            let fs = Okeanos::mount(fsd, None, opts).map_err(|e| e.to_string())?;
            let i = loops.fs_dev.clone();
            (fs, Some(loops), i, None, None)
        } else if placement == Placement::Loop {
            let loops = LoopSet::new(&s.dir, s.fs_bytes, s.journal_bytes)?;
            let fsd: Arc<dyn Device> = Arc::new(FileDevice::open_direct(&loops.fs_dev, true).map_err(|e| e.to_string())?);
            let jd: Arc<dyn Device> = Arc::new(FileDevice::open_direct(&loops.journal_dev, true).map_err(|e| e.to_string())?);
            Okeanos::mkfs(fsd.as_ref(), Some(jd.as_ref()), &mkfs).map_err(|e| e.to_string())?;
            let fs = Okeanos::mount(fsd, Some(jd), opts).map_err(|e| e.to_string())?;
            let (i, j) = (loops.fs_dev.clone(), Some(loops.journal_dev.clone()));
            (fs, Some(loops), i, j, None)
        } else {
            let tmp = tempfile::Builder::new().prefix("okeanos-bench-").tempdir_in(&s.dir).map_err(|e| format!("{}: {e}", s.dir.display()))?;
            if let Some(sync) = nats {
                // A 3-node cluster on 127.0.0.1, its stores in the run's directory.
                let c = okeanos::remote::nats_cluster::Cluster::start_with(3, &tmp.path().join("nats"), sync == NatsSync::Always)?;
                mkfs.remote_server = Some(c.urls());
                cluster = Some(c);
            } else if remote {
                let cert = tmp.path().join("server-cert.pem");
                let sp = ServerProcess::start(&tmp.path().join("server"), tls.then_some(cert.as_path()))?;
                mkfs.remote_server = Some(sp.addr.clone());
                let mut remote_opts = format!("journal_server={},remote_host=bench", sp.addr);
                if tls {
                    remote_opts += &format!(",remote_tls_ca={}", cert.display());
                }
                let parsed = MountOptions::parse(&remote_opts)?;
                opts.journal_server = parsed.journal_server;
                opts.remote_host = parsed.remote_host;
                opts.remote_tls_ca = parsed.remote_tls_ca;
                extra = if extra.is_empty() { remote_opts } else { format!("{extra},{remote_opts}") };
                server = Some(sp);
            }
            let image = tmp.path().join("fs.okfs");
            let fsd = FileDevice::create(&image, s.fs_bytes + if external { 0 } else { s.journal_bytes }, false).map_err(|e| e.to_string())?;
            let (journal, jd) = if external {
                let j = tmp.path().join("journal.okj");
                let d = FileDevice::create(&j, s.journal_bytes, false).map_err(|e| e.to_string())?;
                (Some(j), Some(d))
            } else {
                (None, None)
            };
            Okeanos::mkfs(&fsd, jd.as_ref().map(|d| d as &dyn Device), &mkfs).map_err(|e| e.to_string())?;
            drop((fsd, jd));
            let mut o = opts;
            o.journal_path = journal.clone();
            let fs = Okeanos::open(&image, o).map_err(|e| e.to_string())?;
            (fs, None, image, journal, Some(tmp))
        };
        fs.mkdir_path("/bench").map_err(|e| e.to_string())?;
        fs.sync().map_err(|e| e.to_string())?;
        Ok(EngineEnv { fs, cfg, target: target.into(), loops, image, journal, extra, tmp, server, _cluster: cluster })
    }

    fn measure_now(fs: &Okeanos, loops: &Option<LoopSet>) -> Result<Measure, String> {
        let c = fs.counters();
        let device = match loops {
            Some(l) => {
                let (f, j, fl) = l.stats()?;
                DeviceBytes { source: "/sys/block".into(), fs_written: f, journal_written: Some(j), flushes: Some(fl) }
            }
            None => DeviceBytes {
                source: "engine devices".into(),
                fs_written: c.fs_device.bytes_written,
                journal_written: c.journal_device.map(|d| d.bytes_written),
                flushes: Some(c.fs_device.flushes + c.journal_device.map_or(0, |d| d.flushes)),
            },
        };
        Ok(Measure { bytes: Bytes::from_counters(&c), commits: Some(c.commits), device: Some(device), counters: Some(c) })
    }
}

impl Env for EngineEnv {
    fn target(&self) -> String {
        self.target.clone()
    }
    fn mode(&self) -> String {
        self.cfg.name()
    }
    fn open(&self, name: &str) -> Result<Box<dyn Stream>, String> {
        let p = format!("/bench/{name}");
        let f = match self.fs.open_file(&p) {
            Ok(f) => f,
            Err(okeanos::FsError::NotFound) => self.fs.create_file(&p).map_err(|e| e.to_string())?,
            Err(e) => return Err(e.to_string()),
        };
        Ok(Box::new(f))
    }
    fn choices(&self) -> (Option<String>, Option<bool>) {
        (self.fs.new_blocks().map(str::to_string), self.fs.fs_seeks())
    }
    fn measure(&self) -> Result<Measure, String> {
        Self::measure_now(&self.fs, &self.loops)
    }
    fn finish(self: Box<Self>) -> Result<Measure, String> {
        let probe = self.fs.clone();
        self.fs.unmount().map_err(|e| format!("unmount: {e}"))?;
        Self::measure_now(&probe, &self.loops)
    }
    fn crash(self: Box<Self>) -> Result<Crashed, String> {
        let EngineEnv { fs, cfg, loops, image, journal, extra, tmp, server, _cluster, .. } = *self;
        drop(fs); // no sync, no unmount: the journal thread stops where it stands
        Ok(Crashed { direct: loops.is_some(), image, journal, cfg, extra_options: extra, _keep: loops, _tmp: tmp, _server: server, _cluster })
    }
}

/// A directory on a mounted file system: an existing mount or a kernel file system on loop
/// devices that this benchmark made.
pub struct DirEnv {
    target: String,
    mode: String,
    dir: PathBuf,
    root: PathBuf,
    loops: Option<LoopSet>,
}

fn stats_json(root: &Path) -> Option<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(root.join(".okeanos-stats")).ok()?).ok()
}

fn syncfs(dir: &Path) -> Result<(), String> {
    let f = std::fs::File::open(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    use std::os::fd::AsRawFd;
    // SAFETY: the descriptor is valid while `f` lives.
    if unsafe { libc::syncfs(f.as_raw_fd()) } != 0 {
        return Err(format!("syncfs {}: {}", dir.display(), std::io::Error::last_os_error()));
    }
    Ok(())
}

impl DirEnv {
    fn mount(root: &Path) -> Result<DirEnv, String> {
        let dir = root.join(format!("okeanos-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mode = stats_json(root).and_then(|v| v["mode"].as_str().map(|m| format!("okeanos-fuse:{m}"))).unwrap_or_else(|| "mount".into());
        Ok(DirEnv { target: format!("mount:{}", root.display()), mode, dir, root: root.to_path_buf(), loops: None })
    }

    fn kernel(kind: &str, s: &Setup) -> Result<DirEnv, String> {
        let mut loops = LoopSet::new(&s.dir, s.fs_bytes, s.journal_bytes)?;
        let root = loops.mount_kernel(kind)?;
        let dir = root.join("bench");
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        syncfs(&root)?;
        Ok(DirEnv { target: format!("kernel:{kind}"), mode: kind.to_string(), dir, root, loops: Some(loops) })
    }

    fn measure_now(&self) -> Result<Measure, String> {
        if let Some(l) = &self.loops {
            let (f, j, fl) = l.stats()?;
            return Ok(Measure {
                bytes: Bytes { payload_bytes: 0, journal_bytes: Some(j), final_bytes: Some(f), per_kind: Default::default() },
                // ext4's fast commits are commits too (jbd2 counts only its full ones).
                commits: loopdev::jbd2_transactions(&l.journal_dev).map(|t| t + loopdev::ext4_fast_commits(&l.fs_dev).unwrap_or(0)),
                device: Some(DeviceBytes { source: "/sys/block".into(), fs_written: f, journal_written: Some(j), flushes: Some(fl) }),
                counters: None,
            });
        }
        Ok(match stats_json(&self.root) {
            Some(v) => {
                let g = |k: &str| v[k].as_u64();
                let mut b = Bytes { payload_bytes: 0, journal_bytes: g("journal_bytes"), final_bytes: g("final_bytes"), per_kind: Default::default() };
                for k in ["descriptor", "commit", "revoke", "multiwrite", "journal_data", "journal_meta", "journal_super", "final_data", "final_meta", "log_swap"] {
                    if let Some(x) = v[k]["bytes"].as_u64() {
                        b.per_kind.insert(k.to_string(), x);
                    }
                }
                Measure { bytes: b, commits: g("commits"), device: None, counters: None }
            }
            None => Measure::default(),
        })
    }
}

impl Env for DirEnv {
    fn target(&self) -> String {
        self.target.clone()
    }
    fn mode(&self) -> String {
        self.mode.clone()
    }
    fn open(&self, name: &str) -> Result<Box<dyn Stream>, String> {
        let p = self.dir.join(name);
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(Box::new(f))
    }
    fn measure(&self) -> Result<Measure, String> {
        self.measure_now()
    }
    fn finish(mut self: Box<Self>) -> Result<Measure, String> {
        syncfs(&self.root)?;
        if let Some(l) = self.loops.as_mut() {
            l.unmount()?;
            return self.measure_now();
        }
        // An Okeanos mount stays mounted: a forced checkpoint writes home what the run left in
        // the journal, so that the final-location bytes count it (as an unmount would). Any
        // other mounted directory reports no bytes (n/a).
        let _ = std::fs::remove_dir_all(&self.dir);
        syncfs(&self.root)?;
        if stats_json(&self.root).is_some() {
            let p = self.root.join(".okeanos-checkpoint");
            std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        }
        self.measure_now()
    }
}
