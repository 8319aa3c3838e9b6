//! POSIX semantics through the mount: namespace and attributes, ownership and names, special
//! files, atomic writes across pages, extended attributes, fallocate, setuid and ACLs.

use super::*;

#[test]
fn posix_operations_through_the_mount() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless+dmeta");
    // The kernel knows the mount as fuse.okeanos (findmnt -t, systemd), as libfuse's mounts.
    let canon = std::fs::canonicalize(&mnt).unwrap();
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let line = info.lines().find(|l| l.split(' ').nth(4) == canon.to_str()).unwrap();
    assert_eq!(line.split(" - ").nth(1).and_then(|r| r.split(' ').next()), Some("fuse.okeanos"), "{line}");
    std::fs::create_dir(mnt.join("logs")).unwrap();
    std::fs::write(mnt.join("logs/a"), b"first").unwrap();
    assert_eq!(std::fs::read(mnt.join("logs/a")).unwrap(), b"first");
    std::fs::rename(mnt.join("logs/a"), mnt.join("b")).unwrap();
    std::os::unix::fs::symlink("b", mnt.join("c")).unwrap();
    assert_eq!(std::fs::read(mnt.join("c")).unwrap(), b"first");
    std::fs::hard_link(mnt.join("b"), mnt.join("d")).unwrap();
    assert_eq!(std::fs::metadata(mnt.join("b")).unwrap().len(), 5);
    // Errors map to their errno.
    assert_eq!(std::fs::create_dir(mnt.join("logs")).unwrap_err().raw_os_error(), Some(libc::EEXIST));
    std::fs::write(mnt.join("logs/x"), b"").unwrap();
    assert_eq!(std::fs::remove_dir(mnt.join("logs")).unwrap_err().raw_os_error(), Some(libc::ENOTEMPTY));
    assert_eq!(std::fs::read(mnt.join("nope")).unwrap_err().raw_os_error(), Some(libc::ENOENT));
    // A FIFO is made (special files are inodes); RENAME_EXCHANGE swaps a file and a directory;
    // an unsupported call (RENAME_WHITEOUT) is refused, not a crash of the daemon.
    let fifo = std::ffi::CString::new(mnt.join("fifo").to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&std::fs::metadata(mnt.join("fifo")).unwrap().file_type()));
    let (b, d) = (std::ffi::CString::new(mnt.join("b").to_str().unwrap()).unwrap(), std::ffi::CString::new(mnt.join("logs").to_str().unwrap()).unwrap());
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, b.as_ptr(), libc::AT_FDCWD, d.as_ptr(), libc::RENAME_EXCHANGE) }, 0);
    assert!(std::fs::metadata(mnt.join("b")).unwrap().is_dir() && std::fs::read(mnt.join("logs")).unwrap() == b"first");
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, b.as_ptr(), libc::AT_FDCWD, d.as_ptr(), libc::RENAME_EXCHANGE) }, 0);
    assert_ne!(unsafe { libc::renameat2(libc::AT_FDCWD, b.as_ptr(), libc::AT_FDCWD, d.as_ptr(), libc::RENAME_WHITEOUT) }, 0);
    // RENAME_NOREPLACE: EEXIST over an existing name, an ordinary rename otherwise.
    let (c, e) = (std::ffi::CString::new(mnt.join("c").to_str().unwrap()).unwrap(), std::ffi::CString::new(mnt.join("e").to_str().unwrap()).unwrap());
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, c.as_ptr(), libc::AT_FDCWD, b.as_ptr(), libc::RENAME_NOREPLACE) }, -1);
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::EEXIST));
    assert_eq!(unsafe { libc::renameat2(libc::AT_FDCWD, c.as_ptr(), libc::AT_FDCWD, e.as_ptr(), libc::RENAME_NOREPLACE) }, 0);
    std::fs::rename(mnt.join("e"), mnt.join("c")).unwrap();
    // An open file keeps its data after unlink, until the last close.
    let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(mnt.join("tmp")).unwrap();
    f.write_all(&[7u8; 10_000]).unwrap();
    std::fs::remove_file(mnt.join("tmp")).unwrap();
    let mut back = Vec::new();
    use std::io::Seek;
    f.seek(std::io::SeekFrom::Start(0)).unwrap();
    f.read_to_end(&mut back).unwrap();
    assert_eq!(back, vec![7u8; 10_000]);
    drop(f);
    // O_DSYNC writes reach the engine as syncs.
    let before = m.stats()["syncs"].as_u64().unwrap();
    let mut s = std::fs::OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_DSYNC).open(mnt.join("sync")).unwrap();
    for _ in 0..5 {
        s.write_all(b"0123456789").unwrap();
    }
    assert!(m.stats()["syncs"].as_u64().unwrap() >= before + 5);
    drop(s);
    let names: Vec<String> = std::fs::read_dir(&mnt).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    assert!(names.contains(&"b".to_string()) && !names.iter().any(|n| n.starts_with(".okeanos")));
    m.unmount();
    fsck_clean(&img);
}

