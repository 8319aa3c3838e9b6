//! The simulated storage's flags (`ModelArgs`): disk models, the journal's placement and its
//! devices, mount options; and the world configuration a run is built from.

use super::*;

/// Flags of the simulated storage.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// Device model of the file-system disk: cheetah15k, sata7200, ssd, nvm, net-lan, net-wan.
    #[arg(long, default_value = "cheetah15k")]
    pub model: String,
    /// Model of the journal disk (default: the same as --model).
    #[arg(long)]
    pub journal_model: Option<String>,
    /// Journal placement: external (its own disk, as in the papers), internal, remote (a
    /// journal server over --net with its own --server-model disk; the internal journal is its
    /// fallback), replicated (a JetStream-like log of --replicas servers, each with a
    /// --server-model disk, acknowledged by a majority), nvm (UBJ: commits frozen in a
    /// --nvm-size region of non-volatile memory on the nvm model, checkpoints to --model), or
    /// dropped (the remote placement sending nothing: the thesis' no-journal upper bound, for
    /// comparison only), or manylogs (a log in every 100 MB group, the commits near the disk
    /// head; with --mount-options snapshot_period=<s> its map is snapshot, checkpoint=lazy
    /// keeps data logged).
    #[arg(long, default_value = "external")]
    pub journal: String,
    /// The NVM of an nvm journal (--journal nvm), such as 256M.
    #[arg(long, default_value = "256M")]
    pub nvm_size: String,
    /// The link to the journal server of a remote journal: net-lan or net-wan.
    #[arg(long, default_value = "net-lan")]
    pub net: String,
    /// The journal server's disk model (remote journal), each replica's (replicated).
    #[arg(long, default_value = "cheetah15k")]
    pub server_model: String,
    /// Replicas of a replicated journal (odd, at least 3).
    #[arg(long, default_value = "3")]
    pub replicas: usize,
    /// The replicated log's leader dies at this virtual time (such as 2s)...
    #[arg(long)]
    pub leader_loss_at: Option<String>,
    /// ...and appends wait this long for a new one (an election).
    #[arg(long, default_value = "5s")]
    pub election: String,
    /// Seed of the workload's random choices (stream phases).
    #[arg(long, default_value = "1")]
    pub seed: u64,
    #[arg(long, default_value = "16G")]
    pub fs_size: String,
    #[arg(long, default_value = "128M")]
    pub journal_size: String,
    /// Engine mount options (writeback_period=10,expire=150,...).
    #[arg(long, default_value = "")]
    pub mount_options: String,
    /// Simulations to run in parallel (each is single-threaded and deterministic).
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Age-based writeback tuning: `default` (the mount options), or `thesis`: the writeback
    /// and expiration periods the thesis chose per rate and stream count (its Tables 6.2-6.4).
    #[arg(long, default_value = "default")]
    pub flush_tuning: String,
}

/// The thesis' flushing policy (writeback period, expiration period, in seconds) for a
/// stream rate and count: Tables 6.2 (1 Kbit/s), 6.3 (10 Kbit/s) and 6.4 (1 Mbit/s); the row
/// with the nearest stream count at or above `n` (the last row beyond the table).
pub fn thesis_tuning(rate: okeanos::workload::Rate, n: usize) -> Option<(u64, u64)> {
    const T1K: [(usize, u64, u64); 10] = [(100, 10, 300), (500, 10, 300), (1000, 10, 150), (2000, 10, 60), (3000, 1, 30), (4000, 1, 30), (5000, 1, 5), (6000, 1, 5), (7000, 1, 5), (8000, 1, 5)];
    const T10K: [(usize, u64, u64); 5] = [(50, 10, 300), (100, 5, 100), (500, 5, 60), (1000, 1, 30), (1500, 1, 10)];
    const T1M: [(usize, u64, u64); 5] = [(10, 5, 20), (25, 1, 5), (50, 1, 3), (75, 1, 1), (100, 1, 1)];
    let bits = match rate {
        okeanos::workload::Rate::Bits(b) => b,
        _ => return None,
    };
    let table: &[(usize, u64, u64)] = if bits <= 2e3 {
        &T1K
    } else if bits <= 1e5 {
        &T10K
    } else {
        &T1M
    };
    let row = table.iter().find(|r| r.0 >= n).or(table.last())?;
    Some((row.1, row.2))
}

impl ModelArgs {
    /// How the simulated disk is formatted: with a log in every group for `--journal manylogs`.
    pub fn mkfs(&self) -> MkfsOptions {
        MkfsOptions { manylogs: self.journal == "manylogs", ..Default::default() }
    }

