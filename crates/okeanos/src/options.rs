//! Mount options. Where ext4 has an option with the same meaning, Okeanos uses its name:
//! `data=`, `commit=`, `journal_path=`, `ro`, `errors=`.

use crate::journal::content::{ContentConfig, DataMode};
use crate::journal::scheduler::SchedulerConfig;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct MountOptions {
    /// The content policy (`data=writeback|ordered|data|wasteless|selective`).
    pub data: DataMode,
    /// Differential metadata for wasteless and selective (`dmeta`, or `data=wasteless+dmeta`).
    pub dmeta: bool,
    /// Selective journaling's write threshold in bytes (`write_threshold=`, default 4096).
    pub write_threshold: usize,
    /// Selective: write calls of at least this many bytes go in place (`logged_write_size=`,
    /// the manylogs paper's LoggedWriteSize; default none).
    pub logged_write_size: Option<usize>,
    /// Wasteless: whole blocks a transaction allocates are written in place with its commit
    /// instead of logged (`fresh_blocks=in_place`: Some(true)); `fresh_blocks=journal` (Some(false))
    /// logs them as the paper does; `auto` (None, the default) writes them in place where the
    /// file system's device does not seek and they can go beside the commit under its one
    /// flush (in-place tags), and logs them elsewhere (docs/JOURNALING.md, "New blocks in
    /// place").
    pub fresh_in_place: Option<bool>,
    /// Whether the file system's device seeks, where the device cannot say so itself (the
    /// simulator's memory devices under a disk model); None: the device says
    /// (`Device::seeks`). Not a mount option string.
    pub fs_seeks: Option<bool>,
    /// Those new blocks go beside their commit under its one flush, named by in-place tags,
    /// where the journal has the IN_PLACE_TAGS feature, is a ring and commits are not
    /// pipelined (`in_place_tags=on`, the default); `off` writes and flushes them before the
    /// commit, as journals without the feature do (docs/FORMAT.md, "In-place tags").
    pub in_place_tags: bool,
    /// Commit interval (`commit=<seconds>`, default 5).
    pub commit_interval: Duration,
    /// How often age-based writeback runs (`writeback_period=<seconds>`, default 5).
    pub writeback_period: Duration,
    /// Age after which a committed block is written in place (`expire=<seconds>`; default 30,
    /// or 300 over an nvm journal: UBJ's checkpoint period, docs/JOURNALING.md).
    pub expire_period: Option<Duration>,
    /// Mount read-only (`ro`). A journal that needs recovery is replayed in memory only:
    /// nothing is written to the image (docs/JOURNALING.md).
    pub read_only: bool,
    /// `errors=remount-ro`: a file system marked with errors mounts read-only instead of
    /// being refused (it is refused read-write until `okeanos fsck` has checked it).
    pub errors_remount_ro: bool,
    /// External journal device or file (`journal_path=`).
    pub journal_path: Option<PathBuf>,
    /// Buffer cache capacity in blocks (`cache_blocks=`, default 65536).
    pub cache_blocks: usize,
    /// Transaction batching bounds (`min_batch_time=`, `max_batch_time=` in microseconds, as
    /// in ext4; defaults 0 and 15000): before a sync-requested commit, wait about one commit
    /// time, within these bounds, while other writers keep joining.
    pub min_batch_time: Duration,
    pub max_batch_time: Duration,
    /// A sync's commit stops waiting for more writers once its transaction holds this many
    /// handles (`batch_handles=`, default 32; 0: no bound, the window alone decides).
    pub batch_handles: u32,
    /// What the batching window is for (`batch=latency|bytes`, default latency). `latency`: a
    /// quarter of a commit's time, ended by `batch_handles`. `bytes`: a commit whose metadata
    /// blocks logged whole outweigh its handles' own journal bytes (ordered, writeback, plain
    /// wasteless, selective) waits up to `max_batch_time` while syncs arrive and is not ended
    /// by `batch_handles`, so that more syncs share those blocks; a fast commit whose fixed part
    /// and padding would outweigh a sixty-fourth of its handles' bytes waits up to
    /// `max_batch_time` for more syncs to fill it; other commits as with `latency`
    /// (docs/JOURNALING.md, "Batching for bytes", "Batching for padding").
    pub batch_for_bytes: bool,
    /// Checkpoints run in a thread of their own beside commits (`checkpoint_thread=1`), as
    /// Linux runs writeback beside kjournald, so a sync never waits behind a checkpoint's home
    /// writes; `checkpoint_thread=0` runs them between commits on the journal thread. The
    /// default (`auto`, None) is beside, except with an internal journal on a disk that seeks
    /// (rotational, or a seeking device model): there interleaving a checkpoint's home writes
    /// with commits moves the head between the log and the home locations for every slice.
    /// Placements that cannot release log space while a commit is in flight (nvm, remote)
    /// always run them between commits.
    pub checkpoint_thread: Option<bool>,
    /// The first sync of a write group that finds the commit lane free runs the commit on its
    /// own thread and answers the group's syncs itself (`commit_leader=on`, the default), as
    /// RocksDB's write-group leader and MySQL's binlog group commit do, instead of waking the
    /// journal thread and being woken by it (`commit_leader=off`). The journal thread stays
    /// for timers, background work and whatever a leader leaves.
    pub commit_leader: bool,
    /// Small appends that fit in the file's last block are staged beside the state lock and
    /// folded into the running transaction by the next thread that takes the lock, and an
    /// fsync of such a file waits for its commit without taking the lock
    /// (`stage_appends=on|off`; engine/stage.rs). On by default (docs/BENCHMARKS.md, "Staged
    /// appends by default").
    pub stage_appends: bool,
    /// Commits whose flush may be in flight at once (`commit_pipeline=N`, 1 to 64; 1: a
    /// commit's flush runs in the commit lane and the next commit waits for it). With N > 1
    /// a commit's writes are followed by the next commit's writes while its flush runs on a
    /// flusher thread, N of them; each flush covers every commit written before it was
    /// issued, and syncs are answered in commit order (journal/commit.rs, "Pipelined
    /// commits"). fdatasync steps of overwrites pipeline the same way, up to N step flushes in
    /// flight (journal/datasync.rs). Only the internal and external journals pipeline; the
    /// others ignore it.
    pub commit_pipeline: u32,
    /// Pipelined commits begin beside commits in flight of any size, not only beside small
    /// ones (the scheduler's `pipeline_open`): for the crash tests of pipelining, which want
    /// every overlap; not a mount option.
    pub pipeline_any_size: bool,
    /// A transaction of records alone that fits one block is written as one fast commit
    /// block, its commit included (`fast_commit=on`, the default; docs/FORMAT.md), as ext4's
    /// fast commits do; `off` keeps the descriptor and commit blocks. Only journals made with
    /// the FAST_COMMIT feature (every mkfs since it came) write it.
    pub fast_commit: bool,
    /// The most blocks a fast commit spans (`fast_commit_blocks=N`, 1 to 16, default 16): a
    /// larger transaction of records takes the classic form. Spans of more than one block
    /// need the journal's FAST_COMMIT_SPAN feature (every mkfs since it came); 1 is the
    /// one-block form alone.
    pub fast_commit_blocks: usize,
    /// Commit blocks written as only the sectors that hold them (docs/FORMAT.md, "Short commit
    /// writes") on devices that take short writes (memory; O_DIRECT on 512-byte logical
    /// sectors): `on`, `off`, or `auto` (None, the default: where the device does not seek,
    /// since a spinning disk pays a revolution for the hole before the next commit).
    pub short_writes: Option<bool>,
    /// When committed blocks go home (`checkpoint=periodic|lazy`). `periodic` (default): for
    /// space, and for age (`expire=`, every `writeback_period=`). `lazy` (the manylogs paper's
    /// off-hours checkpoint, section III-F): for space only, and manylogs counts space over
    /// all its logs rather than near the disk head; `okeanos checkpoint` (or `sync`) forces one.
    /// Logged blocks may leave the cache meanwhile (manylogs parks them, read back from their
    /// logs). `idle` is `lazy`, plus a checkpoint of everything committed once nothing has
    /// changed and nothing was read from the disk for `idle_after=` (looked at every
    /// `writeback_period=`).
    pub lazy_checkpoint: bool,
    /// `checkpoint=idle`: checkpoint when the file system has been idle for `idle_after`.
    pub idle_checkpoint: bool,
    /// How long nothing must happen before `checkpoint=idle` checkpoints (`idle_after=`,
    /// seconds, default 2).
    pub idle_after: Duration,
    /// Manylogs: how often the map of logged blocks is snapshot (`snapshot_period=`, seconds,
    /// default 30; 0: only at checkpoints): metadata and data not whole in a log go home, the
    /// map and each log's recovery start are recorded, and recovery reads the logs only past
    /// them (docs/JOURNALING.md, "The map on disk").
    pub snapshot_period: Duration,
    /// Background writeback of ordered in-place data (`dirty_background_bytes=`): once the
    /// running transaction holds more than this not yet written, it is written before its
    /// commit, and writers wait past twice as much (journal/writeback.rs). None: 1 MiB on
    /// manylogs; otherwise (and with 0) a backstop at half the in-place data that forces a
    /// commit, with no writer waiting for it (`Journal::early_threshold`).
    pub dirty_background_bytes: Option<u64>,
    /// fdatasync of a file whose running-transaction changes are only overwrites of blocks it
    /// already had (ordered and writeback content): write them in place and flush, without a
    /// commit (`datasync=in_place`, the default; journal/datasync.rs), or commit
    /// (`datasync=commit`, as before).
    pub datasync_in_place: bool,
    /// Manylogs with `checkpoint=lazy|idle`: move a log over 80% full into an empty log far
    /// from the head (`log_swap=on|off`, default on; the paper's log swapping, section III-G):
    /// at once when it is the head's log, otherwise when the file system is idle.
    pub log_swap: bool,
    /// Largest transaction in journal blocks (`max_tx_blocks=`; default a quarter of the journal).
    pub max_tx_blocks: Option<u64>,
    /// Delay every real I/O as a device model says (`device_model=cheetah15k|sata7200|ssd|nvm`):
    /// a timed emulation of a slower disk for real programs (see docs/SIMULATION.md); an nvm
    /// journal's NVM is then timed with the `nvm` preset.
    pub device_model: Option<String>,
    /// Open the image and journal with O_DIRECT (`direct_io`; block devices): every engine
    /// write reaches the device as written, bypassing the page cache.
    pub direct_io: bool,
    /// The journal server of a remote journal (`journal_server=host:port`; default: the one
    /// mkfs recorded).
    pub journal_server: Option<String>,
    /// How long a journal server may take to acknowledge (`remote_ack_timeout=<s>`, default 1):
    /// past it the host falls back to its local journal. (A mount on JetStream waits at least
    /// 20 s for the cluster to settle before it gives up: docs/REMOTE.md.)
    pub remote_ack_timeout: Duration,
    /// This host's secret for the journal server (`remote_secret=`, or `remote_secret_file=`).
    pub remote_secret: Option<Vec<u8>>,
    /// This host's name at the journal server (`remote_host=`, default the system's host name).
    pub remote_host: Option<String>,
    /// Speak TLS to the journal server, trusting the certificates of this PEM file (a CA, or
    /// the server's own self-signed certificate) (`remote_tls_ca=`). Plain TCP when unset.
    pub remote_tls_ca: Option<std::path::PathBuf>,
    /// The name the server's certificate must carry (`remote_tls_name=`; default the host part
    /// of the server's address).
    pub remote_tls_name: Option<String>,
    /// A journal on NATS JetStream: a credentials file (`jetstream_creds=`).
    pub jetstream_creds: Option<std::path::PathBuf>,
    /// A file holding an nkey seed (`jetstream_nkey=`).
    pub jetstream_nkey: Option<std::path::PathBuf>,
    /// CA certificates (PEM) for TLS to the NATS servers (`jetstream_tls_ca=`).
    pub jetstream_tls_ca: Option<std::path::PathBuf>,
    /// Replicas of the stream a mount creates, and the fewest accepted in an existing one
    /// (`jetstream_replicas=`, default 3; fewer only when the user says so).
    pub jetstream_replicas: usize,
    /// The NVM of an nvm journal (`nvm=PATH`; default: the path mkfs recorded).
    pub nvm_path: Option<PathBuf>,
    /// The NVM region itself (tests, the simulator). Not accepted by `parse`.
    #[doc(hidden)]
    pub nvm: Option<crate::nvm::NvmHandle>,
    /// How to reach the journal server instead of TCP (the crash tests' stand-in). Not
    /// accepted by `parse`.
    #[doc(hidden)]
    pub remote_connector: Option<crate::remote::Connector>,
    /// The canaries (test-only faults). Not accepted by `parse`, but for one (see [`Faults`]).
    #[doc(hidden)]
    pub faults: Faults,
    /// Drive the journal step by step instead of from a journal thread (the simulator);
    /// operations that would wait return `FsError::WouldBlock`. Not accepted by `parse`.
    #[doc(hidden)]
    pub manual_journal: bool,
}

