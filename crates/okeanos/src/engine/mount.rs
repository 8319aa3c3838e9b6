//! Making and mounting a file system, and unmounting it: formatting devices and image
//! files, opening the journal (recovery first), starting the journal and checkpoint threads,
//! and the clean unmount (sync, stop the threads, checkpoint everything, mark the superblock
//! clean).

use super::*;

impl Okeanos {
    /// Formats a device (and an external journal device).
    pub fn mkfs(dev: &dyn Device, journal: Option<&dyn Device>, opts: &MkfsOptions) -> Result<Superblock, MkfsError> {
        crate::fs::mkfs::mkfs(dev, journal, opts)
    }

    /// Formats a device whose journal lives in non-volatile memory (the nvm placement, UBJ):
    /// `opts.nvm_path` is what the superblock records (a mount opens it unless given another
    /// region), `nvm` is formatted as its journal.
    pub fn mkfs_nvm(dev: &dyn Device, nvm: &dyn crate::nvm::Nvm, opts: &MkfsOptions) -> Result<Superblock, MkfsError> {
        if opts.nvm_path.is_none() {
            return Err(MkfsError::Invalid("an NVM journal needs nvm_path (what the superblock records)".into()));
        }
        // Checked before the device is written.
        crate::fs::mkfs::check_nvm_size(nvm, opts.block_size)?;
        let sb = crate::fs::mkfs::mkfs(dev, None, opts)?;
        crate::fs::mkfs::format_nvm(nvm, &sb)?;
        Ok(sb)
    }

    /// Creates an image file of `size_bytes` and formats it, writing its whole journal so
    /// that the file's space for it is allocated ([`MkfsOptions::zero_journal`]). Refuses to
    /// overwrite a file.
    pub fn mkfs_file(path: &Path, size_bytes: u64, opts: &MkfsOptions) -> Result<Superblock, MkfsError> {
        let dev = FileDevice::create(path, size_bytes, false)?;
        crate::fs::mkfs::mkfs(&dev, None, &MkfsOptions { zero_journal: true, ..opts.clone() })
    }

    /// Mounts an image file or block device (and `opts.journal_path`, if set).
    pub fn open(path: &Path, opts: MountOptions) -> FsResult<Okeanos> {
        let open = |p: &Path| -> FsResult<Arc<dyn Device>> {
            let d: Arc<dyn Device> = Arc::new(match (opts.read_only, opts.direct_io) {
                (ro, true) => FileDevice::open_direct(p, !ro),
                (true, false) => FileDevice::open_read_only(p),
                (false, false) => FileDevice::open(p),
            }?);
            Ok(match &opts.device_model {
                // Each device gets its own model instance: its own arm, queue and cache.
                Some(m) => Arc::new(crate::device::TimedDevice::new(d, crate::models::preset(m).map_err(FsError::Invalid)?)),
                None => d,
            })
        };
        let dev = open(path)?;
        let journal = match &opts.journal_path {
            Some(j) => Some(open(j)?),
            None => None,
        };
        Okeanos::mount(dev, journal, opts)
    }

    /// Mounts with the system clock.
    pub fn mount(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>, opts: MountOptions) -> FsResult<Okeanos> {
        Okeanos::mount_with_clock(dev, journal, opts, Arc::new(SystemClock::default()))
    }

