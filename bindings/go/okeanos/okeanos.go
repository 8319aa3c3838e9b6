// Package okeanos embeds Okeanos, a journaling storage engine for many concurrent streams of
// small synchronous writes, in a Go program, over its C ABI (bindings/c/okeanos.h).
//
// Build against libokeanos (cargo build --release -p okeanos-ffi), telling cgo where it is:
//
//	CGO_LDFLAGS="-L$OKEANOS/target/release -Wl,-rpath,$OKEANOS/target/release" go build
//
// An FS and its Files are safe for concurrent use by many goroutines; goroutines that sync at
// once share one commit. Errors are *Error values that unwrap to a syscall.Errno, so
// errors.Is(err, fs.ErrNotExist) works. The guide is docs/EMBEDDING.md.
package okeanos

/*
#cgo CFLAGS: -I${SRCDIR}/../../c
#cgo LDFLAGS: -lokeanos
#include <stdlib.h>
#include "okeanos.h"
*/
import "C"

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"time"
	"unsafe"
)

// Error is a failed call: the operation, the path if any, the errno and the library's sentence.
type Error struct {
	Op    string
	Path  string
	Errno syscall.Errno
	Msg   string
}

func (e *Error) Error() string { return e.Msg }

// Unwrap gives the errno, for errors.Is(err, fs.ErrNotExist) and errors.Is(err, syscall.EBUSY).
func (e *Error) Unwrap() error { return e.Errno }

// call runs f on one OS thread, so that the thread-local message belongs to this call.
func call(op, path string, f func() C.int64_t) (int64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := int64(f())
	if r < 0 {
		return r, &Error{Op: op, Path: path, Errno: syscall.Errno(-r), Msg: C.GoString(C.okeanos_errmsg())}
	}
	return r, nil
}

// handle calls f, which returns a handle (NULL on failure), on one OS thread.
func handle(op, path string, f func() unsafe.Pointer) (unsafe.Pointer, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h := f()
	if h == nil {
		return nil, &Error{Op: op, Path: path, Errno: syscall.Errno(C.okeanos_errno()), Msg: C.GoString(C.okeanos_errmsg())}
	}
	return h, nil
}

func cstr(s string) *C.char { return C.CString(s) }

// Handles are opaque values from the library. They are never addresses: the library makes
// them non-canonical (docs/EMBEDDING.md), so Go's garbage collector, which looks at every
// pointer-typed value, finds nothing of its own in them.

// Mkfs creates an image file of size bytes at path and formats it; options as okeanos_mkfs
// ("journal_size=16M", "journal=manylogs", ...; "" for the defaults).
func Mkfs(path string, size uint64, options string) error {
	p, o := cstr(path), cstr(options)
	defer C.free(unsafe.Pointer(p))
	defer C.free(unsafe.Pointer(o))
	_, err := call("mkfs", path, func() C.int64_t { return C.int64_t(C.okeanos_mkfs(p, C.uint64_t(size), o)) })
	return err
}

// FS is a mounted file system.
type FS struct {
	h    *C.okeanos_fs
	path string
}

// Open mounts the image at path with ext4-style options ("data=wasteless+dmeta,commit=5").
// A second open of a mounted image fails with EBUSY.
func Open(path, options string) (*FS, error) {
	p, o := cstr(path), cstr(options)
	defer C.free(unsafe.Pointer(p))
	defer C.free(unsafe.Pointer(o))
	h, err := handle("open", path, func() unsafe.Pointer { return unsafe.Pointer(C.okeanos_open(p, o)) })
	if err != nil {
		return nil, err
	}
	return &FS{h: (*C.okeanos_fs)(h), path: path}, nil
}

// Unmount unmounts cleanly; files still open fail with EBADF afterwards.
func (fs *FS) Unmount() error {
	_, err := call("unmount", fs.path, func() C.int64_t { return C.int64_t(C.okeanos_unmount(fs.h)) })
	return err
}

// Sync commits everything done so far and waits for it.
func (fs *FS) Sync() error {
	_, err := call("sync", fs.path, func() C.int64_t { return C.int64_t(C.okeanos_sync(fs.h)) })
	return err
}

// File is an open regular file.
type File struct {
	h    *C.okeanos_file
	fs   *FS
	name string
}

// Create creates the file, or opens an existing one, for appending.
func (fs *FS) Create(path string) (*File, error) {
	p := cstr(path)
	defer C.free(unsafe.Pointer(p))
	h, err := handle("create", path, func() unsafe.Pointer { return unsafe.Pointer(C.okeanos_create(fs.h, p)) })
	if err != nil {
		return nil, err
	}
	return &File{h: (*C.okeanos_file)(h), fs: fs, name: path}, nil
}

