//! File operations under every content policy, persistence across remounts, and fsck.

mod common;
use common::*;
use okeanos::{DataMode, Device, FsError, Okeanos, SetAttr};
use std::sync::Arc;

fn exercise(fs: &Okeanos) {
    fs.mkdir_path("/logs").unwrap();
    fs.mkdir_path("/logs/tenant-a").unwrap();
    let f = fs.create_file("/logs/tenant-a/0.log").unwrap();
    for k in 0..100 {
        f.append(&record(0, k, 128)).unwrap();
        if k % 10 == 0 {
            f.fdatasync().unwrap();
        }
    }
    // A write across block boundaries at an odd offset, and a hole.
    f.write_at(4000, &record(1, 0, 9000)).unwrap();
    f.write_at(200_000, b"after a hole").unwrap();
    f.fsync().unwrap();
    drop(f);
    fs.create_file("/logs/tenant-a/tmp").unwrap().write_at(0, b"x").unwrap();
    fs.rename_path("/logs/tenant-a/tmp", "/logs/renamed").unwrap();
    let root = fs.root();
    let a = fs.resolve("/logs/renamed").unwrap();
    fs.link(a, root, b"hardlink").unwrap();
    fs.symlink(root, b"sym", b"/logs/renamed").unwrap();
    fs.setattr(a, &SetAttr { mode: Some(0o600), uid: Some(7), ..Default::default() }).unwrap();
    fs.create_file("/gone").unwrap();
    fs.remove_path("/gone").unwrap();
    fs.mkdir_path("/empty").unwrap();
    fs.rmdir_path("/empty").unwrap();
    fs.sync().unwrap();
}

fn expected_log() -> Vec<u8> {
    let mut v = Vec::new();
    for k in 0..100 {
        v.extend(record(0, k, 128));
    }
    v.resize(4000, 0);
    v.extend(record(1, 0, 9000));
    v.resize(200_000, 0);
    v.extend(b"after a hole");
    v
}

fn verify(fs: &Okeanos) {
    assert_eq!(fs.read_path("/logs/tenant-a/0.log").unwrap(), expected_log());
    let names: Vec<_> = fs.list_path("/").unwrap().into_iter().map(|e| String::from_utf8(e.name).unwrap()).collect();
    assert_eq!(names, ["hardlink", "logs", "sym"]);
    let a = fs.getattr(fs.resolve("/hardlink").unwrap()).unwrap();
    assert_eq!((a.nlink, a.perm, a.uid), (2, 0o600, 7));
    assert_eq!(fs.read_path("/logs/renamed").unwrap(), b"x");
    assert_eq!(fs.readlink(fs.resolve("/sym").unwrap()).unwrap(), b"/logs/renamed");
    assert_eq!(fs.resolve("/gone"), Err(FsError::NotFound));
    assert_eq!(fs.getattr(fs.resolve("/logs").unwrap()).unwrap().nlink, 3);
}

#[test]
fn operations_persist_under_every_policy() {
    for mode in DataMode::ALL {
        let dev = mem_fs(32 * MB, 1024);
        let fs = mount(&dev, mode);
        exercise(&fs);
        verify(&fs);
        fs.unmount().unwrap();
        assert_fsck_clean(dev.clone(), None);
        let fs = mount(&dev, mode);
        verify(&fs);
        fs.unmount().unwrap();
    }
}

#[test]
fn crash_without_unmount_recovers_synced_state() {
    for mode in DataMode::ALL {
        let dev = mem_fs(32 * MB, 1024);
        let fs = mount(&dev, mode);
        exercise(&fs);
        // No unmount: copy the device as it is (everything flushed so far is on it).
        let image = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
        drop(fs);
        let fs = mount(&image, mode);
        verify(&fs);
        assert!(fs.counters().recovery.is_some());
        fs.unmount().unwrap();
        assert_fsck_clean(image, None);
    }
}

/// A new file system whose journal superblock lacks journal feature `bit`, as mkfs wrote it
/// before the feature came.
fn without_journal_feature(bit: u32) -> Arc<okeanos::MemDevice> {
    use okeanos::format::journal::JournalSuperblock;
    let dev = mem_fs(32 * MB, 1024);
    let sb = okeanos::format::superblock::Superblock::decode(&dev.snapshot()[..4096]).unwrap();
    let okeanos::format::superblock::JournalLocation::Internal { start, .. } = sb.journal else { panic!("an internal journal") };
    let mut b = vec![0u8; 4096];
    dev.read_at(start * 4096, &mut b).unwrap();
    let mut jsb = JournalSuperblock::decode(&b).unwrap();
    assert_ne!(jsb.features & bit, 0, "mkfs sets the feature");
    jsb.features &= !bit;
    jsb.encode(&mut b);
    dev.write_at(start * 4096, &b).unwrap();
    dev
}

/// Fast commit blocks (docs/FORMAT.md): a 128-byte append and fsync under wasteless+dmeta is
/// one journal block, recovered after a crash; a journal made before the feature (its
/// superblock without FAST_COMMIT) still mounts and is written in the classic form, two
/// blocks a commit, and a mount with `fast_commit=off` writes the classic form too.
#[test]
fn small_commits_are_one_block_and_old_journals_keep_the_classic_form() {
    use okeanos::format::journal::jfeature;
    let wasteless = || {
        let mut o = opts(DataMode::Wasteless);
        o.dmeta = true;
        o
    };
    // (journal blocks a commit, fast commits) of 20 appends and fsyncs, and the data after a crash.
    let run = |dev: &Arc<okeanos::MemDevice>, o: okeanos::MountOptions| {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let f = fs.create_file("/log").unwrap();
        fs.sync().unwrap();
        let before = fs.counters();
        let mut expect = Vec::new();
        for k in 0..20 {
            let r = record(1, k, 128);
            f.append(&r).unwrap();
            f.fsync().unwrap();
            expect.extend_from_slice(&r);
        }
        let c = fs.counters().since(&before);
        let image = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
        drop(f);
        drop(fs);
        let fs = Okeanos::mount(image.clone() as Arc<dyn Device>, None, wasteless()).unwrap();
        assert_eq!(fs.read_path("/log").unwrap(), expect, "every synced record after the crash");
        fs.unmount().unwrap();
        assert_fsck_clean(image, None);
        eprintln!("{} journal bytes in {} commits", c.journal_bytes, c.commits);
        (c.journal_blocks_per_commit, c.fast_commits, c.commits, c.journal_bytes)
    };
    // A memory device takes short writes: a fast commit is written as the sectors it fills
    // (one here), a classic commit block as its first sector.
    let (per, fast, commits, bytes) = run(&mem_fs(32 * MB, 1024), wasteless());
    assert!(commits >= 20 && fast == commits && per == 1.0, "one block a commit: {per} blocks, {fast} of {commits} fast");
    assert_eq!(bytes, 512 * commits, "one sector a commit");

    // short_writes=off, and auto on a device that seeks (a spinning disk pays a revolution for
    // the hole a short write leaves before the next commit): whole blocks.
    let (_, fast, commits, bytes) = run(&mem_fs(32 * MB, 1024), okeanos::MountOptions { short_writes: Some(false), ..wasteless() });
    assert!(fast == commits && bytes == 4096 * commits, "short_writes=off: {bytes} bytes in {commits} commits");
    let seeking = Arc::new(okeanos::MemDevice::from_bytes(mem_fs(32 * MB, 1024).snapshot()).seeking(true));
    let (_, _, commits, bytes) = run(&seeking, wasteless());
    assert_eq!(bytes, 4096 * commits, "auto on a device that seeks");
    let (_, _, commits, bytes) = run(&seeking, okeanos::MountOptions { short_writes: Some(true), ..wasteless() });
    assert_eq!(bytes, 512 * commits, "short_writes=on on a device that seeks");

    let (per, fast, commits, bytes) = run(&mem_fs(32 * MB, 1024), okeanos::MountOptions { fast_commit: false, ..wasteless() });
    assert!(fast == 0 && per >= 2.0, "fast_commit=off: {per} blocks a commit, {fast} fast");
    assert_eq!(bytes, (4096 + 512) * commits, "a descriptor and the commit block's first sector");

    // A journal superblock as mkfs wrote it before the feature.
    let dev = without_journal_feature(jfeature::FAST_COMMIT);
    let (per, fast, _, _) = run(&dev, wasteless());
    assert!(fast == 0 && per >= 2.0, "a journal without the feature: {per} blocks a commit, {fast} fast");
}

