package okeanos

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func image(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fs.img")
	if err := Mkfs(p, 64<<20, "journal_size=8M"); err != nil {
		t.Fatal(err)
	}
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestFilesAndNamespace(t *testing.T) {
	img := image(t)
	ofs, err := Open(img, "data=wasteless+dmeta")
	must(t, err)
	must(t, ofs.Mkdir("/logs", 0o750))
	f, err := ofs.Create("/logs/a.log")
	must(t, err)
	if n, err := f.Append([]byte("hello\n")); n != 6 || err != nil {
		t.Fatalf("append: %d %v", n, err)
	}
	fmt.Fprintf(f, "world\n") // io.Writer appends
	must(t, f.Datasync())
	must(t, f.Sync())
	buf := make([]byte, 64)
	n, err := f.ReadAt(buf, 0)
	if err != io.EOF || string(buf[:n]) != "hello\nworld\n" {
		t.Fatalf("read %q %v", buf[:n], err)
	}
	if l, err := f.DurableLen(); l != 12 || err != nil {
		t.Fatalf("durable %d %v", l, err)
	}
	st, err := f.Stat()
	must(t, err)
	if st.Size != 12 || st.IsDir() {
		t.Fatalf("stat %+v", st)
	}
	g, err := ofs.OpenFile("/logs/b", os.O_RDWR|os.O_CREATE|os.O_EXCL)
	must(t, err)
	if _, err := ofs.OpenFile("/logs/b", os.O_RDWR|os.O_CREATE|os.O_EXCL); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("O_EXCL: %v", err)
	}
	_, err = g.WriteAt([]byte("xyz"), 10)
	must(t, err)
	must(t, g.Truncate(11))
	must(t, ofs.SyncFiles(f, g))
	must(t, ofs.Rename("/logs/b", "/logs/c"))
	ents, err := ofs.ReadDir("/logs")
	must(t, err)
	if len(ents) != 2 || ents[0].Name != "a.log" || ents[1].Name != "c" {
		t.Fatalf("readdir %+v", ents)
	}
	if ds, err := ofs.Stat("/logs"); err != nil || !ds.IsDir() || ds.Mode&0o777 != 0o750 {
		t.Fatalf("stat dir %+v %v", ds, err)
	}
	c, err := ofs.Counters()
	must(t, err)
	if _, ok := c["commits"]; !ok {
		t.Fatalf("counters %v", c)
	}
	must(t, g.Close())
	must(t, ofs.Remove("/logs/c"))
	if _, err := ofs.Stat("/logs/c"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stat removed: %v", err)
	}
	if err := ofs.RemoveDir("/logs"); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir: %v", err)
	}
	must(t, f.Close())
	must(t, ofs.Unmount())
}

func TestBadUse(t *testing.T) {
	img := image(t)
	ofs, err := Open(img, "")
	must(t, err)
	if _, err := Open(img, ""); !errors.Is(err, syscall.EBUSY) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := Open(img+".none", ""); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing image: %v", err)
	}
	if _, err := Open(img, "data=sometimes"); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("bad option: %v", err)
	}
	if err := ofs.Mkdir("/\xff\xfe", 0o755); !errors.Is(err, syscall.EINVAL) || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("invalid UTF-8: %v", err)
	}
	f, err := ofs.Create("/a")
	must(t, err)
	must(t, f.Close())
	if err := f.Close(); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("closed twice: %v", err)
	}
	if _, err := f.Append([]byte("x")); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("use after close: %v", err)
	}
	if err := ofs.SyncFiles(nil); err == nil {
		t.Fatal("a nil file in SyncFiles was accepted")
	}
	g, err := ofs.Create("/b")
	must(t, err)
	_, err = g.Append([]byte("kept"))
	must(t, err)
	must(t, ofs.Unmount())
	if _, err := g.Append([]byte("x")); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("use after unmount: %v", err)
	}
	if err := ofs.Unmount(); !errors.Is(err, syscall.EBADF) {
		t.Fatalf("unmounted twice: %v", err)
	}
	ofs, err = Open(img, "")
	must(t, err)
	st, err := ofs.Stat("/b")
	must(t, err)
	if st.Size != 4 {
		t.Fatalf("the unmount lost the data: %+v", st)
	}
	must(t, ofs.Unmount())
}