/// A non-root user on the mount (allow_other) owns what it creates and can then chmod,
/// truncate, utime and symlink it, as on ext4 (PostgreSQL's initdb needs exactly this); a
/// name longer than 255 bytes is "File name too long", not "No such file".
#[test]
fn a_user_owns_what_it_creates_and_long_names_are_too_long() {
    if !fuse_usable() || !is_root() || !have("setpriv") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta,allow_other");
    // The temporary directory must be traversable by the user.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let public = mnt.join("pub");
    std::fs::create_dir(&public).unwrap();
    std::fs::set_permissions(&public, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let script = "set -e; cd \"$1\"; touch f; chmod 600 f; truncate -s 10 f; touch -d 2020-01-01 f; mkdir d; chmod 700 d; ln -s f l; echo data > d/g";
    let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script, "sh"]).arg(&public).output().unwrap();
    assert!(o.status.success(), "as uid 65534: {}", String::from_utf8_lossy(&o.stderr));
    use std::os::unix::fs::MetadataExt;
    for (name, size) in [("f", Some(10)), ("d", None), ("d/g", Some(5))] {
        let md = std::fs::metadata(public.join(name)).unwrap();
        assert_eq!((md.uid(), md.gid()), (65534, 65534), "{name}");
        if let Some(s) = size {
            assert_eq!(md.len(), s, "{name}");
        }
    }
    assert_eq!(std::fs::symlink_metadata(public.join("l")).unwrap().uid(), 65534);
    let long = public.join("n".repeat(300));
    for e in [std::fs::metadata(&long).unwrap_err(), std::fs::remove_file(&long).unwrap_err(), std::fs::File::create(&long).unwrap_err()] {
        assert_eq!(e.raw_os_error(), Some(libc::ENAMETOOLONG), "{e}");
    }
    m.unmount();
}

/// mkfifo, mknod (character and block devices with their numbers) and a UNIX socket's bind on
/// the mount make inodes of those types, as on ext4; a FIFO passes data between two
/// processes (the kernel runs the pipe); all survive a remount.
#[test]
fn fifos_devices_and_sockets_on_the_mount() {
    if !fuse_usable() || !is_root() || !have("mkfifo") || !have("mknod") || !have("python3") {
        return;
    }
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    assert!(Command::new("mkfifo").arg(mnt.join("fifo")).status().unwrap().success());
    assert!(Command::new("mknod").arg(mnt.join("null")).args(["c", "1", "3"]).status().unwrap().success());
    assert!(Command::new("mknod").arg(mnt.join("blk")).args(["b", "7", "200"]).status().unwrap().success());
    let sock = mnt.join("sock");
    assert!(Command::new("python3").args(["-c", "import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])"]).arg(&sock).status().unwrap().success());
    // A FIFO carries data from a writer to a reader.
    let fifo = mnt.join("fifo");
    let writer = std::thread::spawn({
        let fifo = fifo.clone();
        move || std::fs::write(fifo, b"through the pipe").unwrap()
    });
    assert_eq!(std::fs::read(&fifo).unwrap(), b"through the pipe");
    writer.join().unwrap();
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=ordered");
    assert!(std::fs::metadata(mnt.join("fifo")).unwrap().file_type().is_fifo());
    let null = std::fs::metadata(mnt.join("null")).unwrap();
    assert!(null.file_type().is_char_device());
    assert_eq!((libc::major(null.rdev()), libc::minor(null.rdev())), (1, 3));
    let blk = std::fs::metadata(mnt.join("blk")).unwrap();
    assert!(blk.file_type().is_block_device());
    assert_eq!((libc::major(blk.rdev()), libc::minor(blk.rdev())), (7, 200));
    assert!(std::fs::metadata(&sock).unwrap().file_type().is_socket());
    std::fs::remove_file(&sock).unwrap();
    m.unmount();
    let o = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
}