/// Fast commit spans (docs/FORMAT.md): one commit of four 400-byte appends to each of four files under
/// wasteless+dmeta (about 7 KiB of tags and records) is a span of a few blocks, not a
/// descriptor, multiwrite blocks and a commit block, and is recovered after a crash;
/// `fast_commit_blocks=1`, and a journal made before spans (its superblock without
/// FAST_COMMIT_SPAN), write that commit in the classic form, in more bytes.
#[test]
fn group_commits_of_records_are_fast_commit_spans() {
    use okeanos::format::journal::jfeature;
    let wasteless = |blocks: usize| {
        let mut o = opts(DataMode::Wasteless);
        o.dmeta = true;
        o.short_writes = Some(false);
        o.fast_commit_blocks = blocks;
        o
    };
    // (journal bytes, fast commits, spans) of one commit of 16 appends, and the data after a crash.
    let run = |dev: &Arc<okeanos::MemDevice>, o: okeanos::MountOptions| {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let files: Vec<_> = (0..4).map(|k| fs.create_file(&format!("/f{k}")).unwrap()).collect();
        fs.sync().unwrap();
        let before = fs.counters();
        for (k, f) in files.iter().enumerate() {
            for n in 0..4 {
                f.append(&record(k, n, 400)).unwrap();
            }
        }
        fs.sync().unwrap();
        let c = fs.counters().since(&before);
        let image = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
        drop(files);
        drop(fs);
        let fs = Okeanos::mount(image.clone() as Arc<dyn Device>, None, wasteless(16)).unwrap();
        for k in 0..4usize {
            let expect: Vec<u8> = (0..4).flat_map(|n| record(k, n, 400)).collect();
            assert_eq!(fs.read_path(&format!("/f{k}")).unwrap(), expect, "file {k} after the crash");
        }
        fs.unmount().unwrap();
        assert_fsck_clean(image, None);
        eprintln!("{} journal bytes in {} commits ({} fast, {} spans)", c.journal_bytes, c.commits, c.fast_commits, c.fast_spans);
        assert_eq!(c.commits, 1, "one commit for the 16 appends");
        (c.journal_bytes, c.fast_commits, c.fast_spans)
    };
    let (span_bytes, fast, spans) = run(&mem_fs(32 * MB, 1024), wasteless(16));
    assert!(fast == 1 && spans == 1, "a span: {fast} fast commits, {spans} spans");
    let (classic_bytes, fast, _) = run(&mem_fs(32 * MB, 1024), wasteless(1));
    assert_eq!(fast, 0, "fast_commit_blocks=1: the classic form");
    assert!(span_bytes < classic_bytes, "a span ({span_bytes} bytes) is smaller than the classic form ({classic_bytes})");

    // A journal superblock as mkfs wrote it before spans: one-block fast commits only.
    let dev = without_journal_feature(jfeature::FAST_COMMIT_SPAN);
    let (bytes, fast, spans) = run(&dev, wasteless(16));
    assert!(fast == 0 && spans == 0 && bytes == classic_bytes, "a journal without spans: {bytes} bytes, {fast} fast");
}

/// Compact tags (docs/FORMAT.md, "Compact tags"): a group commit of 40 appends of 128 bytes to
/// 40 files under wasteless+dmeta (80 records, on a journal without inode notes: each append
/// and its inode's changed bytes) is a fast commit whose tags take 10 bytes, not 16, so it
/// writes fewer sectors, and recovers the same after a crash; a journal made before the form
/// (its superblock without FAST_COMMIT_COMPACT) still mounts and writes full tags. Inode notes
/// (docs/FORMAT.md, "Inode notes"): with the journal's FAST_COMMIT_NOTES, the same commit tells
/// the 40 inodes in 40 notes, no tags, and writes fewer sectors still, recovered the same; with
/// FAST_COMMIT_SHORT_NOTES too (mkfs's default) the notes take 12 bytes, not 16.
#[test]
fn fast_commits_carry_compact_tags_and_old_journals_keep_full_ones() {
    use okeanos::format::journal::jfeature;
    let o = || {
        let mut o = opts(DataMode::Wasteless);
        o.dmeta = true;
        o.short_writes = Some(true);
        o
    };
    let run = |dev: &Arc<okeanos::MemDevice>| {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o()).unwrap();
        let files: Vec<_> = (0..40).map(|k| fs.create_file(&format!("/f{k}")).unwrap()).collect();
        for (k, f) in files.iter().enumerate() {
            f.append(&record(k, 0, 128)).unwrap();
        }
        fs.sync().unwrap();
        let before = fs.counters();
        for (k, f) in files.iter().enumerate() {
            f.append(&record(k, 1, 128)).unwrap();
        }
        fs.sync().unwrap();
        let c = fs.counters().since(&before);
        assert_eq!((c.commits, c.fast_commits), (1, 1), "one fast commit for the 40 appends");
        let image = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
        drop(files);
        drop(fs);
        let fs = Okeanos::mount(image.clone() as Arc<dyn Device>, None, o()).unwrap();
        for k in 0..40usize {
            let expect: Vec<u8> = (0..2).flat_map(|n| record(k, n, 128)).collect();
            assert_eq!(fs.read_path(&format!("/f{k}")).unwrap(), expect, "file {k} after the crash");
        }
        fs.unmount().unwrap();
        assert_fsck_clean(image, None);
        (c.journal_bytes, c.inode_notes)
    };
    let notes_bits = jfeature::FAST_COMMIT_NOTES | jfeature::FAST_COMMIT_SHORT_NOTES;
    let (short, notes) = run(&mem_fs(32 * MB, 1024));
    let (noted, long_notes) = run(&without_journal_feature(jfeature::FAST_COMMIT_SHORT_NOTES));
    let (compact, none) = run(&without_journal_feature(notes_bits));
    let (full, _) = run(&without_journal_feature(jfeature::FAST_COMMIT_COMPACT | notes_bits));
    eprintln!("40 appends of 128 bytes: {short} journal bytes with short inode notes, {noted} with 16-byte ones, {compact} with compact tags, {full} with full ones");
    assert_eq!((notes, long_notes, none), (40, 40, 0), "an inode note for each appended file, and none without the feature");
    // 40 notes x 4 bytes: 160 bytes, which here crosses a sector: 40 x 154 + 48 = 6,208 bytes
    // fill 13 sectors (with a continuation header, 6,232), 40 x 150 + 48 = 6,048 fill 12.
    assert!(short + 512 <= noted, "short notes ({short} bytes) save a sector against 16-byte ones ({noted})");
    // 80 tags x 6 bytes saved: 480 bytes, a sector at least once rounded to sectors.
    assert!(compact + 512 <= full, "compact tags ({compact} bytes) save at least a sector against full ones ({full})");
    // An inode's record is its bytes from the checksum to the last changed byte of ctime
    // (about 29 of them) under a 10-byte tag; a note is 16 bytes: 40 x 23 = 920 bytes saved,
    // a sector at least once rounded to sectors.
    assert!(noted + 512 <= compact, "inode notes ({noted} bytes) save at least a sector against records ({compact})");
}