    /// Mounts: validates the metadata, recovers the journal if needed, marks the file system
    /// mounted, finishes deleting orphans, and starts the journal thread.
    pub fn mount_with_clock(dev: Arc<dyn Device>, journal: Option<Arc<dyn Device>>, mut opts: MountOptions, clock: Arc<dyn Clock>) -> FsResult<Okeanos> {
        let (sb, _) = read_meta(dev.as_ref())?;
        let mut devs = Devices::new(dev.clone(), journal, sb.block_size as usize);
        devs.short_writes = opts.short_writes;
        let (region, jsb) = open_journal(&sb, &devs)?;
        let stats = Stats::new(sb.block_size as usize);
        let (opened, next_tid) = open::recover(&mut devs, &sb, region, &jsb, &opts, &stats, clock.as_ref())?;
        let dev = devs.fs.clone();
        // Recovery may have replayed the superblock and descriptors: read them again.
        let (mut sb, gdt) = read_meta(dev.as_ref())?;
        let errors = error_state(&sb);
        if let Some(why) = &errors {
            if !opts.read_only && !opts.errors_remount_ro {
                return Err(FsError::HasErrors(format!(
                    "{why}. A read-write mount is refused until `okeanos fsck` has checked it; it can be mounted read-only (ro, or errors=remount-ro)"
                )));
            }
            opts.read_only = true;
        }
        let mut journal = open::journal(&mut devs, &sb, opened, &opts, next_tid)?;
        // Blocks a manylogs recovery kept logged: owed by their transactions (which the mount's
        // table keeps live), parked in their logs.
        let kept = journal.recovered_kept();
        journal.adopt_logged(&kept);
        if !opts.read_only {
            sb.state = state::MOUNTED;
            sb.mount_count = sb.mount_count.wrapping_add(1);
            sb.last_mount_ns = clock.wall_ns();
            let mut b0 = vec![0u8; sb.block_size as usize];
            sb.encode(&mut b0);
            dev.write_at(0, &b0)?;
            stats.on_write(crate::journal::plan::BlockKind::FinalMeta, b0.len());
            dev.flush()?;
            // Recovery after a crash of this mount must know how many commits it may have had
            // in flight at once (its journal superblock says).
            journal.set_commit_pipeline(if opts.faults.pipeline_unrecorded { 0 } else { opts.pipeline_depth() });
            runtime::execute(&journal.mount_plan(), &devs, &stats)?;
        }
        let ro_reason = match errors {
            Some(why) => format!("mounted read-only: {why}"),
            None => "mounted read-only".to_string(),
        };
        let mut fs = FsState::new(sb, gdt, journal, opts.cache_blocks, opts.read_only.then_some(ro_reason));
        // Where the placement parks committed blocks the cache drops: in its logs on the
        // file-system device, or in the NVM it opened.
        fs.parking = match (fs.journal.parks(), fs.journal.parks_on_device(), &devs.nvm) {
            (false, _, _) => None,
            (true, true, _) => Some(crate::fs::Parking::Logs(devs.fs.clone())),
            (true, false, Some(nvm)) => Some(crate::fs::Parking::Nvm(nvm.clone())),
            (true, false, None) => return Err(FsError::Invalid(format!("the {} journal parks blocks in NVM, and this mount has none", fs.journal.placement().name()))),
        };
        // Slots of a placement that parks in NVM are its capacity (counted after each step).
        if fs.nvm_parking() {
            let p = fs.journal.placement();
            stats.on_nvm_slots(p.capacity(), p.capacity() - p.free_blocks(), 0);
        }
        let now = clock.now_ns();
        for k in &kept {
            fs.cache.insert_parked(k.block, k.at, k.tid, crate::cache::BufKind::Data, now);
        }
        let committed_at_mount = fs.journal.committed_tid();
        // `checkpoint_thread` resolved: `auto` is not with an internal journal on a disk that
        // seeks; the placement must allow it too (`Scheduler::beside`).
        let checkpoint_thread = opts.checkpoint_thread.unwrap_or_else(|| !(devs.journal.is_none() && devs.fs.seeks() == Some(true)));
        // What a commit's last write rounds up to (batching for bytes fills it).
        let journal_dev = if devs.journal.is_some() { crate::journal::plan::DevId::Journal } else { crate::journal::plan::DevId::Fs };
        let sched_cfg = opts.scheduler(checkpoint_thread, devs.block_size as u32, devs.writes_short(journal_dev));
        let inner = Arc::new(Inner {
            core: Mutex::new(Core { fs, sched: Scheduler::new(sched_cfg, now), closing: false, manual: opts.manual_journal, sync_waiters: Vec::new(), commit_lane_busy: false, lane_waiter: false, leads: 0, inline_syncs: None, flush_jobs: Vec::new(), flusher_answers: None, owed_wake: None }),
            cv: Condvar::new(),
            commit_cv: [Condvar::new(), Condvar::new()],
            sync_lock: Mutex::new(()),
            committed: std::sync::atomic::AtomicU64::new(committed_at_mount.get()),
            wake_gen: std::sync::atomic::AtomicU64::new(0),
            jcv: Condvar::new(),
            ccv: Condvar::new(),
            fcv: Condvar::new(),
            notifier: Mutex::new(None),
            devs,
            opts,
            clock,
            stats,
            threads: Mutex::new(Vec::new()),
            stages: Default::default(),
        });
        let me = Okeanos { _user: Some(Arc::new(UserGuard(inner.clone()))), inner };
        // Check the root before anything else: a foreign or damaged image fails here, clearly.
        me.getattr(me.root())?;
        if !me.inner.opts.read_only {
            if !me.inner.opts.manual_journal {
                let lanes: &[step::Lane] = if me.checkpoint_beside() { &[step::Lane::Commit, step::Lane::Checkpoint] } else { &[step::Lane::Commit] };
                for &lane in lanes {
                    let t = me.inner.clone();
                    let name = match lane {
                        step::Lane::Commit => "okeanos-journal",
                        step::Lane::Checkpoint => "okeanos-checkpoint",
                    };
                    let handle = std::thread::Builder::new().name(name.into()).spawn(move || step::journal_thread(t, lane));
                    match handle {
                        Ok(h) => me.inner.threads.lock().unwrap_or_else(|e| e.into_inner()).push(h),
                        Err(e) => {
                            // Stop what started (as a dropped mount would).
                            drop(me);
                            return Err(FsError::Io(format!("starting the {name} thread: {e}")));
                        }
                    }
                }
            }
            let flushers = if me.lock().fs.journal.placement().pipelines_commits() { me.inner.opts.pipeline_depth() } else { 0 };
            for _ in 0..flushers {
                let t = me.inner.clone();
                match std::thread::Builder::new().name("okeanos-flush".into()).spawn(move || flush::flusher_thread(t)) {
                    Ok(h) => me.inner.threads.lock().unwrap_or_else(|e| e.into_inner()).push(h),
                    Err(e) => {
                        drop(me);
                        return Err(FsError::Io(format!("starting a flusher thread: {e}")));
                    }
                }
            }
            let orphans = me.with_fs(|fs| fs.orphans())?;
            for ino in orphans {
                me.evict(ino)?;
            }
        }
        Ok(me)
    }

