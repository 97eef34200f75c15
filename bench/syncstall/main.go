//go:build linux

// Command syncstall measures how long the log's fdatasync waits while the
// disk does something else: small appends to a file, each made durable
// with fdatasync, for a few seconds, while every 500 ms a background
// goroutine does one of the things a log does besides appending (write a
// new segment full of zeros, unlink an old one). It prints the fdatasync
// latency percentiles (docs/benchmarks.md, "Log compaction and activation
// lateness").
//
// Usage: go run ./bench/syncstall [-dir D] [-for 8s] [-size 64MiB] [-every 500ms] MODE
// MODE: none | zerofill (64 MiB of zeros, one fsync) | zerochunk (256 KiB
// at a time, an fdatasync each) | zerodirect (256 KiB at a time, O_DIRECT)
// | unlink (remove a written 64 MiB file) | read (read a 64 MiB file not
// in the page cache through, 1 MiB at a time, as wal.Log.Warm did) |
// readchunk (the same as datadir.OpenBackground reads: 128 KiB at a
// time, read-ahead off) | readdirect (datadir.OpenUncached: O_DIRECT) |
// syncfs (-size MiB written over 128 files, then one syncfs, as
// farstore.SyncFiles did) | syncfspaced (the same made durable by
// farstore.SyncFiles, which writes each file back first)
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chronoq/chronoq/internal/datadir"
	"github.com/chronoq/chronoq/internal/farstore"
)

const segSize = 64 << 20 // the appended file's

// the background work's file size and period (-size in MiB, -every): the
// same bytes per second in smaller files shows whether a stall scales
// with the file
var (
	bgSize  = segSize
	bgEvery = 500 * time.Millisecond
)

func main() {
	dir := flag.String("dir", "/var/tmp/syncstall", "scratch directory (emptied, then removed)")
	dur := flag.Duration("for", 8*time.Second, "how long to measure")
	size := flag.Int("size", segSize>>20, "background work: file size, MiB")
	flag.DurationVar(&bgEvery, "every", bgEvery, "background work: how often")
	flag.Parse()
	bgSize = *size << 20
	mode := flag.Arg(0)
	if err := run(*dir, mode, *dur); err != nil {
		fmt.Fprintln(os.Stderr, "syncstall:", err)
		os.Exit(1)
	}
}