/// `okeanos tune` (docs/FORMAT.md, "Journal features"): a journal made without fast commits
/// gains them on a clean journal and the next mount writes them, recovered after a crash; turned
/// off again, the next mount writes the classic form. Refused and nothing written: a journal
/// that needs recovery (until it is recovered), a feature that cannot change, a set of features
/// a journal may not have.
#[test]
fn tune_turns_fast_commit_forms_on_and_off_on_a_clean_journal() {
    use okeanos::format::journal::jfeature;
    use okeanos::inspect::{tune_journal, Tuned};
    let o = || {
        let mut o = opts(DataMode::Wasteless);
        o.dmeta = true;
        o
    };
    let all = jfeature::TX_CHECKSUM | jfeature::MULTIWRITE | jfeature::TUNABLE;
    let base = jfeature::TX_CHECKSUM | jfeature::MULTIWRITE;
    // One synced append on a mounted image; returns the commits it made (all, fast) and the
    // image as a crash would leave it.
    let append = |dev: &Arc<okeanos::MemDevice>, k: usize| {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o()).unwrap();
        let f = fs.create_file(&format!("/t{k}")).unwrap();
        f.append(&record(k, 0, 128)).unwrap();
        fs.sync().unwrap();
        let before = fs.counters();
        f.append(&record(k, 1, 128)).unwrap();
        f.fsync().unwrap();
        let c = fs.counters().since(&before);
        let crashed = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
        drop(f);
        fs.unmount().unwrap();
        ((c.commits, c.fast_commits), crashed)
    };
    let dev = mem_fs(32 * MB, 1024);
    let off = tune_journal(dev.clone(), None, 0, jfeature::TUNABLE).unwrap();
    assert_eq!(off, Tuned { before: all, after: base }, "mkfs sets every feature; tune turned the fast commit forms off");
    let (commits, _) = append(&dev, 0);
    assert_eq!(commits, (1, 0), "without FAST_COMMIT the sync is a classic commit");

    assert_eq!(tune_journal(dev.clone(), None, jfeature::TUNABLE, 0).unwrap(), Tuned { before: base, after: all });
    assert_eq!(tune_journal(dev.clone(), None, jfeature::TUNABLE, 0).unwrap(), Tuned { before: all, after: all }, "a second time changes nothing");
    let (commits, crashed) = append(&dev, 1);
    assert_eq!(commits, (1, 1), "after tune the same sync is a fast commit");
    // The crash image: its journal needs recovery, so tune refuses and writes nothing.
    let image = crashed.snapshot();
    let err = tune_journal(crashed.clone(), None, 0, jfeature::FAST_COMMIT_COMPACT).unwrap_err();
    assert!(err.to_string().contains("needs recovery"), "{err}");
    assert!(crashed.snapshot() == image, "a refused tune writes nothing");
    okeanos::inspect::recover_image(crashed.clone(), None).unwrap().expect("the fast commit is replayed");
    let fs = Okeanos::mount(crashed.clone() as Arc<dyn Device>, None, o()).unwrap();
    let expect: Vec<u8> = (0..2).flat_map(|n| record(1, n, 128)).collect();
    assert_eq!(fs.read_path("/t1").unwrap(), expect, "the synced append after the crash");
    fs.unmount().unwrap();
    assert_fsck_clean(crashed.clone(), None);
    let err = tune_journal(crashed.clone(), None, 0, jfeature::FAST_COMMIT).unwrap_err();
    assert!(err.to_string().contains("need fast_commit"), "span and compact without fast commits: {err}");
    for bad in [jfeature::TX_CHECKSUM, jfeature::MULTIWRITE, 1 << 9] {
        let image = crashed.snapshot();
        let err = tune_journal(crashed.clone(), None, 0, bad).unwrap_err();
        assert!(err.to_string().contains("not a feature that can be changed"), "{bad:#x}: {err}");
        assert!(crashed.snapshot() == image, "a refused tune writes nothing");
    }
    // Off again, on the recovered image: the classic form once more.
    tune_journal(crashed.clone(), None, 0, jfeature::TUNABLE).unwrap();
    let (commits, _) = append(&crashed, 2);
    assert_eq!(commits, (1, 0), "turned off, the sync is a classic commit again");
    assert_fsck_clean(crashed, None);
}

#[test]
fn external_journal_on_its_own_device() {
    let dev = Arc::new(okeanos::MemDevice::new(32 * MB));
    let jdev = Arc::new(okeanos::MemDevice::new(4 * MB));
    Okeanos::mkfs(dev.as_ref(), Some(jdev.as_ref()), &okeanos::MkfsOptions { external_journal: true, ..Default::default() }).unwrap();
    let fs = Okeanos::mount(dev.clone(), Some(jdev.clone() as Arc<dyn Device>), opts(DataMode::Data)).unwrap();
    exercise(&fs);
    let c = fs.counters();
    assert!(c.journal_device.unwrap().bytes_written >= c.journal_bytes);
    fs.unmount().unwrap();
    assert_fsck_clean(dev.clone(), Some(jdev.clone()));
    // Without its journal the file system refuses to mount, and says why.
    let err = Okeanos::mount(dev.clone(), None, opts(DataMode::Data)).err().unwrap();
    assert!(err.to_string().contains("external journal"), "{err}");
    let fs = Okeanos::mount(dev, Some(jdev as Arc<dyn Device>), opts(DataMode::Data)).unwrap();
    verify(&fs);
    fs.unmount().unwrap();
}