pub use crate::faults::Faults;

impl Default for MountOptions {
    fn default() -> Self {
        MountOptions {
            data: DataMode::Ordered,
            dmeta: false,
            write_threshold: 4096,
            logged_write_size: None,
            fresh_in_place: None,
            fs_seeks: None,
            in_place_tags: true,
            commit_interval: Duration::from_secs(5),
            writeback_period: Duration::from_secs(5),
            expire_period: None,
            read_only: false,
            errors_remount_ro: false,
            journal_path: None,
            cache_blocks: 65536,
            min_batch_time: Duration::ZERO,
            max_batch_time: Duration::from_micros(15_000),
            batch_handles: 32,
            batch_for_bytes: false,
            checkpoint_thread: None,
            commit_leader: true,
            stage_appends: true,
            commit_pipeline: 1,
            pipeline_any_size: false,
            fast_commit: true,
            fast_commit_blocks: crate::format::journal::MAX_FAST_BLOCKS,
            short_writes: None,
            lazy_checkpoint: false,
            idle_checkpoint: false,
            idle_after: Duration::from_secs(2),
            snapshot_period: Duration::from_secs(30),
            dirty_background_bytes: None,
            datasync_in_place: true,
            log_swap: true,
            max_tx_blocks: None,
            device_model: None,
            direct_io: false,
            journal_server: None,
            remote_ack_timeout: Duration::from_secs(1),
            remote_secret: None,
            remote_tls_ca: None,
            remote_tls_name: None,
            jetstream_creds: None,
            jetstream_nkey: None,
            jetstream_tls_ca: None,
            jetstream_replicas: 3,
            remote_host: None,
            remote_connector: None,
            nvm_path: None,
            nvm: None,
            faults: Faults::default(),
            manual_journal: false,
        }
    }
}