    /// Cleanly unmounts: finishes deletions, commits, checkpoints everything, marks the journal
    /// and the superblock clean. After an I/O error it stops without touching the image, which
    /// then recovers at the next mount.
    pub fn unmount(self) -> FsResult<()> {
        let ro = self.inner.opts.read_only;
        let synced = if ro { Ok(()) } else { self.sync() };
        {
            let mut core = self.lock();
            core.closing = true;
            self.close_all_stages(&mut core);
            core.sched.stop();
            self.inner.wake_all();
            self.inner.jcv.notify_all();
            self.inner.ccv.notify_all();
            self.inner.fcv.notify_all();
        }
        let threads = std::mem::take(&mut *self.inner.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for t in threads {
            let _ = t.join();
        }
        self.inner.deliver_syncs(&mut self.lock(), true);
        synced?;
        if ro {
            return Ok(());
        }
        let mut core = self.lock();
        if let Some(e) = core.fs.journal.aborted() {
            return Err(FsError::Io(format!("journal aborted, image left for recovery: {e}")));
        }
        let devs = &self.inner.devs;
        let stats = &self.inner.stats;
        core.fs.unpark_all()?;
        while let Some(plan) = core.fs.journal.checkpoint_begin(&core.fs.cache, CheckpointGoal::All) {
            runtime::execute(&plan.io, devs, stats)?;
            let Core { fs, .. } = &mut *core;
            fs.journal.checkpoint_finish(&mut fs.cache, plan);
            if fs.journal.oldest_owed_tid().is_none() {
                break;
            }
        }
        runtime::execute(&core.fs.journal.clean_plan(), devs, stats)?;
        let mut sb = core.fs.sb.clone();
        sb.state = state::CLEAN;
        let c = self.counters();
        let l = &mut sb.lifetime;
        l.journal_bytes += c.journal_bytes;
        l.final_bytes += c.final_bytes;
        l.payload_bytes += c.payload_bytes;
        l.commits += c.commits;
        l.syncs += c.syncs;
        let mut b0 = vec![0u8; sb.block_size as usize];
        sb.encode(&mut b0);
        devs.fs.write_at(0, &b0)?;
        stats.on_write(crate::journal::plan::BlockKind::FinalMeta, b0.len());
        devs.fs.flush()?;
        Ok(())
    }
}