#[test]
fn errors_have_their_errno() {
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    let root = fs.root();
    fs.mkdir_path("/d").unwrap();
    fs.create_file("/d/f").unwrap();
    assert_eq!(fs.mkdir_path("/d").unwrap_err(), FsError::Exists);
    assert_eq!(fs.rmdir_path("/d").unwrap_err(), FsError::NotEmpty);
    assert_eq!(fs.remove_path("/d").unwrap_err(), FsError::IsDir);
    assert_eq!(fs.rmdir_path("/d/f").unwrap_err(), FsError::NotDir);
    assert_eq!(fs.create(root, &[b'a'; 300], 0o644).unwrap_err(), FsError::NameTooLong);
    assert_eq!(fs.create(root, b"a/b", 0o644).unwrap_err().errno(), 22);
    assert_eq!(fs.rename_path("/d", "/d/f/x").unwrap_err(), FsError::NotDir);
    let d = fs.resolve("/d").unwrap();
    assert!(matches!(fs.rename(root, b"d", d, b"inside"), Err(FsError::Invalid(_))));
    assert_eq!(fs.lookup(root, b"nope").unwrap_err().errno(), 2);
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

#[test]
fn unlinked_open_file_keeps_data_until_close() {
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Data);
    let f = fs.create_file("/tmpfile").unwrap();
    f.write_at(0, &vec![7u8; 50_000]).unwrap();
    let free_before = fs.statfs().blocks_free;
    fs.remove_path("/tmpfile").unwrap();
    assert_eq!(f.read_at(0, 10).unwrap(), vec![7u8; 10]);
    f.append(b"more").unwrap();
    f.fsync().unwrap();
    // A crash now leaves an orphan that the next mount deletes.
    let image = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
    drop(f);
    fs.sync().unwrap();
    fs.sync().unwrap();
    assert!(fs.statfs().blocks_free > free_before);
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
    let fs2 = mount(&image, DataMode::Data);
    fs2.sync().unwrap();
    fs2.unmount().unwrap();
    let r = okeanos::fsck(image, None);
    assert!(r.is_clean() && r.orphans == 0, "{r:#?}");
}

/// A directory removed while held (the FUSE kernel's lookup of it, as an open handle holds a
/// file) keeps its inode, empty and with no links, on the orphan list until the last hold
/// goes (docs/JOURNALING.md, "Removed while held"); fsck accepts that state, a crash in it is
/// finished by the next mount, and the release frees it at once.
#[test]
fn a_removed_directory_stays_held_until_released() {
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    let root = fs.resolve("/").unwrap();
    let d = fs.mkdir(root, b"d", 0o755).unwrap().ino;
    let kept = fs.mkdir(root, b"kept", 0o755).unwrap().ino;
    fs.create(d, b"f", 0o644).unwrap();
    fs.remove_path("/d/f").unwrap();
    fs.open_ino(d).unwrap();
    fs.rmdir(root, b"d").unwrap();
    let a = fs.getattr(d).unwrap();
    assert_eq!((a.nlink, fs.readdir(d).unwrap().iter().filter(|e| e.name != b"." && e.name != b"..").count()), (0, 0));
    assert_eq!(fs.getattr(root).unwrap().nlink, 3, "the root lost d's link, keeps kept's");
    fs.sync().unwrap();
    let crashed = Arc::new(okeanos::MemDevice::from_bytes(dev.snapshot()));
    // Released: freed now, the same inode number free for the next directory.
    fs.release_now(d).unwrap();
    assert!(fs.getattr(d).is_err());
    fs.unmount().unwrap();
    let r = okeanos::fsck(dev, None);
    assert!(r.is_clean() && r.orphans == 0 && r.directories == 2, "{r:#?}");
    // The crash while held: the next mount recovers and frees it.
    let fs2 = mount(&crashed, DataMode::Ordered);
    assert!(fs2.getattr(d).is_err() && fs2.getattr(kept).is_ok());
    fs2.unmount().unwrap();
    let r = okeanos::fsck(crashed, None);
    assert!(r.is_clean() && r.orphans == 0 && r.directories == 2, "{r:#?}");
    // Unmounted while still held (a daemon whose kernel had not forgotten it): fsck accepts
    // the orphan directory, and the next mount frees it.
    let dev = mem_fs(16 * MB, 256);
    let fs = mount(&dev, DataMode::Ordered);
    let d = fs.mkdir(root, b"d", 0o755).unwrap().ino;
    fs.open_ino(d).unwrap();
    fs.rmdir(root, b"d").unwrap();
    // A held empty directory replaced by a rename is kept the same way.
    let e = fs.mkdir(root, b"e", 0o755).unwrap().ino;
    let t = fs.mkdir(root, b"t", 0o755).unwrap().ino;
    fs.open_ino(t).unwrap();
    fs.rename(root, b"e", root, b"t").unwrap();
    assert_eq!((fs.getattr(t).unwrap().nlink, fs.lookup(root, b"t").unwrap().ino), (0, e));
    fs.unmount().unwrap();
    let r = okeanos::fsck(dev.clone(), None);
    assert!(r.is_clean() && r.orphans == 2 && r.directories == 4, "{r:#?}");
    let fs = mount(&dev, DataMode::Ordered);
    assert!(fs.getattr(d).is_err() && fs.getattr(t).is_err());
    fs.unmount().unwrap();
    let r = okeanos::fsck(dev, None);
    assert!(r.is_clean() && r.orphans == 0 && r.directories == 2, "{r:#?}");
}

/// Regression (found by the sqlite3 test through FUSE, where RELEASE can arrive after UNLINK):
/// an unlink racing with the last close of the same file evicts it exactly once, and the
/// operations that happen to run the deferred deletion do not fail.
#[test]
fn unlink_racing_with_the_last_close() {
    let dev = mem_fs(32 * MB, 1024);
    let fs = mount(&dev, DataMode::Wasteless);
    for k in 0..300 {
        let f = fs.create_file("/journal").unwrap();
        f.write_at(0, &record(1, k, 3000)).unwrap();
        let fs2 = fs.clone();
        let t = std::thread::spawn(move || fs2.remove_path("/journal").unwrap());
        drop(f);
        t.join().unwrap();
        fs.create_file(&format!("/other{}", k % 7)).unwrap();
    }
    fs.sync().unwrap();
    fs.unmount().unwrap();
    let r = okeanos::fsck(dev, None);
    assert!(r.is_clean() && r.orphans == 0, "{r:#?}");
}