impl MountOptions {
    /// The age after which committed blocks are written home: `expire=`, else the
    /// placement's default (`Placement::defaults`: nvm 300 s, UBJ's checkpoint period; others
    /// 30 s).
    pub fn expire_or(&self, placement_default: Duration) -> Duration {
        self.expire_period.unwrap_or(placement_default)
    }

    /// What the journal's scheduler reads of these options (journal/scheduler/), with
    /// `checkpoint_thread` and the journal's write form (its block size, and whether commit
    /// blocks are written short) resolved at mount.
    pub fn scheduler(&self, checkpoint_thread: bool, block_size: u32, short_commits: bool) -> SchedulerConfig {
        let ns = |d: Duration| d.as_nanos() as u64;
        SchedulerConfig {
            commit_interval_ns: ns(self.commit_interval),
            min_batch_ns: ns(self.min_batch_time),
            max_batch_ns: ns(self.max_batch_time),
            batch_handles: self.batch_handles,
            batch_for_bytes: self.batch_for_bytes,
            block_size,
            short_commits,
            writeback_period_ns: ns(self.writeback_period),
            expire_ns: self.expire_period.map(ns),
            lazy_checkpoint: self.lazy_checkpoint,
            idle_checkpoint: self.idle_checkpoint,
            idle_after_ns: ns(self.idle_after),
            snapshot_period_ns: ns(self.snapshot_period),
            log_swap: self.log_swap,
            checkpoint_thread,
            commit_pipeline: self.commit_pipeline,
            pipeline_any_size: self.pipeline_any_size,
        }
    }