/// One write() that crosses pages reaches the engine as one request, so one atomic handle
/// (direct I/O, the default); with `page_cache` the kernel splits it at the page it does not
/// hold up to date — the behaviour that let a crash keep half of a write.
#[test]
fn a_write_crossing_pages_is_one_atomic_handle() {
    if !fuse_usable() {
        return;
    }
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let img = image(dir.path());
    let mnt = dir.path().join("mnt");
    for (opts, one) in [("data=data", true), ("data=data,page_cache", false)] {
        let m = Mount::new(&img, &mnt, opts);
        let path = mnt.join(format!("f-{one}"));
        let f = std::fs::OpenOptions::new().read(true).write(true).create(true).open(&path).unwrap();
        f.write_all_at(&[1u8; 100], 0).unwrap();
        f.sync_data().unwrap();
        // A fresh open: the kernel holds none of the file's pages.
        drop(f);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let before = m.stats()["handles"].as_u64().unwrap();
        f.write_all_at(&[2u8; 10_000], 100).unwrap();
        let after = m.stats()["handles"].as_u64().unwrap();
        if one {
            assert_eq!(after - before, 1, "{opts}: one write(), one handle");
        } else {
            assert!(after - before >= 2, "{opts}: the page cache split the write into {} handles", after - before);
        }
        f.sync_data().unwrap();
        drop(f);
        let mut want = vec![1u8; 100];
        want.extend(std::iter::repeat_n(2u8, 10_000));
        assert_eq!(std::fs::read(&path).unwrap(), want, "{opts}");
        m.unmount();
    }
}

/// Extended attributes through the mount as programs use them: set, get, list, remove (with
/// XATTR_CREATE/REPLACE and ENODATA), kept across a remount, and copied by `cp -a`.
#[test]
fn extended_attributes_on_the_mount() {
    if !fuse_usable() || !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    std::fs::write(mnt.join("f"), b"data").unwrap();
    let script = r#"
import os, sys, errno
f = sys.argv[1]
os.setxattr(f, "user.color", b"blue")
os.setxattr(f, "user.color", b"green", os.XATTR_REPLACE)
try:
    os.setxattr(f, "user.color", b"red", os.XATTR_CREATE); sys.exit("CREATE over an existing attribute")
except OSError as e:
    assert e.errno == errno.EEXIST, e
try:
    os.getxattr(f, "user.none"); sys.exit("a missing attribute was found")
except OSError as e:
    assert e.errno == errno.ENODATA, e
os.setxattr(f, "user.tmp", b"x")
os.removexattr(f, "user.tmp")
if os.geteuid() == 0:
    os.setxattr(f, "trusted.t", b"root only")
assert os.getxattr(f, "user.color") == b"green"
print(",".join(sorted(os.listxattr(f))))
"#;
    let o = Command::new("python3").args(["-c", script]).arg(mnt.join("f")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let names = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(names.contains("user.color") && !names.contains("user.tmp"), "{names}");
    if have("cp") {
        assert!(Command::new("cp").args(["-a"]).arg(mnt.join("f")).arg(mnt.join("copy")).status().unwrap().success());
    }
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta");
    let get = |p: &str| Command::new("python3").args(["-c", "import os,sys; print(os.getxattr(sys.argv[1], 'user.color').decode())"]).arg(mnt.join(p)).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&get("f").stdout).trim(), "green");
    assert_eq!(String::from_utf8_lossy(&get("copy").stdout).trim(), "green", "cp -a kept the attribute");
    m.unmount();
    fsck_clean(&img);
}