/// Inodes belong to whoever creates them (the library's `*_as` calls, which the FUSE mount
/// uses with the request's uid and gid); in a setgid directory the group is the directory's
/// and new directories inherit the bit; and a name longer than 255 bytes is ENAMETOOLONG for
/// every call that looks it up, never "not found". Persisted across a remount.
#[test]
fn ownership_setgid_directories_and_long_names() {
    use okeanos::{MemDevice, MkfsOptions, MountOptions, Owner};
    let dev = std::sync::Arc::new(MemDevice::new(16 << 20));
    Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
    let fs = Okeanos::mount(dev.clone(), None, MountOptions::default()).unwrap();
    let root = fs.root();
    let user = Owner { uid: 1000, gid: 100 };
    let f = fs.create_as(root, b"mine", 0o644, user).unwrap();
    assert_eq!((f.uid, f.gid), (1000, 100));
    let d = fs.mkdir_as(root, b"shared", 0o2775, Owner { uid: 0, gid: 50 }).unwrap();
    assert_eq!(d.perm & 0o2000, 0o2000);
    let inner = fs.create_as(d.ino, b"f", 0o644, user).unwrap();
    assert_eq!((inner.uid, inner.gid), (1000, 50), "a setgid directory gives its group");
    let sub = fs.mkdir_as(d.ino, b"sub", 0o755, user).unwrap();
    assert_eq!((sub.gid, sub.perm & 0o2000), (50, 0o2000), "and its setgid bit to new directories");
    let l = fs.symlink_as(root, b"link", b"mine", user).unwrap();
    assert_eq!(l.uid, 1000);
    // The owner can then change what it made (here through the library: setattr).
    fs.setattr(f.ino, &SetAttr { mode: Some(0o600), ..Default::default() }).unwrap();
    let long = vec![b'n'; 256];
    assert!(matches!(fs.lookup(root, &long), Err(FsError::NameTooLong)));
    assert!(matches!(fs.unlink(root, &long), Err(FsError::NameTooLong)));
    assert!(matches!(fs.rmdir(root, &long), Err(FsError::NameTooLong)));
    assert!(matches!(fs.create(root, &long, 0o644), Err(FsError::NameTooLong)));
    assert!(matches!(fs.rename(root, &long, root, b"x"), Err(FsError::NameTooLong)));
    assert!(matches!(fs.link(f.ino, root, &long), Err(FsError::NameTooLong)));
    fs.unmount().unwrap();
    let fs = Okeanos::mount(dev, None, MountOptions::default()).unwrap();
    let a = fs.lookup(fs.root(), b"mine").unwrap();
    assert_eq!((a.uid, a.gid, a.perm & 0o777), (1000, 100, 0o600));
    let sh = fs.lookup(fs.root(), b"shared").unwrap();
    assert_eq!(fs.lookup(sh.ino, b"f").unwrap().gid, 50);
    fs.unmount().unwrap();
}