    /// How many commits' flushes may be in flight at once on this mount: 0 when commits are
    /// not pipelined (`commit_pipeline=1`, or a journal driven step by step). The placement
    /// must allow it too (`Placement::pipelines_commits`).
    pub fn pipeline_depth(&self) -> u32 {
        if self.commit_pipeline > 1 && !self.manual_journal {
            self.commit_pipeline
        } else {
            0
        }
    }

    pub fn data(mut self, mode: DataMode) -> Self {
        self.data = mode;
        self
    }

    /// Sets the content policy (mode and `dmeta`) of `c`, keeping the policy's other options
    /// as these mount options gave them (`write_threshold=`, `logged_write_size=`,
    /// `fresh_blocks=`): for a mode named apart from the options, as the bench's and the
    /// simulator's `--modes` beside `--mount-options`.
    pub fn policy_of(mut self, c: ContentConfig) -> Self {
        self.data = c.mode;
        self.dmeta = c.dmeta;
        self
    }

    /// Sets the content policy and all its options from a [`ContentConfig`].
    pub fn content_config(mut self, c: ContentConfig) -> Self {
        self.data = c.mode;
        self.dmeta = c.dmeta;
        self.write_threshold = c.write_threshold;
        self.logged_write_size = c.logged_write_size;
        // A config's `false` is the default, `auto` (logged on devices that do not say they
        // do not seek, which memory devices do not).
        self.fresh_in_place = c.fresh_in_place.then_some(true);
        self
    }