/// posix_fallocate on the mount allocates and extends (a database preallocating its log);
/// KEEP_SIZE allocates past the end without growing the file; PUNCH_HOLE frees whole blocks
/// and zeroes partial ones without changing the size; ZERO_RANGE zeroes (and extends without
/// KEEP_SIZE); COLLAPSE_RANGE is refused with EOPNOTSUPP; `fallocate -d` digs holes.
#[test]
fn posix_fallocate_on_the_mount() {
    if !fuse_usable() || !have("python3") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    let script = r#"
import os, sys, errno
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.write(fd, b"head")
os.posix_fallocate(fd, 0, 1 << 20)
assert os.fstat(fd).st_size == 1 << 20, os.fstat(fd).st_size
assert os.pread(fd, 8, 0) == b"head\0\0\0\0"
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    blocks = os.fstat(fd).st_blocks
    r = libc.fallocate(fd, 1, ctypes.c_long(1 << 20), ctypes.c_long(1 << 20))  # FALLOC_FL_KEEP_SIZE
    assert r == 0, ctypes.get_errno()
    st = os.fstat(fd)
    assert st.st_size == 1 << 20 and st.st_blocks >= blocks + 2048, (st.st_size, st.st_blocks, blocks)
    os.pwrite(fd, b"a" * 5 * 4096, 8192)
    blocks = os.fstat(fd).st_blocks
    r = libc.fallocate(fd, 2 | 1, ctypes.c_long(8192 + 100), ctypes.c_long(3 * 4096))  # PUNCH_HOLE | KEEP_SIZE
    assert r == 0, ctypes.get_errno()
    st = os.fstat(fd)
    assert st.st_size == 1 << 20 and st.st_blocks == blocks - 2 * 8, (st.st_size, st.st_blocks, blocks)
    want = b"a" * 100 + b"\0" * 3 * 4096 + b"a" * (2 * 4096 - 100)
    assert os.pread(fd, 5 * 4096, 8192) == want
    r = libc.fallocate(fd, 2, ctypes.c_long(0), ctypes.c_long(4096))  # PUNCH_HOLE alone: Linux refuses it
    assert r != 0 and ctypes.get_errno() == errno.EOPNOTSUPP, (r, ctypes.get_errno())
    r = libc.fallocate(fd, 0x10, ctypes.c_long((1 << 20) - 10), ctypes.c_long(4106))  # ZERO_RANGE, past the end
    assert r == 0, ctypes.get_errno()
    assert os.fstat(fd).st_size == (1 << 20) + 4096
    assert os.pread(fd, 4 * 4096, 8192 + 4 * 4096)[:100] == b"a" * 100
    r = libc.fallocate(fd, 0x10 | 1, ctypes.c_long(8192), ctypes.c_long(4 * 4096 + 50))  # ZERO_RANGE | KEEP_SIZE
    assert r == 0, ctypes.get_errno()
    assert os.pread(fd, 5 * 4096, 8192) == b"\0" * (4 * 4096 + 50) + b"a" * (4096 - 50)
    r = libc.fallocate(fd, 8, ctypes.c_long(0), ctypes.c_long(4096))  # COLLAPSE_RANGE
    assert r != 0 and ctypes.get_errno() == errno.EOPNOTSUPP, (r, ctypes.get_errno())
finally:
    os.close(fd)
"#;
    let o = Command::new("python3").args(["-c", script]).arg(mnt.join("wal")).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    if have("fallocate") {
        // `fallocate -d` finds the zero blocks and punches them out.
        use std::os::unix::fs::MetadataExt;
        let sparse = mnt.join("sparse");
        let mut content = vec![0u8; 64 * 4096];
        content[..4096].fill(1);
        content[40 * 4096..41 * 4096].fill(2);
        std::fs::write(&sparse, &content).unwrap();
        assert_eq!(std::fs::metadata(&sparse).unwrap().blocks(), 64 * 8);
        let o = Command::new("fallocate").arg("-d").arg(&sparse).output().unwrap();
        assert!(o.status.success(), "fallocate -d: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(std::fs::metadata(&sparse).unwrap().blocks(), 2 * 8, "only the two non-zero blocks stay");
        assert_eq!(std::fs::read(&sparse).unwrap(), content);
    }
    m.unmount();
    fsck_clean(&img);
}

/// A write by anyone but root clears setuid (and setgid with group execute), as the kernel
/// does for its own file systems; chown clears them too; root's writes keep them. Without
/// this a user could change a world-writable setuid-root file and keep it setuid.
#[test]
fn writes_by_users_clear_setuid_and_setgid() {
    if !fuse_usable() || !is_root() || !have("setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered,allow_other");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let f = mnt.join("tool");
    std::fs::write(&f, b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o6777)).unwrap();
    std::fs::OpenOptions::new().append(true).open(&f).unwrap().write_all(b"# root\n").unwrap();
    assert_eq!(mode(&f), 0o6777, "root's write keeps the bits");
    let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "echo evil >> \"$1\"", "sh"]).arg(&f).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(mode(&f), 0o0777, "a user's write cleared setuid and setgid");
    // setgid without group execute stays (it marks mandatory locking, not privilege).
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o2666)).unwrap();
    let o = Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "echo x >> \"$1\"", "sh"]).arg(&f).output().unwrap();
    assert!(o.status.success());
    assert_eq!(mode(&f), 0o2666);
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o4755)).unwrap();
    std::os::unix::fs::chown(&f, Some(65534), None).unwrap();
    assert_eq!(mode(&f) & 0o6000, 0, "chown cleared setuid");
    m.unmount();
}

