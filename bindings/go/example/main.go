// The Go example of docs/EMBEDDING.md (run by scripts/test.sh): per-tenant logs appended by
// goroutines with a sync after each record, then a group sync.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/okeanos-storage/okeanos/bindings/go/okeanos"
)

func main() {
	dir, _ := os.MkdirTemp("", "okeanos-example")
	defer os.RemoveAll(dir)
	img := filepath.Join(dir, "ingest.img")
	if err := okeanos.Mkfs(img, 256<<20, ""); err != nil {
		panic(err)
	}
	fs, err := okeanos.Open(img, "data=wasteless+dmeta")
	if err != nil {
		panic(err)
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			log, err := fs.Create(fmt.Sprintf("/tenant-%d.log", i))
			if err != nil {
				panic(err)
			}
			defer log.Close()
			for k := 0; k < 100; k++ {
				fmt.Fprintf(log, "tenant=%d seq=%03d temp=21.5\n", i, k)
				if err := log.Datasync(); err != nil { // durable when this returns
					panic(err)
				}
			}
		}(i)
	}
	wg.Wait()
	var logs []*okeanos.File
	for i := 0; i < 8; i++ {
		log, _ := fs.Create(fmt.Sprintf("/tenant-%d.log", i))
		log.Append([]byte("checkpoint\n"))
		logs = append(logs, log)
	}
	if err := fs.SyncFiles(logs...); err != nil { // one commit for all eight
		panic(err)
	}
	d, _ := logs[0].DurableLen()
	fmt.Printf("%d bytes of /tenant-0.log are durable\n", d)
	for _, l := range logs {
		l.Close()
	}
	if err := fs.Unmount(); err != nil {
		panic(err)
	}
}