    /// The content policy with its options, checked.
    pub fn content(&self) -> Result<ContentConfig, String> {
        if self.dmeta && !matches!(self.data, DataMode::Wasteless | DataMode::Selective) {
            return Err(format!("dmeta (differential metadata) needs data=wasteless or data=selective, not data={}", self.data));
        }
        if self.write_threshold == 0 || self.write_threshold > 1 << 20 {
            return Err(format!("write_threshold={} is out of range 1..=1048576", self.write_threshold));
        }
        if self.logged_write_size.is_some_and(|l| l == 0 || l > 1 << 30) {
            return Err(format!("logged_write_size={} is out of range 1..=1073741824", self.logged_write_size.unwrap_or(0)));
        }
        if self.fresh_in_place == Some(true) && self.data == DataMode::Data {
            return Err("fresh_blocks=in_place is for data=wasteless: data journaling logs every block by definition (ordered, writeback and selective's large sequences write new blocks in place already)".into());
        }
        Ok(ContentConfig { mode: self.data, dmeta: self.dmeta, write_threshold: self.write_threshold, logged_write_size: self.logged_write_size, fresh_in_place: self.fresh_in_place == Some(true) })
    }

    /// Parses a comma-separated option string such as `data=data,commit=1`. An unknown or
    /// malformed option is named in the error.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut o = MountOptions::default();
        for item in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            let (k, v) = match item.split_once('=') {
                Some((k, v)) => (k, Some(v)),
                None => (item, None),
            };
            let secs = |v: Option<&str>| -> Result<Duration, String> {
                let v = v.ok_or_else(|| format!("option {k} needs a value"))?;
                let x: f64 = v.parse().map_err(|_| format!("option {k}={v}: not a number of seconds"))?;
                if !(0.0..=86_400.0).contains(&x) || x.is_nan() {
                    return Err(format!("option {k}={v}: out of range 0..=86400 seconds"));
                }
                Ok(Duration::from_secs_f64(x))
            };
            let num = |v: Option<&str>| -> Result<u64, String> {
                let v = v.ok_or_else(|| format!("option {k} needs a value"))?;
                v.parse().map_err(|e: std::num::ParseIntError| match e.kind() {
                    std::num::IntErrorKind::PosOverflow => format!("option {k}={v}: too large"),
                    _ => format!("option {k}={v}: not a whole number"),
                })
            };
            match k {
                "data" => {
                    let c = ContentConfig::parse(v.ok_or("option data needs a value")?)?;
                    o.data = c.mode;
                    o.dmeta |= c.dmeta;
                }
                "dmeta" => o.dmeta = true,
                "checkpoint_thread" => o.checkpoint_thread = match v {
                    None | Some("1") | Some("on") => Some(true),
                    Some("0") | Some("off") => Some(false),
                    Some("auto") => None,
                    Some(x) => return Err(format!("option checkpoint_thread takes 0, 1 or auto, not {x:?}")),
                },
                "commit_leader" => o.commit_leader = match v {
                    None | Some("1") | Some("on") => true,
                    Some("0") | Some("off") => false,
                    Some(x) => return Err(format!("option commit_leader takes on or off, not {x:?}")),
                },
                "stage_appends" => o.stage_appends = match v {
                    None | Some("1") | Some("on") => true,
                    Some("0") | Some("off") => false,
                    Some(x) => return Err(format!("option stage_appends takes on or off, not {x:?}")),
                },
                "short_writes" => o.short_writes = match v {
                    None | Some("1") | Some("on") => Some(true),
                    Some("0") | Some("off") => Some(false),
                    Some("auto") => None,
                    Some(x) => return Err(format!("option short_writes takes on, off or auto, not {x:?}")),
                },
                "fast_commit" => o.fast_commit = match v {
                    None | Some("1") | Some("on") => true,
                    Some("0") | Some("off") => false,
                    Some(x) => return Err(format!("option fast_commit takes on or off, not {x:?}")),
                },
                "fast_commit_blocks" => {
                    let max = crate::format::journal::MAX_FAST_BLOCKS;
                    o.fast_commit_blocks = match v.map(str::parse::<usize>) {
                        Some(Ok(n)) if (1..=max).contains(&n) => n,
                        _ => return Err(format!("option fast_commit_blocks takes a number of blocks from 1 to {max}, not {:?}", v.unwrap_or(""))),
                    }
                }
                "checkpoint" => {
                    (o.lazy_checkpoint, o.idle_checkpoint) = match v {
                        Some("lazy") => (true, false),
                        Some("idle") => (true, true),
                        Some("periodic") => (false, false),
                        Some(x) => return Err(format!("option checkpoint takes periodic, lazy or idle, not {x:?}")),
                        None => return Err("option checkpoint needs a value: periodic, lazy or idle".into()),
                    }
                }
                "idle_after" => o.idle_after = secs(v)?.max(Duration::from_millis(10)),
                "snapshot_period" => o.snapshot_period = secs(v)?,
                "dirty_background_bytes" => o.dirty_background_bytes = Some(num(v)?),
                "datasync" => o.datasync_in_place = match v {
                    Some("in_place") => true,
                    Some("commit") => false,
                    _ => return Err(format!("option datasync takes in_place or commit, not {:?}", v.unwrap_or(""))),
                },
                "log_swap" => o.log_swap = match v {
                    None | Some("1") | Some("on") => true,
                    Some("0") | Some("off") => false,
                    Some(x) => return Err(format!("option log_swap takes on or off, not {x:?}")),
                },
                "fresh_blocks" => o.fresh_in_place = match v {
                    Some("in_place") => Some(true),
                    Some("journal") => Some(false),
                    Some("auto") => None,
                    _ => return Err(format!("option fresh_blocks takes journal, in_place or auto, not {:?}", v.unwrap_or(""))),
                },
                "in_place_tags" => o.in_place_tags = match v {
                    None | Some("1") | Some("on") => true,
                    Some("0") | Some("off") => false,
                    Some(x) => return Err(format!("option in_place_tags takes on or off, not {x:?}")),
                },
                "write_threshold" => o.write_threshold = num(v)? as usize,
                "logged_write_size" => o.logged_write_size = Some(num(v)? as usize),
                "commit" => {
                    o.commit_interval = secs(v)?;
                    if o.commit_interval.is_zero() {
                        o.commit_interval = Duration::from_secs(5); // ext4: commit=0 means the default
                    }
                }
                "writeback_period" => o.writeback_period = secs(v)?.max(Duration::from_millis(10)),
                "expire" => o.expire_period = Some(secs(v)?),
                "nvm" => o.nvm_path = Some(PathBuf::from(v.filter(|v| !v.is_empty()).ok_or("option nvm needs the path of the NVM journal")?)),
                "ro" => o.read_only = true,
                "rw" => o.read_only = false,
                "journal_path" => o.journal_path = Some(PathBuf::from(v.ok_or("option journal_path needs a value")?)),
                "cache_blocks" => o.cache_blocks = num(v)? as usize,
                "min_batch_time" => o.min_batch_time = Duration::from_micros(num(v)?.min(10_000_000)),
                "max_batch_time" => o.max_batch_time = Duration::from_micros(num(v)?.min(10_000_000)),
                "batch_handles" => o.batch_handles = num(v)?.min(u32::MAX as u64) as u32,
                "commit_pipeline" => {
                    let n = num(v)?;
                    if !(1..=64).contains(&n) {
                        return Err(format!("option commit_pipeline takes 1 to 64 (commits whose flush may be in flight at once), not {n}"));
                    }
                    o.commit_pipeline = n as u32;
                }
                "batch" => {
                    o.batch_for_bytes = match v {
                        Some("latency") => false,
                        Some("bytes") => true,
                        other => return Err(format!("option batch={}: latency (the default) or bytes", other.unwrap_or(""))),
                    }
                }
                "max_tx_blocks" => {
                    let n = num(v)?;
                    let min = crate::journal::MIN_TX_BLOCKS;
                    if n < min {
                        return Err(format!("option max_tx_blocks={n}: below the smallest workable transaction ({min} blocks)"));
                    }
                    o.max_tx_blocks = Some(n);
                }
                "errors" => match v {
                    Some("remount-ro") => o.errors_remount_ro = true,
                    other => return Err(format!("option errors={}: only errors=remount-ro is supported", other.unwrap_or(""))),
                },
                "direct_io" => o.direct_io = true,
                "fault_panic_write_len" if std::env::var_os("OKEANOS_TEST_FAULTS").is_some_and(|v| v == "1") => o.faults.panic_write_len = Some(num(v)? as usize),
                "device_model" => {
                    let m = v.ok_or("option device_model needs a value")?;
                    crate::models::preset(m)?;
                    o.device_model = Some(m.to_string());
                }
                "journal_checksum" => {} // always on: commit blocks carry a transaction checksum
                "journal_server" => o.journal_server = Some(v.filter(|v| v.contains(':')).ok_or("option journal_server needs host:port (or nats:// URLs joined by ';')")?.replace(';', ",")),
                "remote_ack_timeout" => {
                    o.remote_ack_timeout = secs(v)?;
                    if o.remote_ack_timeout < Duration::from_millis(1) {
                        return Err("option remote_ack_timeout: at least 0.001 s".into());
                    }
                }
                "remote_secret" => o.remote_secret = Some(v.filter(|v| !v.is_empty()).ok_or("option remote_secret needs a value")?.as_bytes().to_vec()),
                "remote_secret_file" => {
                    let p = v.ok_or("option remote_secret_file needs a path")?;
                    let text = std::fs::read_to_string(p).map_err(|e| format!("option remote_secret_file={p}: {e}"))?;
                    o.remote_secret = Some(text.trim().as_bytes().to_vec());
                }
                "remote_host" => o.remote_host = Some(v.filter(|v| !v.is_empty()).ok_or("option remote_host needs a name")?.to_string()),
                "remote_tls_ca" => {
                    let p = v.filter(|v| !v.is_empty()).ok_or("option remote_tls_ca needs a path")?;
                    // Checked now, so a wrong file is a mount option error, not a network one.
                    crate::remote::transport::client_tls(std::path::Path::new(p), "localhost").map_err(|e| format!("option remote_tls_ca: {e}"))?;
                    o.remote_tls_ca = Some(p.into());
                }
                "jetstream_creds" | "jetstream_nkey" | "jetstream_tls_ca" => {
                    let p = v.filter(|v| !v.is_empty()).ok_or_else(|| format!("option {k} needs a path"))?;
                    std::fs::metadata(p).map_err(|e| format!("option {k}={p}: {e}"))?;
                    let slot = match k {
                        "jetstream_creds" => &mut o.jetstream_creds,
                        "jetstream_nkey" => &mut o.jetstream_nkey,
                        _ => &mut o.jetstream_tls_ca,
                    };
                    *slot = Some(p.into());
                }
                "jetstream_replicas" => {
                    let n: usize = v.and_then(|v| v.parse().ok()).filter(|n| (1..=5).contains(n)).ok_or("option jetstream_replicas needs a number from 1 to 5")?;
                    o.jetstream_replicas = n;
                }
                "remote_tls_name" => o.remote_tls_name = Some(v.filter(|v| !v.is_empty()).ok_or("option remote_tls_name needs a name")?.to_string()),
                _ => return Err(format!("unknown mount option {item:?}")),
            }
        }
        o.content()?;
        if o.min_batch_time > o.max_batch_time {
            return Err(format!("min_batch_time ({:?}) exceeds max_batch_time ({:?})", o.min_batch_time, o.max_batch_time));
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_handles_bounds_the_batching_wait() {
        assert_eq!(MountOptions::default().batch_handles, 32);
        assert_eq!(MountOptions::parse("batch_handles=0").unwrap().batch_handles, 0);
        assert_eq!(MountOptions::parse("batch_handles=8").unwrap().batch_handles, 8);
        assert!(MountOptions::parse("batch_handles=many").is_err());
        assert!(!MountOptions::default().batch_for_bytes);
        assert!(MountOptions::parse("batch=bytes").unwrap().batch_for_bytes);
        assert!(!MountOptions::parse("batch=bytes,batch=latency").unwrap().batch_for_bytes);
        for bad in ["batch", "batch=", "batch=throughput"] {
            let e = MountOptions::parse(bad).unwrap_err();
            assert!(e.contains("latency (the default) or bytes"), "{bad}: {e}");
        }
    }

    #[test]
    fn log_swap_is_on_by_default_and_parsed() {
        assert!(MountOptions::default().log_swap);
        assert!(!MountOptions::parse("checkpoint=lazy,log_swap=off").unwrap().log_swap);
        assert!(MountOptions::parse("log_swap=on").unwrap().log_swap);
        let e = MountOptions::parse("log_swap=sometimes").err().expect("refused");
        assert!(e.contains("log_swap takes on or off"), "{e}");
    }

    #[test]
    fn fresh_blocks_is_auto_by_default_parsed_and_refused_for_data() {
        assert!(MountOptions::default().fresh_in_place.is_none());
        let o = MountOptions::parse("data=wasteless,dmeta,fresh_blocks=in_place").unwrap();
        assert!(o.fresh_in_place == Some(true) && o.content().unwrap().fresh_in_place);
        assert_eq!(MountOptions::parse("fresh_blocks=journal").unwrap().fresh_in_place, Some(false));
        assert!(MountOptions::parse("fresh_blocks=auto").unwrap().fresh_in_place.is_none());
        assert!(!MountOptions::parse("fresh_blocks=auto").unwrap().content().unwrap().fresh_in_place, "auto is resolved at mount");
        assert!(MountOptions::default().in_place_tags && !MountOptions::parse("in_place_tags=off").unwrap().in_place_tags);
        assert!(MountOptions::parse("in_place_tags=maybe").unwrap_err().contains("on or off"));
        assert!(MountOptions::parse("fresh_blocks=maybe").unwrap_err().contains("journal, in_place or auto"));
        let err = MountOptions::parse("data=data,fresh_blocks=in_place").unwrap_err();
        assert!(err.contains("for data=wasteless"), "{err}");
        // A mode named apart from the options keeps them (the bench's --modes beside
        // --mount-options).
        let o = MountOptions::parse("fresh_blocks=in_place,write_threshold=8192").unwrap().policy_of(ContentConfig::parse("wasteless").unwrap());
        let c = o.content().unwrap();
        assert!(c.fresh_in_place && c.write_threshold == 8192 && c.mode == DataMode::Wasteless);
    }

    #[test]
    fn datasync_in_place_is_the_default_and_parsed() {
        assert!(MountOptions::default().datasync_in_place);
        assert!(!MountOptions::parse("data=ordered,datasync=commit").unwrap().datasync_in_place);
        assert!(MountOptions::parse("datasync=in_place").unwrap().datasync_in_place);
        for bad in ["datasync", "datasync=sometimes"] {
            let e = MountOptions::parse(bad).err().expect("refused");
            assert!(e.contains("datasync takes in_place or commit"), "{e}");
        }
    }

    #[test]
    fn fast_commit_blocks_is_sixteen_by_default_and_bounded() {
        assert_eq!(MountOptions::default().fast_commit_blocks, 16);
        assert_eq!(MountOptions::parse("fast_commit_blocks=1").unwrap().fast_commit_blocks, 1);
        assert_eq!(MountOptions::parse("fast_commit_blocks=16").unwrap().fast_commit_blocks, 16);
        for bad in ["fast_commit_blocks", "fast_commit_blocks=0", "fast_commit_blocks=17", "fast_commit_blocks=-1", "fast_commit_blocks=two"] {
            let e = MountOptions::parse(bad).err().expect("refused");
            assert!(e.contains("fast_commit_blocks takes a number of blocks from 1 to 16"), "{e}");
        }
    }
}