/// FIFOs, sockets and devices are inodes with no data (devices keep their number), listed
/// with their type, surviving a remount and fsck, and removable like files.
#[test]
fn special_files_are_inodes() {
    use okeanos::format::FileType;
    use okeanos::{MemDevice, MkfsOptions, MountOptions, Owner};
    let dev = std::sync::Arc::new(MemDevice::new(16 << 20));
    Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
    let fs = Okeanos::mount(dev.clone(), None, MountOptions::default()).unwrap();
    let root = fs.root();
    let user = Owner { uid: 7, gid: 8 };
    let kinds = [(b"fifo".as_slice(), FileType::Fifo, 0), (b"sock", FileType::Socket, 0), (b"null", FileType::CharDevice, (1 << 8) | 3), (b"loop0", FileType::BlockDevice, 7 << 8)];
    for (name, kind, rdev) in kinds {
        let a = fs.mknod_as(root, name, kind, 0o640, rdev, user).unwrap();
        assert_eq!((a.kind, a.rdev, a.size, a.uid), (kind, rdev, 0, 7));
    }
    assert!(fs.mknod_as(root, b"fifo", FileType::Fifo, 0o640, 0, user).is_err(), "exists");
    assert!(fs.mknod_as(root, b"r", FileType::Regular, 0o640, 0, user).is_err(), "mknod makes special files only");
    fs.unmount().unwrap();
    let fs = Okeanos::mount(dev.clone(), None, MountOptions::default()).unwrap();
    let listed = fs.readdir(fs.root()).unwrap();
    for (name, kind, rdev) in kinds {
        assert_eq!(listed.iter().find(|e| e.name == name).map(|e| e.kind), Some(kind));
        let a = fs.lookup(fs.root(), name).unwrap();
        assert_eq!((a.kind, a.rdev), (kind, rdev));
    }
    fs.unlink(fs.root(), b"sock").unwrap();
    fs.unmount().unwrap();
    let r = okeanos::fsck(dev, None);
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// Extended attributes under every content policy: set, replace, create-only and
/// replace-only, list, remove; journaled (a crash keeps what was synced), freed with their
/// inode; a block-full set is ENOSPC; fsck checks the attribute blocks.
#[test]
fn extended_attributes_under_every_policy() {
    use okeanos::fs::xattr::SetMode;
    use okeanos::{MemDevice, MkfsOptions, MountOptions};
    for policy in ["ordered", "data", "wasteless+dmeta", "selective+dmeta"] {
        let cfg = okeanos::journal::content::ContentConfig::parse(policy).unwrap();
        let o = || MountOptions::default().content_config(cfg);
        let dev = std::sync::Arc::new(MemDevice::new(16 << 20));
        Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
        let fs = Okeanos::mount(dev.clone(), None, o()).unwrap();
        let f = fs.create_file("/f").unwrap();
        let ino = f.ino();
        fs.setxattr(ino, b"user.a", b"1", SetMode::Any).unwrap();
        fs.setxattr(ino, b"user.a", b"one", SetMode::Replace).unwrap();
        assert!(matches!(fs.setxattr(ino, b"user.a", b"x", SetMode::Create), Err(FsError::Exists)), "{policy}");
        assert!(matches!(fs.setxattr(ino, b"user.b", b"x", SetMode::Replace), Err(FsError::NoAttribute)), "{policy}");
        fs.setxattr(ino, b"security.selinux", b"system_u:object_r:tmp_t:s0", SetMode::Create).unwrap();
        // An access ACL is checked (a truncated one is EINVAL, as Linux's) and sets the mode:
        // user::rw- user:1000:rw- group::r-- mask::rw- other::---, so 0660.
        assert!(matches!(fs.setxattr(ino, b"system.posix_acl_access", &[2, 0, 0, 0, 1, 0, 6, 0], SetMode::Any), Err(FsError::Invalid(_))), "{policy}");
        let acl: Vec<u8> = [2u32.to_le_bytes().to_vec()]
            .into_iter()
            .chain([(1u16, 6u16, u32::MAX), (2, 6, 1000), (4, 4, u32::MAX), (0x10, 6, u32::MAX), (0x20, 0, u32::MAX)].map(|(t, p, id)| [t.to_le_bytes().to_vec(), p.to_le_bytes().to_vec(), id.to_le_bytes().to_vec()].concat()))
            .collect::<Vec<_>>()
            .concat();
        fs.setxattr(ino, b"system.posix_acl_access", &acl, SetMode::Any).unwrap();
        assert_eq!(fs.getattr(ino).unwrap().perm & 0o777, 0o660, "{policy}: the mode follows the ACL");
        assert!(matches!(fs.setxattr(ino, b"bogus.x", b"1", SetMode::Any), Err(FsError::Invalid(_))), "{policy}");
        assert!(matches!(fs.getxattr(ino, b"user.none"), Err(FsError::NoAttribute)), "{policy}");
        assert!(matches!(fs.setxattr(ino, b"user.big", &vec![0u8; 5000], SetMode::Any), Err(FsError::NoSpace)), "{policy}: more than the block holds");
        // A directory and a file that will be deleted have attributes too.
        let d = fs.mkdir_path("/d").unwrap();
        fs.setxattr(d.ino, b"trusted.t", b"dir", SetMode::Any).unwrap();
        let g = fs.create_file("/g").unwrap();
        fs.setxattr(g.ino(), b"user.gone", b"soon", SetMode::Any).unwrap();
        f.fsync().unwrap();
        drop(g);
        fs.unlink(fs.root(), b"g").unwrap();
        fs.sync().unwrap();
        drop(f);
        drop(fs); // a crash
        let fs = Okeanos::mount(dev.clone(), None, o()).unwrap();
        let mut names = fs.listxattr(ino).unwrap();
        names.sort();
        assert_eq!(names, [b"security.selinux".to_vec(), b"system.posix_acl_access".to_vec(), b"user.a".to_vec()], "{policy}");
        assert_eq!(fs.getxattr(ino, b"user.a").unwrap(), b"one", "{policy}");
        assert_eq!(fs.getxattr(d.ino, b"trusted.t").unwrap(), b"dir", "{policy}");
        for n in [b"user.a".as_slice(), b"security.selinux", b"system.posix_acl_access"] {
            fs.removexattr(ino, n).unwrap();
        }
        assert!(fs.listxattr(ino).unwrap().is_empty(), "{policy}");
        assert!(matches!(fs.removexattr(ino, b"user.a"), Err(FsError::NoAttribute)), "{policy}");
        fs.unmount().unwrap();
        let r = okeanos::fsck(dev, None);
        assert!(r.is_clean(), "{policy}: {:?}", r.problems);
    }
}

/// fallocate mode 0: holes get zero-filled blocks, the size covers the range, data already
/// there stays; a directory is refused. Survives a crash once synced, and fsck agrees.
#[test]
fn fallocate_allocates_and_extends() {
    use okeanos::{MemDevice, MkfsOptions, MountOptions};
    for policy in ["ordered", "data", "wasteless+dmeta"] {
        let cfg = okeanos::journal::content::ContentConfig::parse(policy).unwrap();
        let dev = std::sync::Arc::new(MemDevice::new(16 << 20));
        Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
        let fs = Okeanos::mount(dev.clone(), None, MountOptions::default().content_config(cfg)).unwrap();
        let f = fs.create_file("/db").unwrap();
        f.write_at(0, b"header").unwrap();
        fs.truncate(f.ino(), 20_000).unwrap(); // a hole after the first block
        let free_before = fs.statfs().blocks_free;
        fs.fallocate(f.ino(), 4096, 60_000, false).unwrap();
        assert_eq!(fs.getattr(f.ino()).unwrap().size, 64_096, "{policy}");
        assert!(fs.statfs().blocks_free + 15 <= free_before, "{policy}: blocks were allocated");
        fs.fallocate(f.ino(), 0, 100, false).unwrap(); // inside the file: nothing changes
        let mut want = b"header".to_vec();
        want.resize(64_096, 0);
        assert_eq!(fs.read_path("/db").unwrap(), want, "{policy}");
        let d = fs.mkdir_path("/dir").unwrap();
        assert!(matches!(fs.fallocate(d.ino, 0, 10, false), Err(FsError::IsDir)), "{policy}");
        assert!(fs.fallocate(f.ino(), 0, 0, false).is_err(), "{policy}: length 0");
        // KEEP_SIZE: blocks past the end, the size unchanged; a later write into them and a
        // truncate back both behave.
        let blocks_before = fs.getattr(f.ino()).unwrap().blocks;
        fs.fallocate(f.ino(), 64_096, 40_000, true).unwrap();
        let a = fs.getattr(f.ino()).unwrap();
        assert_eq!(a.size, 64_096, "{policy}: KEEP_SIZE keeps the size");
        assert!(a.blocks >= blocks_before + 9 * 8, "{policy}: {} blocks of 512 B, {blocks_before} before", a.blocks);
        assert_eq!(fs.read(f.ino(), 64_096, 100).unwrap(), Vec::<u8>::new(), "{policy}: nothing readable past the size");
        f.fsync().unwrap();
        drop(f);
        drop(fs); // a crash
        let fs = Okeanos::mount(dev.clone(), None, MountOptions::default().content_config(cfg)).unwrap();
        assert_eq!(fs.read_path("/db").unwrap(), want, "{policy}");
        // Growing over the preallocated blocks shows zeros; a write lands in them; shrinking
        // frees them (fsck checks the bitmaps below).
        let ino = fs.lookup(fs.root(), b"db").unwrap().ino;
        fs.truncate(ino, 80_000).unwrap();
        assert!(fs.read(ino, 64_096, 15_904).unwrap().iter().all(|&b| b == 0), "{policy}");
        fs.write(ino, 90_000, b"tail").unwrap();
        assert_eq!(fs.read(ino, 90_000, 4).unwrap(), b"tail");
        fs.truncate(ino, 10).unwrap();
        fs.unmount().unwrap();
        let r = okeanos::fsck(dev, None);
        assert!(r.is_clean(), "{policy}: {:?}", r.problems);
    }
}

/// fallocate PUNCH_HOLE: whole blocks freed, partial edges zeroed, the size unchanged, a hole
/// inside one block, past the end and over holes; ZERO_RANGE with and without KEEP_SIZE. Every
/// policy; the result survives a crash once synced, and fsck agrees (bitmaps, EOFBLOCKS).
#[test]
fn punch_hole_and_zero_range() {
    use okeanos::{MemDevice, MkfsOptions, MountOptions};
    for policy in ["writeback", "ordered", "data", "wasteless", "wasteless+dmeta", "selective", "selective+dmeta"] {
        let cfg = okeanos::journal::content::ContentConfig::parse(policy).unwrap();
        let dev = Arc::new(MemDevice::new(16 << 20));
        Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
        let fs = Okeanos::mount(dev.clone(), None, MountOptions::default().content_config(cfg)).unwrap();
        let f = fs.create_file("/vm.img").unwrap();
        let mut want = record(1, 1, 40 * 4096);
        f.write_at(0, &want).unwrap();
        f.fsync().unwrap();
        let blocks = |fs: &Okeanos| fs.getattr(f.ino()).unwrap().blocks;
        let b0 = blocks(&fs);
        let free0 = fs.statfs().blocks_free;
        // Blocks 2..=9 whole, and parts of blocks 1 and 10.
        fs.punch_hole(f.ino(), 4096 + 1000, 9 * 4096).unwrap();
        want[4096 + 1000..10 * 4096 + 1000].fill(0);
        assert_eq!(fs.read_path("/vm.img").unwrap(), want, "{policy}");
        assert_eq!(blocks(&fs), b0 - 8 * 8, "{policy}: eight whole blocks freed");
        f.fsync().unwrap(); // frees become allocatable once committed
        assert_eq!(fs.statfs().blocks_free, free0 + 8, "{policy}");
        // Inside one block; over what is already a hole; past the end (nothing to free).
        fs.punch_hole(f.ino(), 20 * 4096 + 10, 20).unwrap();
        want[20 * 4096 + 10..20 * 4096 + 30].fill(0);
        fs.punch_hole(f.ino(), 3 * 4096, 4096).unwrap();
        fs.punch_hole(f.ino(), 40 * 4096, 1 << 20).unwrap();
        assert_eq!(fs.getattr(f.ino()).unwrap().size, 40 * 4096, "{policy}: the size never changes");
        assert_eq!(fs.read_path("/vm.img").unwrap(), want, "{policy}");
        // Many small holes: extents cut in two, the extent chain grows past the inode.
        for k in 0..20u64 {
            fs.punch_hole(f.ino(), (21 + k) * 4096 - 2048 * (k % 2), 2048).unwrap();
            let at = ((21 + k) * 4096 - 2048 * (k % 2)) as usize;
            want[at..at + 2048].fill(0);
        }
        // ZERO_RANGE: inside (blocks stay allocated, holes filled), then past the end.
        fs.zero_range(f.ino(), 4096, 3 * 4096, false).unwrap();
        want[4096..4 * 4096].fill(0);
        assert!(blocks(&fs) >= b0 - 8 * 8 + 2 * 8, "{policy}: the zeroed range is allocated");
        fs.zero_range(f.ino(), 40 * 4096 - 10, 5000, true).unwrap();
        want[40 * 4096 - 10..].fill(0);
        assert_eq!(fs.getattr(f.ino()).unwrap().size, 40 * 4096, "{policy}: KEEP_SIZE");
        fs.zero_range(f.ino(), 40 * 4096, 100, false).unwrap();
        want.resize(40 * 4096 + 100, 0);
        assert_eq!(fs.read_path("/vm.img").unwrap(), want, "{policy}");
        let d = fs.mkdir_path("/dir").unwrap();
        assert!(matches!(fs.punch_hole(d.ino, 0, 10), Err(FsError::IsDir)), "{policy}");
        assert!(matches!(fs.zero_range(d.ino, 0, 10, false), Err(FsError::IsDir)), "{policy}");
        assert!(fs.punch_hole(f.ino(), 0, 0).is_err() && fs.punch_hole(f.ino(), u64::MAX, 2).is_err(), "{policy}");
        f.fsync().unwrap();
        drop(f);
        drop(fs); // a crash
        let fs = Okeanos::mount(dev.clone(), None, MountOptions::default().content_config(cfg)).unwrap();
        assert_eq!(fs.read_path("/vm.img").unwrap(), want, "{policy}: after recovery");
        fs.unmount().unwrap();
        let r = okeanos::fsck(dev, None);
        assert!(r.is_clean(), "{policy}: {:?}", r.problems);
    }
}

/// A write that fills a hole joining two extents can shrink the extent chain by a block: the
/// handle's revoke credits must count it (it panicked a FUSE request thread: "handle revoked 2
/// blocks with 1 credits"). Blocks written one apart make one extent each, past the inode's
/// room, so the chain holds them; filling the holes merges them back.
#[test]
fn filling_holes_that_shrink_the_extent_chain_stays_within_credits() {
    for mode in DataMode::ALL {
        let dev = mem_fs(64 * MB, 8192);
        let fs = mount(&dev, mode);
        let f = fs.create_file("/f").unwrap();
        // Contiguous physical blocks, every other one then punched out: many one-block extents
        // whose neighbours' device blocks are adjacent, so filling a hole can merge them. Written
        // in small pieces, so that selective journals them: the holes' blocks, reallocated and
        // written whole, then need revokes of their logged copies too.
        for k in 0..1600u64 {
            f.write_at(k * 2048, &record(2, k as usize, 2048)).unwrap();
        }
        f.fsync().unwrap();
        for k in (1..800u64).step_by(2) {
            fs.punch_hole(f.ino(), k * 4096, 4096).unwrap();
        }
        f.fsync().unwrap();
        for k in (1..800u32).step_by(2).rev().map(u64::from) {
            fs.fallocate(f.ino(), k * 4096, 4096, false).unwrap_or_else(|e| panic!("{mode:?}: fallocate at block {k}: {e}"));
        }
        assert!(fs.read_only_reason().is_none(), "{mode:?}: {:?}", fs.read_only_reason());
        f.fsync().unwrap();
        drop(f);
        fs.unmount().unwrap();
        assert_fsck_clean(dev, None);
    }
}

/// RENAME_EXCHANGE: two names swap their inodes in one handle, a file with a directory across
/// two parents too (the directory's parent and both link counts follow); a directory cannot
/// be swapped under itself. fsck agrees after a crash.
#[test]
fn rename_exchange_swaps_atomically() {
    use okeanos::{MemDevice, MkfsOptions, MountOptions};
    let dev = std::sync::Arc::new(MemDevice::new(16 << 20));
    Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { journal_blocks: 512, ..Default::default() }).unwrap();
    let fs = Okeanos::mount(dev.clone(), None, MountOptions::default()).unwrap();
    let root = fs.root();
    let a = fs.mkdir_path("/a").unwrap();
    let b = fs.mkdir_path("/b").unwrap();
    let sub = fs.mkdir_path("/a/sub").unwrap();
    fs.create_file("/b/file").unwrap().append(b"file").unwrap();
    fs.rename_exchange(a.ino, b"sub", b.ino, b"file").unwrap();
    assert_eq!(fs.read_path("/a/sub").unwrap(), b"file");
    assert_eq!(fs.lookup(b.ino, b"file").unwrap().ino, sub.ino);
    assert_eq!(fs.getattr(sub.ino).unwrap().parent, b.ino, "the directory's parent follows");
    assert_eq!((fs.getattr(a.ino).unwrap().nlink, fs.getattr(b.ino).unwrap().nlink), (2, 3), "link counts follow");
    assert!(matches!(fs.rename_exchange(root, b"b", b.ino, b"file"), Err(FsError::Invalid(_))), "not under itself");
    assert!(matches!(fs.rename_exchange(root, b"a", root, b"none"), Err(FsError::NotFound)));
    fs.sync().unwrap();
    drop(fs); // a crash
    let fs = Okeanos::mount(dev.clone(), None, MountOptions::default()).unwrap();
    assert_eq!(fs.read_path("/a/sub").unwrap(), b"file");
    fs.unmount().unwrap();
    let r = okeanos::fsck(dev, None);
    assert!(r.is_clean(), "{:?}", r.problems);
}