/// POSIX ACLs on the mount, enforced by the kernel and kept by the engine: a default ACL
/// passes to new files (limited by the mode asked for, without the umask) and directories; a
/// named user's entry grants what the mode alone would not; chmod rewrites the mask; all of it
/// survives a remount.
#[test]
fn posix_acls_on_the_mount() {
    if !fuse_usable() || !is_root() || !have("setfacl") || !have("getfacl") || !have("setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta,allow_other");
    let d = mnt.join("d");
    std::fs::create_dir(&d).unwrap();
    std::fs::set_permissions(&d, PermissionsExt::from_mode(0o755)).unwrap();
    let run = |args: &[&str]| {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let ds = d.to_str().unwrap();
    run(&["setfacl", "-m", "u:65534:rwx", "-d", "-m", "u:65534:rwx", ds]);
    run(&["setfacl", "-m", "u:65534:rwx", ds]);
    // Root, umask 077, makes a file: the default ACL applies, not the umask.
    run(&["sh", "-c", &format!("umask 077 && echo root > {ds}/f && mkdir {ds}/sub")]);
    let facl = run(&["getfacl", "-cpn", &format!("{ds}/f")]);
    assert!(facl.contains("user:65534:rwx") && facl.contains("mask::rw-"), "{facl}");
    assert!(run(&["getfacl", "-cpdn", &format!("{ds}/sub")]).contains("user:65534:rwx"), "a new directory inherits the default ACL");
    // The named user may write the file although the mode (0660) would not let it.
    let as_user = |cmd: &str| Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd]).output().unwrap();
    assert!(as_user(&format!("echo user >> {ds}/f && echo new > {ds}/g")).status.success(), "the ACL grants the user write access");
    // chmod 600: the mask becomes ---, and the user's entry no longer grants anything.
    std::fs::set_permissions(d.join("f"), PermissionsExt::from_mode(0o600)).unwrap();
    assert!(run(&["getfacl", "-cpn", &format!("{ds}/f")]).contains("mask::---"));
    assert!(!as_user(&format!("echo again >> {ds}/f")).status.success(), "chmod took the access away");
    m.unmount();
    let m = Mount::new(&img, &mnt, "data=wasteless,dmeta,allow_other");
    let facl = run(&["getfacl", "-cpn", &format!("{ds}/f")]);
    assert!(facl.contains("user:65534:rwx") && facl.contains("mask::---"), "after a remount: {facl}");
    assert_eq!(std::fs::read_to_string(d.join("f")).unwrap(), "root\nuser\n");
    m.unmount();
    fsck_clean(&img);
}