// Goroutines that sync at once share commits, and a tailing reader waits for the watermark.
func TestConcurrentAppendersAndATailingReader(t *testing.T) {
	img := image(t)
	ofs, err := Open(img, "data=wasteless+dmeta")
	must(t, err)
	before, err := ofs.Counters()
	must(t, err)
	const n, per = 32, 30
	var wg sync.WaitGroup
	reader, err := ofs.Create("/tail")
	must(t, err)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			f, err := ofs.Create(fmt.Sprintf("/s%d", i))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for k := 0; k < per; k++ {
				if _, err := f.Append(bytes.Repeat([]byte{byte('A' + i%26)}, 128)); err != nil {
					t.Error(err)
					return
				}
				if err := f.Datasync(); err != nil {
					t.Error(err)
					return
				}
			}
		}(i)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		w, _ := ofs.Create("/tail")
		time.Sleep(20 * time.Millisecond)
		w.Append(make([]byte, 128))
		w.Datasync()
		w.Close()
	}()
	if l, err := reader.WaitDurable(128, 30*time.Second); l != 128 || err != nil {
		t.Fatalf("wait durable: %d %v", l, err)
	}
	wg.Wait()
	after, err := ofs.Counters()
	must(t, err)
	syncs := after["syncs"].(float64) - before["syncs"].(float64)
	commits := after["commits"].(float64) - before["commits"].(float64)
	if syncs < n*per || commits >= syncs*0.8 {
		t.Fatalf("%v syncs in %v commits: no group commit", syncs, commits)
	}
	reader.Close()
	must(t, ofs.Unmount())
}

// A child process appends with 8 goroutines and is killed with SIGKILL; every record it
// acknowledged must come back.
func TestKilledAppenderKeepsAcknowledgedRecords(t *testing.T) {
	if os.Getenv("OKEANOS_GO_APPENDER") != "" {
		appender(os.Getenv("OKEANOS_GO_APPENDER"))
		return
	}
	img := image(t)
	acks := filepath.Join(t.TempDir(), "acks")
	out, err := os.Create(acks)
	must(t, err)
	cmd := exec.Command(os.Args[0], "-test.run=TestKilledAppenderKeepsAcknowledgedRecords")
	cmd.Env = append(os.Environ(), "OKEANOS_GO_APPENDER="+img)
	cmd.Stdout = out
	must(t, cmd.Start())
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if st, _ := os.Stat(acks); st != nil && st.Size() > 20000 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	out.Close()
	data, _ := os.ReadFile(acks)
	ofs, err := Open(img, "")
	must(t, err)
	defer ofs.Unmount()
	count := 0
	for _, line := range strings.Split(string(data), "\n") {
		var g, k int
		if _, err := fmt.Sscanf(line, "ack %d %d", &g, &k); err != nil {
			continue
		}
		f, err := ofs.OpenFile(fmt.Sprintf("/g%d", g), os.O_RDONLY)
		must(t, err)
		buf := make([]byte, 128)
		if _, err := f.ReadAt(buf, int64(k)*128); err != nil || !bytes.Equal(buf, record(g, k)) {
			t.Fatalf("acknowledged record %d of goroutine %d is missing or wrong (%v)", k, g, err)
		}
		f.Close()
		count++
	}
	if count < 100 {
		t.Fatalf("only %d acknowledgements", count)
	}
	t.Logf("%d acknowledged records came back", count)
}

func record(g, k int) []byte {
	b := bytes.Repeat([]byte{byte('a' + g)}, 128)
	copy(b, strconv.Itoa(k))
	b[127] = '\n'
	return b
}

func appender(img string) {
	ofs, err := Open(img, "data=wasteless+dmeta")
	if err != nil {
		panic(err)
	}
	var mu sync.Mutex
	for g := 0; g < 8; g++ {
		go func(g int) {
			f, err := ofs.Create(fmt.Sprintf("/g%d", g))
			if err != nil {
				panic(err)
			}
			for k := 0; ; k++ {
				if _, err := f.Append(record(g, k)); err != nil {
					panic(err)
				}
				if err := f.Datasync(); err != nil {
					panic(err)
				}
				mu.Lock()
				fmt.Printf("ack %d %d\n", g, k)
				mu.Unlock()
			}
		}(g)
	}
	select {}
}