/// Random writes into a sparse file insert extents in the middle of the extent chain, which
/// shifts every chain block after the insertion point; the handle must have credits for them
/// (it asserted "handle logged 11 blocks with 9 credits" before, found by `sim iozone`).
#[test]
fn random_writes_into_a_sparse_file_fit_their_handles() {
    let dev = mem_fs(64 * MB, 1024);
    let fs = mount(&dev, DataMode::Data);
    let f = fs.create_file("/sparse").unwrap();
    let n = 3000u64;
    let mut order: Vec<u64> = (0..n).collect();
    let mut x = 0x9e37_79b9u64;
    for i in (1..order.len()).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        order.swap(i, (x % (i as u64 + 1)) as usize);
    }
    for (k, &b) in order.iter().enumerate() {
        f.write_at(b * 4096, &record(3, b as usize, 4096)).unwrap();
        if k % 500 == 0 {
            f.fsync().unwrap();
        }
    }
    f.fsync().unwrap();
    drop(f);
    let got = fs.read_path("/sparse").unwrap();
    for b in 0..n {
        assert_eq!(&got[(b * 4096) as usize..((b + 1) * 4096) as usize], &record(3, b as usize, 4096)[..], "block {b}");
    }
    fs.unmount().unwrap();
    assert_fsck_clean(dev, None);
}