// OpenFile opens a file with os.O_* flags (O_RDONLY, O_WRONLY, O_RDWR, O_CREATE, O_EXCL,
// O_TRUNC, O_APPEND).
func (fs *FS) OpenFile(path string, flag int) (*File, error) {
	var f C.int
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_WRONLY:
		f = C.OKEANOS_O_WRONLY
	case os.O_RDWR:
		f = C.OKEANOS_O_RDWR
	}
	for _, m := range []struct{ goFlag, c int }{{os.O_CREATE, C.OKEANOS_O_CREAT}, {os.O_EXCL, C.OKEANOS_O_EXCL}, {os.O_TRUNC, C.OKEANOS_O_TRUNC}, {os.O_APPEND, C.OKEANOS_O_APPEND}} {
		if flag&m.goFlag != 0 {
			f |= C.int(m.c)
		}
	}
	p := cstr(path)
	defer C.free(unsafe.Pointer(p))
	h, err := handle("open", path, func() unsafe.Pointer { return unsafe.Pointer(C.okeanos_open_file(fs.h, p, f)) })
	if err != nil {
		return nil, err
	}
	return &File{h: (*C.okeanos_file)(h), fs: fs, name: path}, nil
}

// Name is the path the file was opened with.
func (f *File) Name() string { return f.name }

func bufPtr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// Append writes b at the end of the file, atomically with respect to other appenders.
func (f *File) Append(b []byte) (int, error) {
	n, err := call("append", f.name, func() C.int64_t { return C.okeanos_append(f.h, bufPtr(b), C.size_t(len(b))) })
	return int(n), err
}

// Write appends (io.Writer).
func (f *File) Write(b []byte) (int, error) { return f.Append(b) }

// WriteAt writes b at off (io.WriterAt).
func (f *File) WriteAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{Op: "pwrite", Path: f.name, Errno: syscall.EINVAL, Msg: "negative offset"}
	}
	n, err := call("pwrite", f.name, func() C.int64_t { return C.okeanos_pwrite(f.h, bufPtr(b), C.size_t(len(b)), C.uint64_t(off)) })
	return int(n), err
}

// ReadAt reads len(b) bytes at off (io.ReaderAt: io.EOF when fewer are there).
func (f *File) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, &Error{Op: "pread", Path: f.name, Errno: syscall.EINVAL, Msg: "negative offset"}
	}
	n, err := call("pread", f.name, func() C.int64_t { return C.okeanos_pread(f.h, bufPtr(b), C.size_t(len(b)), C.uint64_t(off)) })
	if err != nil {
		return 0, err
	}
	if int(n) < len(b) {
		return int(n), io.EOF
	}
	return int(n), nil
}

// Sync makes the file and everything it depends on durable (fsync).
func (f *File) Sync() error {
	_, err := call("fsync", f.name, func() C.int64_t { return C.int64_t(C.okeanos_fsync(f.h)) })
	return err
}

// Datasync makes the file's data and size durable (fdatasync); concurrent syncs share a commit.
func (f *File) Datasync() error {
	_, err := call("fdatasync", f.name, func() C.int64_t { return C.int64_t(C.okeanos_fdatasync(f.h)) })
	return err
}

// Truncate sets the file's size.
func (f *File) Truncate(size int64) error {
	_, err := call("ftruncate", f.name, func() C.int64_t { return C.int64_t(C.okeanos_ftruncate(f.h, C.uint64_t(size))) })
	return err
}

// Stat is what Stat and File.Stat return.
type Stat struct {
	Ino    uint64
	Mode   uint32 // type and permission bits, as st_mode
	Nlink  uint32
	UID    uint32
	GID    uint32
	Size   int64
	Blocks uint64
	Mtime  time.Time
}

// IsDir tells a directory.
func (s Stat) IsDir() bool { return s.Mode&syscall.S_IFMT == syscall.S_IFDIR }

func statOf(st *C.okeanos_stat_t) Stat {
	return Stat{Ino: uint64(st.ino), Mode: uint32(st.mode), Nlink: uint32(st.nlink), UID: uint32(st.uid), GID: uint32(st.gid), Size: int64(st.size), Blocks: uint64(st.blocks), Mtime: time.Unix(0, int64(st.mtime_ns))}
}

// Stat gives the open file's attributes.
func (f *File) Stat() (Stat, error) {
	var st C.okeanos_stat_t
	_, err := call("fstat", f.name, func() C.int64_t { return C.int64_t(C.okeanos_fstat(f.h, &st)) })
	return statOf(&st), err
}

// DurableLen is the length of the longest prefix whose bytes, as a read sees them now, the
// commits so far made durable.
func (f *File) DurableLen() (int64, error) {
	return call("durable_len", f.name, func() C.int64_t { return C.okeanos_durable_len(f.h) })
}

// WaitDurable waits until DurableLen reaches off or timeout passes (then it returns less).
func (f *File) WaitDurable(off int64, timeout time.Duration) (int64, error) {
	return call("wait_durable", f.name, func() C.int64_t {
		return C.okeanos_wait_durable(f.h, C.uint64_t(off), C.uint64_t(timeout/time.Millisecond))
	})
}