func run(dir, mode string, dur time.Duration) error {
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	zeros := make([]byte, max(segSize, bgSize))
	logf, err := os.OpenFile(filepath.Join(dir, "log"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	if _, err := logf.WriteAt(zeros[:segSize], 0); err != nil {
		return err
	}
	if err := logf.Sync(); err != nil {
		return err
	}
	// files for unlink to remove, written before the clock starts
	var old []string
	if mode == "unlink" || strings.HasPrefix(mode, "read") {
		for i := 0; i < int(dur/bgEvery)+1; i++ {
			p := filepath.Join(dir, fmt.Sprintf("old%d", i))
			if err := os.WriteFile(p, zeros[:bgSize], 0o600); err != nil {
				return err
			}
			old = append(old, p)
		}
		syscall.Sync()
		if mode != "unlink" {
			for _, p := range old {
				if err := dropCache(p); err != nil {
					return err
				}
			}
		}
	}
	stop, done := make(chan struct{}), make(chan error, 1)
	go func() { done <- background(dir, mode, zeros, old, stop) }()
	buf := make([]byte, 4096)
	var lat []time.Duration
	for off, end := int64(0), time.Now().Add(dur); time.Now().Before(end); off = (off + 4096) % (segSize - 4096) {
		if _, err := logf.WriteAt(buf, off); err != nil {
			return err
		}
		t := time.Now()
		if err := syscall.Fdatasync(int(logf.Fd())); err != nil {
			return err
		}
		lat = append(lat, time.Since(t))
		time.Sleep(200 * time.Microsecond)
	}
	close(stop)
	if err := <-done; err != nil {
		return err
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[int(p*float64(len(lat)-1))].Round(time.Microsecond) }
	fmt.Printf("%-10s %3d MiB every %-6v fdatasyncs %d  p50 %v  p99 %v  p99.9 %v  max %v\n", mode, bgSize>>20, bgEvery, len(lat), q(.5), q(.99), q(.999), q(1))
	return nil
}

func background(dir, mode string, zeros []byte, old []string, stop chan struct{}) error {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		case <-time.After(bgEvery):
		}
		p := filepath.Join(dir, fmt.Sprintf("new%d", i))
		var err error
		switch mode {
		case "none":
		case "zerofill":
			err = writeFile(p, 0, func(f *os.File) error {
				if _, err := f.WriteAt(zeros[:bgSize], 0); err != nil {
					return err
				}
				return f.Sync()
			})
		case "zerochunk":
			err = writeFile(p, 0, func(f *os.File) error {
				for off := 0; off < bgSize; off += 256 << 10 {
					if _, err := f.WriteAt(zeros[:256<<10], int64(off)); err != nil {
						return err
					}
					if err := syscall.Fdatasync(int(f.Fd())); err != nil {
						return err
					}
				}
				return nil
			})
		case "zerodirect":
			err = writeFile(p, syscall.O_DIRECT, func(f *os.File) error {
				chunk, err := syscall.Mmap(-1, 0, 256<<10, syscall.PROT_READ, syscall.MAP_ANON|syscall.MAP_PRIVATE)
				if err != nil {
					return err
				}
				defer syscall.Munmap(chunk)
				for off := 0; off < bgSize; off += len(chunk) {
					if _, err := f.WriteAt(chunk, int64(off)); err != nil {
						return err
					}
				}
				return syscall.Fdatasync(int(f.Fd()))
			})
		case "unlink":
			if i < len(old) {
				if err = os.Remove(old[i]); err == nil {
					err = syncDir(dir)
				}
			}
		case "read":
			if i < len(old) {
				err = readFile(old[i])
			}
		case "readchunk", "readdirect":
			if i < len(old) {
				err = readBackground(old[i], mode == "readdirect")
			}
		case "syncfs", "syncfspaced":
			// -size MiB of dirty data over 128 files, then made durable
			// by one syncfs (as farstore.SyncFiles did) or by
			// farstore.SyncFiles itself
			var paths []string
			if paths, err = dirtyFiles(p, 128, zeros[:bgSize/128]); err == nil {
				if mode == "syncfspaced" {
					err = farstore.SyncFiles(dir, paths)
				} else {
					err = syncFS(dir)
				}
			}
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		if err != nil {
			return err
		}
	}
}

func writeFile(path string, flag int, fn func(*os.File) error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|flag, 0o600)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// dropCache evicts a synced file's pages from the page cache, so the
// next read of it goes to the disk.
func dropCache(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// readFile reads path through in 1 MiB reads, with the kernel's
// read-ahead as it comes.
func readFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return readAll(f, make([]byte, 1<<20))
}

// readBackground reads path through as chronoq's background readers do
// (internal/datadir/background.go): through the page cache with
// read-ahead off and what was cached dropped first, or (uncached) past it.
func readBackground(path string, uncached bool) error {
	open := datadir.OpenBackground
	if uncached {
		open = datadir.OpenUncached
	}
	f, err := open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if !uncached {
		f.DropCached()
	}
	return readAll(f, make([]byte, 1<<20))
}

func readAll(r io.Reader, buf []byte) error {
	for {
		_, err := r.Read(buf)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func dirtyFiles(prefix string, n int, b []byte) ([]string, error) {
	var paths []string
	for i := 0; i < n; i++ {
		p := fmt.Sprintf("%s.%d", prefix, i)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return nil, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func syncFS(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return unix.Syncfs(int(d.Fd()))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