/// Setting an access ACL keeps the mode in step, as ext4 does: `cp -a` and `cp -p` (which set
/// the mode through system.posix_acl_access) keep 644 and 755 with no ACL left behind (no `+`
/// in ls); `setfacl -m o::r,g::r` on a 600 file makes it 644 and lets another user read it; an
/// ACL with a named user keeps it and sets the group bits from the mask; removing it leaves the
/// mode.
#[test]
fn setting_an_acl_updates_the_mode_as_ext4_does() {
    if !fuse_usable() || !is_root() || !have("setfacl") || !have("getfacl") || !have("setpriv") {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), PermissionsExt::from_mode(0o755)).unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered,allow_other");
    std::fs::set_permissions(&mnt, PermissionsExt::from_mode(0o755)).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let run = |args: &[&str]| {
        let o = Command::new(args[0]).args(&args[1..]).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // A tree outside the mount, copied in with cp -a and cp -p.
    let src = dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::set_permissions(&src, PermissionsExt::from_mode(0o755)).unwrap();
    std::fs::write(src.join("f"), b"hello").unwrap();
    std::fs::set_permissions(src.join("f"), PermissionsExt::from_mode(0o644)).unwrap();
    std::fs::write(src.join("x"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(src.join("x"), PermissionsExt::from_mode(0o755)).unwrap();
    run(&["cp", "-a", src.to_str().unwrap(), mnt.join("a").to_str().unwrap()]);
    run(&["cp", "-p", src.join("f").to_str().unwrap(), mnt.join("p").to_str().unwrap()]);
    for (p, want) in [("a", 0o755), ("a/f", 0o644), ("a/x", 0o755), ("p", 0o644)] {
        assert_eq!(mode(&mnt.join(p)), want, "{p}: mode after cp");
        let ls = run(&["ls", "-ld", mnt.join(p).to_str().unwrap()]);
        assert!(!ls.split_whitespace().next().unwrap().ends_with('+'), "{p}: an ACL was left behind: {ls}");
    }
    let as_user = |cmd: &str| Command::new("setpriv").args(["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", cmd]).output().unwrap();
    let f = mnt.join("secret");
    std::fs::write(&f, b"now public").unwrap();
    std::fs::set_permissions(&f, PermissionsExt::from_mode(0o600)).unwrap();
    assert!(!as_user(&format!("cat {}", f.display())).status.success());
    run(&["setfacl", "-m", "o::r,g::r", f.to_str().unwrap()]);
    assert_eq!(mode(&f), 0o644, "setfacl o::r,g::r on 600");
    let o = as_user(&format!("cat {}", f.display()));
    assert!(o.status.success() && o.stdout == b"now public", "another user reads it: {}", String::from_utf8_lossy(&o.stderr));
    // A named user's entry: the ACL stays, the group bits follow the mask.
    run(&["setfacl", "-m", "u:65534:rw", f.to_str().unwrap()]);
    assert_eq!(mode(&f), 0o664, "mask rw-");
    assert!(run(&["getfacl", "-cpn", f.to_str().unwrap()]).contains("user:65534:rw-"));
    run(&["setfacl", "-b", f.to_str().unwrap()]);
    assert_eq!(mode(&f) & 0o700, 0o600, "removing the ACL leaves the mode's owner bits");
    assert!(!run(&["getfacl", "-cpn", f.to_str().unwrap()]).contains("user:65534"));
    m.unmount();
    fsck_clean(&img);
}

/// An open that races an unlink of the same name gets the file (its contents, as on ext4) or
/// ENOENT, nothing else: the kernel looks a name up and opens the inode in two requests, and an
/// unlink between them freed the inode, so the open failed "Structure needs cleaning" (pg_ctl
/// start did, polling postmaster.pid while the postmaster replaced it). The inode the kernel
/// knows is now held until it forgets it; once it has, the file's inode is freed (fsck clean,
/// no inode left but the root).
#[test]
fn an_open_racing_an_unlink_gets_the_file_or_enoent() {
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    let until = Instant::now() + Duration::from_secs(5);
    let body = b"4242\n".repeat(20);
    let writers: Vec<_> = (0..2)
        .map(|k| {
            let (p, body) = (mnt.join(format!("pid{k}")), body.clone());
            std::thread::spawn(move || {
                let mut cycles = 0;
                while cycles < 400 && Instant::now() < until {
                    let mut f = std::fs::OpenOptions::new().write(true).create_new(true).open(&p).unwrap();
                    f.write_all(&body).unwrap();
                    f.sync_all().unwrap();
                    drop(f);
                    std::fs::remove_file(&p).unwrap();
                    cycles += 1;
                }
                cycles
            })
        })
        .collect();
    let readers: Vec<_> = (0..4)
        .map(|k| {
            let (p, body) = (mnt.join(format!("pid{}", k % 2)), body.clone());
            std::thread::spawn(move || {
                let (mut opened, mut gone, mut wrong) = (0, 0, Vec::new());
                while Instant::now() < until && opened + gone < 20_000 {
                    match std::fs::read(&p) {
                        // Opened between the create and the write, or after: a prefix of it.
                        Ok(d) if body.starts_with(&d) => opened += 1,
                        Ok(d) => wrong.push(format!("read {} bytes that are not the file's", d.len())),
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => gone += 1,
                        Err(e) => wrong.push(e.to_string()),
                    }
                }
                (opened, gone, wrong)
            })
        })
        .collect();
    let cycles: u32 = writers.into_iter().map(|t| t.join().unwrap()).sum();
    let mut opened = 0;
    for t in readers {
        let (o, _, wrong) = t.join().unwrap();
        opened += o;
        assert!(wrong.is_empty(), "{} opens failed otherwise, first: {}", wrong.len(), wrong[0]);
    }
    assert!(cycles > 0 && opened > 0, "{cycles} files made and removed, {opened} opened");
    m.unmount();
    fsck_clean(&img);
    let out = Command::new(BIN).args(["fsck"]).arg(&img).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("0 files") && text.contains("0 orphans"), "{text}");
}

/// A directory removed while the kernel holds it (a shell's working directory, an open
/// descriptor) stays, empty and with no links, until the kernel forgets it, as on ext4: opening
/// it again and listing it work (the kernel lists a removed directory as empty) where they
/// failed "Structure needs cleaning". A crash while it is held leaves it on the orphan list and
/// the next mount frees it; fsck accepts it in between.
#[test]
fn a_directory_removed_while_held_stays_until_forgotten() {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;
    if !fuse_usable() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = small_image(dir.path());
    let mnt = dir.path().join("mnt");
    let m = Mount::new(&img, &mnt, "data=ordered");
    std::fs::create_dir(mnt.join("kept")).unwrap();
    std::fs::create_dir(mnt.join("gone")).unwrap();
    let held = std::fs::File::open(mnt.join("gone")).unwrap();
    std::fs::remove_dir(mnt.join("gone")).unwrap();
    assert_eq!(held.metadata().unwrap().nlink(), 0);
    // A new open of the same directory (through /proc, as `ls .` in a removed working
    // directory does) and its listing.
    let again = PathBuf::from(format!("/proc/self/fd/{}", held.as_raw_fd()));
    match std::fs::read_dir(&again) {
        Ok(entries) => assert_eq!(entries.filter_map(Result::ok).count(), 0),
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}"),
    }
    assert!(std::fs::read_dir(&mnt).unwrap().filter_map(Result::ok).all(|e| e.file_name() != "gone"));
    // Committed, then the daemon is killed while the directory is held.
    std::fs::File::open(&mnt).unwrap().sync_all().unwrap();
    m.kill9();
    drop(held);
    assert!(Command::new(BIN).arg("umount").arg(&mnt).status().unwrap().success());
    fsck_clean(&img);
    let out = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 directories") && text.contains("1 orphan;"), "held at the crash: {text}");
    // The next mount frees it.
    Mount::new(&img, &mnt, "data=ordered").unmount();
    let out = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 directories") && text.contains("0 orphans"), "after the next mount: {text}");
    // Without a crash: freed when the kernel forgets it, or at the unmount at the latest.
    let m = Mount::new(&img, &mnt, "data=ordered");
    std::fs::create_dir(mnt.join("brief")).unwrap();
    let held = std::fs::File::open(mnt.join("brief")).unwrap();
    std::fs::remove_dir(mnt.join("brief")).unwrap();
    drop(held);
    m.unmount();
    fsck_clean(&img);
    let out = Command::new(BIN).arg("fsck").arg(&img).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 directories") && text.contains("0 orphans"), "{text}");
}