    /// A world configuration for `cfg` (checked).
    pub fn world(&self, cfg: ContentConfig) -> Result<WorldConfig, String> {
        let fs_model = model::preset(&self.model)?;
        let jname = self.journal_model.clone().unwrap_or_else(|| self.model.clone());
        let (external, remote) = match self.journal.as_str() {
            "external" => (true, None),
            "internal" | "nvm" => (false, None),
            "manylogs" => (false, None),
            "remote" | "dropped" => (false, Some(okeanos_sim::world::RemoteConfig::single(model::preset(&self.net)?, model::preset(&self.server_model)?, self.journal == "dropped"))),
            "replicated" => {
                if self.replicas < 3 || self.replicas % 2 == 0 {
                    return Err(format!("--replicas {}: an odd number, at least 3", self.replicas));
                }
                let mut r = okeanos_sim::world::RemoteConfig::single(model::preset(&self.net)?, model::preset(&self.server_model)?, false);
                r.followers = (1..self.replicas).map(|_| model::preset(&self.server_model)).collect::<Result<_, _>>()?;
                if let Some(at) = &self.leader_loss_at {
                    let ns = |s: &str| okeanos::workload::parse_duration(s).map(|d| d.as_nanos() as u64);
                    r.leader_loss = Some((ns(at)?, ns(&self.election)?));
                }
                (false, Some(r))
            }
            x => return Err(format!("--journal {x}: use external, internal, remote, replicated, nvm, manylogs or dropped")),
        };
        if !external && self.journal_model.is_some() {
            return Err("--journal-model applies only to an external journal".into());
        }
        let fs_bytes = crate::parse_size(&self.fs_size)?;
        let journal_bytes = crate::parse_size(&self.journal_size)?;
        if fs_bytes < 64 << 20 || journal_bytes < 1 << 20 {
            return Err("--fs-size must be at least 64M and --journal-size at least 1M".into());
        }
        // Simulated devices live in memory (untouched pages cost nothing, but they must fit).
        if fs_bytes > 64 << 30 || journal_bytes > 16 << 30 {
            return Err("the simulator keeps its devices in memory: --fs-size at most 64G and --journal-size at most 16G".into());
        }
        let mut mount = if self.mount_options.is_empty() { MountOptions::default() } else { MountOptions::parse(&self.mount_options)? };
        mount = mount.policy_of(cfg);
        mount.content()?;
        Ok(WorldConfig {
            fs_bytes,
            external_journal_blocks: external.then_some(journal_bytes / 4096),
            journal_blocks: journal_bytes / 4096,
            fs_model,
            journal_model: if external { Some(model::preset(&jname)?) } else { None },
            mount,
            wall_origin: 1_700_000_000_000_000_000,
            frozen_wall: false,
            remote,
            nvm: match self.journal.as_str() {
                "nvm" => {
                    let bytes = crate::parse_size(&self.nvm_size)?;
                    if bytes > 16 << 30 {
                        return Err("the simulator keeps NVM in memory: --nvm-size at most 16G".into());
                    }
                    Some(okeanos_sim::world::NvmConfig { region: std::sync::Arc::new(okeanos::nvm::MemNvm::new(bytes)), model: model::preset("nvm")? })
                }
                _ => None,
            },
            journal_at: None,
            timed_reads: None,
        })
    }

    /// The configuration for one run, with the flush tuning applied.
    pub fn world_for(&self, cfg: ContentConfig, rate: okeanos::workload::Rate, n: usize) -> Result<WorldConfig, String> {
        let mut w = self.world(cfg)?;
        match self.flush_tuning.as_str() {
            "default" => {}
            "thesis" => {
                if let Some((wb, exp)) = thesis_tuning(rate, n) {
                    w.mount.writeback_period = std::time::Duration::from_secs(wb);
                    w.mount.expire_period = Some(std::time::Duration::from_secs(exp));
                }
            }
            x => return Err(format!("--flush-tuning {x}: use default or thesis")),
        }
        Ok(w)
    }

    /// A run of this simulated storage, before its results.
    pub(super) fn run_of(&self, workload: &str, mode: ContentConfig, streams: usize, size: usize, rate: okeanos::workload::Rate, sync: &str, sync_every: usize) -> Run {
        Run {
            workload: workload.into(),
            mode: mode.name(),
            target: self.target(),
            streams,
            size,
            rate: rate.to_string(),
            sync: sync.into(),
            sync_every,
            model: Some(self.model.clone()),
            seed: Some(self.seed),
            ..Default::default()
        }
    }

    pub fn target(&self) -> String {
        match (&self.journal_model, self.journal.as_str()) {
            (_, "internal") => format!("sim:{}", self.model),
            (_, "nvm") => format!("sim:{}+nvm", self.model),
            (_, "manylogs") => format!("sim:{}+manylogs", self.model),
            (_, "remote") => format!("sim:{}+remote({},{})", self.model, self.net, self.server_model),
            (_, "replicated") => format!("sim:{}+replicated({}x{},{})", self.model, self.replicas, self.server_model, self.net),
            (_, "dropped") => format!("sim:{}+no journal", self.model),
            (Some(j), _) => format!("sim:{}+{}", self.model, j),
            (None, _) => format!("sim:{}+{}", self.model, self.model),
        }
    }

    pub(super) fn jobs(&self) -> usize {
        self.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1)
    }
}