/// Without `dirty_background_bytes=`, in-place data is still written early once the running
/// transaction holds half of what forces a commit (four times `max_tx_blocks`): the forced
/// commit then finds it written, and its writers wait for a flush, not for all of it (pgbench
/// under ordered waited 89-94 ms per forced commit before; docs/BENCHMARKS.md). The option,
/// when given, is the threshold instead.
#[test]
fn in_place_data_is_written_early_before_it_forces_a_commit() {
    const BLOCKS: usize = 700; // past 512 (a 1024-block journal: 256 a transaction, times 2)
    let run = |extra: &str| {
        let dev = mem_fs(64 * MB, 1024);
        let o = okeanos::MountOptions::parse(&format!("data=ordered,commit=3600{extra}")).unwrap();
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, o).unwrap();
        let f = fs.create_file("/big").unwrap();
        fs.sync().unwrap();
        let before = fs.counters();
        let mut expect = Vec::new();
        for k in 0..BLOCKS / 16 + 1 {
            let chunk = record(2, k, 16 * 4096);
            f.append(&chunk).unwrap();
            expect.extend_from_slice(&chunk);
        }
        // The lanes write early beside the writer; give them a bounded while to catch up (a
        // fifth of a second where none are expected).
        let wait = if extra.is_empty() { 20_000 } else { 200 };
        let deadline = std::time::Instant::now() + std::time::Duration::from_millis(wait);
        while fs.counters().since(&before).early_writes < 200 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let c = fs.counters().since(&before);
        f.fsync().unwrap();
        drop(f);
        assert_eq!(fs.read_path("/big").unwrap(), expect);
        fs.unmount().unwrap();
        assert_fsck_clean(dev as Arc<dyn Device>, None);
        c
    };
    let c = run("");
    assert_eq!(c.commits, 0, "no commit before the fsync: the bound (1024 blocks) was not reached");
    assert!(c.early_writes >= 200, "{} blocks written early of {BLOCKS} past a threshold of 512", c.early_writes);
    let c = run(",dirty_background_bytes=1073741824");
    assert_eq!(c.early_writes, 0, "the option is the threshold: 1 GiB is never reached");
}

/// A placement's defaults reach the mount unless an option is given: manylogs writes in-place
/// data in the background past 1 MiB (and logs write calls up to 32 KiB), a ring does neither,
/// nvm keeps committed blocks 300 s before age sends them home; `dirty_background_bytes=` wins
/// over the placement.
#[test]
fn the_placements_defaults_apply_unless_the_mount_says_otherwise() {
    use okeanos::{MemDevice, MkfsOptions, MountOptions};
    let background = |fs: &Okeanos| fs.debug_state(|j, _| (j.cfg().dirty_background_blocks, j.placement().defaults()));
    let manylogs = || {
        let dev = Arc::new(MemDevice::new(64 * MB));
        Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { manylogs: true, blocks_per_group: Some(2048), log_area_blocks: 256, ..Default::default() }).unwrap();
        dev
    };
    let fs = Okeanos::mount(manylogs() as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    let (blocks, d) = background(&fs);
    assert_eq!((blocks, d.logged_write_size, d.dirty_background_bytes), (256, Some(32 << 10), 1 << 20), "manylogs: 1 MiB of 4 KiB blocks");
    fs.unmount().unwrap();
    let fs = Okeanos::mount(manylogs() as Arc<dyn Device>, None, MountOptions::parse("dirty_background_bytes=0").unwrap()).unwrap();
    assert_eq!(background(&fs).0, 0, "the option wins");
    fs.unmount().unwrap();
    let fs = Okeanos::mount(mem_fs(16 * MB, 1024) as Arc<dyn Device>, None, MountOptions::default()).unwrap();
    let (blocks, d) = background(&fs);
    assert_eq!((blocks, d.logged_write_size, d.expire.as_secs()), (0, None, 30), "a ring changes nothing");
    fs.unmount().unwrap();
    // nvm: frozen blocks serve as cache for 300 s (UBJ's checkpoint period).
    let dev = Arc::new(MemDevice::new(16 * MB));
    let nvm = Arc::new(okeanos::nvm::MemNvm::new(17 << 20));
    Okeanos::mkfs_nvm(dev.as_ref(), nvm.as_ref(), &MkfsOptions { journal_blocks: 256, nvm_path: Some("nvm".into()), ..Default::default() }).unwrap();
    let mut o = MountOptions::default();
    o.nvm = Some(okeanos::nvm::NvmHandle(nvm));
    let fs = Okeanos::mount(dev as Arc<dyn Device>, None, o).unwrap();
    assert_eq!(background(&fs).1.expire.as_secs(), 300);
    fs.unmount().unwrap();
}

/// Recovery moves the placement on to what it wrote (`Placement::recovered`): the placement
/// a mount runs with after recovery is the one a fresh open of the recovered image finds, so
/// a mount builds its placement once. On a ring and on manylogs, whose recovery may keep
/// blocks in their logs.
#[test]
fn recovery_leaves_the_placement_as_a_fresh_open_of_what_it_wrote() {
    use okeanos::runtime::{self, open, placement, Devices};
    use okeanos::{MemDevice, MkfsOptions, MountOptions};
    let clock = okeanos::clock::SystemClock::default();
    let crashed = |dev: Arc<MemDevice>, mode: DataMode| {
        let fs = Okeanos::mount(dev.clone() as Arc<dyn Device>, None, opts(mode)).unwrap();
        exercise(&fs);
        let image = Arc::new(MemDevice::from_bytes(dev.snapshot()));
        drop(fs);
        image
    };
    let check = |image: Arc<MemDevice>, what: &str| {
        let dev: Arc<dyn Device> = image.clone();
        let (sb, _) = open::read_meta(dev.as_ref()).unwrap();
        let mut devs = Devices::new(dev, None, sb.block_size as usize);
        let (region, jsb) = open::open_journal(&sb, &devs).unwrap();
        let o = MountOptions::default();
        let mut opened = placement::open(&mut devs, &sb, region, &jsb, &o, &clock, false).unwrap();
        assert!(!opened.placement().recovery().is_empty(), "{what}: the crash left something to recover");
        let stats = okeanos::stats::Stats::new(sb.block_size as usize);
        runtime::recover(&devs, opened.placement(), okeanos::journal::recovery::FsBounds::of(&sb), &stats, &|| 0, 0, &Default::default()).unwrap().expect("a recovery");
        let moved_on = format!("{:?}", opened.placement());
        let (_, jsb) = open::open_journal(&sb, &devs).unwrap();
        let mut fresh = placement::open(&mut devs, &sb, region, &jsb, &o, &clock, false).unwrap();
        assert!(fresh.placement().recovery().is_empty(), "{what}: once recovered, nothing is left to recover");
        assert_eq!(moved_on, format!("{:?}", fresh.placement()), "{what}: moved on, and opened afresh");
        // And the mount that runs from it finds what was synced.
        let fs = Okeanos::mount(image as Arc<dyn Device>, None, MountOptions::default()).unwrap();
        verify(&fs);
        fs.unmount().unwrap();
    };
    check(crashed(mem_fs(32 * MB, 1024), DataMode::Wasteless), "internal ring");
    for mode in [DataMode::Data, DataMode::Ordered] {
        let dev = Arc::new(MemDevice::new(64 * MB));
        Okeanos::mkfs(dev.as_ref(), None, &MkfsOptions { manylogs: true, blocks_per_group: Some(2048), log_area_blocks: 256, ..Default::default() }).unwrap();
        check(crashed(dev, mode), &format!("manylogs, {mode:?}"));
    }
}