// Close closes the file.
func (f *File) Close() error {
	_, err := call("close", f.name, func() C.int64_t { return C.int64_t(C.okeanos_close(f.h)) })
	return err
}

// SyncFiles makes several files durable together: one commit and one flush when their writes
// share a transaction (docs/EMBEDDING.md, "Group sync").
func (fs *FS) SyncFiles(files ...*File) error {
	if len(files) == 0 {
		return nil
	}
	hs := (*[1 << 24]*C.okeanos_file)(C.malloc(C.size_t(len(files)) * C.size_t(unsafe.Sizeof(uintptr(0)))))[:len(files):len(files)]
	defer C.free(unsafe.Pointer(&hs[0]))
	for i, f := range files {
		if f == nil {
			return &Error{Op: "sync_files", Errno: syscall.EINVAL, Msg: fmt.Sprintf("files[%d] is nil", i)}
		}
		hs[i] = f.h
	}
	_, err := call("sync_files", fs.path, func() C.int64_t { return C.int64_t(C.okeanos_sync_files(fs.h, &hs[0], C.size_t(len(files)))) })
	return err
}

func (fs *FS) pathCall(op, path string, f func(p *C.char) C.int) error {
	p := cstr(path)
	defer C.free(unsafe.Pointer(p))
	_, err := call(op, path, func() C.int64_t { return C.int64_t(f(p)) })
	return err
}

// Mkdir makes a directory.
func (fs *FS) Mkdir(path string, perm os.FileMode) error {
	return fs.pathCall("mkdir", path, func(p *C.char) C.int { return C.okeanos_mkdir(fs.h, p, C.uint32_t(perm.Perm())) })
}

// Remove removes a file's name.
func (fs *FS) Remove(path string) error {
	return fs.pathCall("unlink", path, func(p *C.char) C.int { return C.okeanos_unlink(fs.h, p) })
}

// RemoveDir removes an empty directory.
func (fs *FS) RemoveDir(path string) error {
	return fs.pathCall("rmdir", path, func(p *C.char) C.int { return C.okeanos_rmdir(fs.h, p) })
}

// Rename renames from to to, replacing to.
func (fs *FS) Rename(from, to string) error {
	t := cstr(to)
	defer C.free(unsafe.Pointer(t))
	return fs.pathCall("rename", from, func(p *C.char) C.int { return C.okeanos_rename(fs.h, p, t) })
}

// Stat gives the attributes of path.
func (fs *FS) Stat(path string) (Stat, error) {
	var st C.okeanos_stat_t
	err := fs.pathCall("stat", path, func(p *C.char) C.int { return C.okeanos_stat(fs.h, p, &st) })
	return statOf(&st), err
}

// DirEntry is one name in a directory.
type DirEntry struct {
	Name  string
	Ino   uint64
	IsDir bool
}

// ReadDir lists a directory, sorted, without "." and "..".
func (fs *FS) ReadDir(path string) ([]DirEntry, error) {
	p := cstr(path)
	defer C.free(unsafe.Pointer(p))
	h, err := handle("opendir", path, func() unsafe.Pointer { return unsafe.Pointer(C.okeanos_opendir(fs.h, p)) })
	if err != nil {
		return nil, err
	}
	d := (*C.okeanos_dir)(h)
	defer C.okeanos_closedir(d)
	var out []DirEntry
	var ent C.okeanos_dirent_t
	for {
		n, err := call("readdir", path, func() C.int64_t { return C.int64_t(C.okeanos_readdir(d, &ent)) })
		if err != nil {
			return out, err
		}
		if n == 0 {
			return out, nil
		}
		name := C.GoString(&ent.name[0])
		if name != "." && name != ".." {
			out = append(out, DirEntry{Name: name, Ino: uint64(ent.ino), IsDir: ent.kind == 4})
		}
	}
}

// Counters gives the mount's counters (journal bytes by kind, commits, syncs, ...).
func (fs *FS) Counters() (map[string]any, error) {
	// The counters move while the mount works, so the JSON may be longer by the time it is
	// copied than when its length was asked: ask again with a larger buffer until it fits.
	n, err := call("counters", fs.path, func() C.int64_t { return C.okeanos_counters_json(fs.h, nil, 0) })
	if err != nil {
		return nil, err
	}
	for tries := 0; tries < 8; tries++ {
		buf := make([]byte, n+64)
		got, err := call("counters", fs.path, func() C.int64_t {
			return C.okeanos_counters_json(fs.h, (*C.char)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)))
		})
		if err != nil {
			return nil, err
		}
		if got < int64(len(buf)) {
			var m map[string]any
			if err := json.Unmarshal(buf[:got], &m); err != nil {
				return nil, err
			}
			return m, nil
		}
		n = got
	}
	return nil, fmt.Errorf("okeanos: counters of %s: the JSON kept growing past its buffer", fs.path)
}
