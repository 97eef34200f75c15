package wal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// The benchmarks model the broker: submitter goroutines send requests over
// one channel to a loop goroutine that drains whatever is pending, makes it
// durable with one group commit and answers the whole batch.
// BenchmarkDurableAppend goes through the Log under SyncAlways;
// BenchmarkRawPwriteFdatasync does the least possible work for the same
// durability (one pwrite and one fdatasync per batch into a preallocated
// file) and is the ceiling to compare with.
//
//	go test -run x -bench . -benchtime 2s ./internal/wal/

const (
	benchMaxBatch      = 4096
	benchMaxBatchBytes = 4 << 20
)

var (
	benchSubmitters = []int{1, 8, 64, 512}
	benchSizes      = []int{100, 4 << 10, 64 << 10}
)

type benchReq struct {
	body  []byte
	reply chan struct{}
}

func sizeName(n int) string {
	if n >= 1<<10 && n%(1<<10) == 0 {
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// runGroupCommit runs b.N requests from submitters goroutines through a
// loop that hands each drained batch to commit, and reports throughput and
// latency.
func runGroupCommit(b *testing.B, submitters, size int, commit func(batch []*benchReq) error) {
	reqs := make(chan *benchReq, submitters)
	loopDone := make(chan struct{})
	var batches, records int
	go func() {
		defer close(loopDone)
		batch := make([]*benchReq, 0, benchMaxBatch)
		for r := range reqs {
			batch = append(batch[:0], r)
			n := len(r.body)
		drain:
			for len(batch) < benchMaxBatch && n < benchMaxBatchBytes {
				select {
				case r, ok := <-reqs:
					if !ok {
						break drain
					}
					batch = append(batch, r)
					n += len(r.body)
				default:
					break drain
				}
			}
			if err := commit(batch); err != nil {
				b.Error(err)
			}
			batches++
			records += len(batch)
			for _, r := range batch {
				r.reply <- struct{}{}
			}
		}
	}()

	lat := make([][]time.Duration, submitters)
	var wg sync.WaitGroup
	b.SetBytes(int64(size))
	b.ResetTimer()
	start := time.Now()
	for s := 0; s < submitters; s++ {
		n := b.N / submitters
		if s < b.N%submitters {
			n++
		}
		wg.Add(1)
		go func(s, n int) {
			defer wg.Done()
			payload := make([]byte, size)
			binary.LittleEndian.PutUint64(payload, uint64(s))
			r := &benchReq{body: payload, reply: make(chan struct{}, 1)}
			lat[s] = make([]time.Duration, 0, n)
			for i := 0; i < n; i++ {
				t0 := time.Now()
				reqs <- r
				<-r.reply
				lat[s] = append(lat[s], time.Since(t0))
			}
		}(s, n)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	close(reqs)
	<-loopDone

	all := slices.Concat(lat...)
	slices.Sort(all)
	if len(all) > 0 {
		p99 := all[min(len(all)-1, len(all)*99/100)]
		b.ReportMetric(float64(p99.Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	if batches > 0 {
		b.ReportMetric(float64(records)/float64(batches), "recs/batch")
	}
}

func BenchmarkDurableAppend(b *testing.B) {
	for _, subs := range benchSubmitters {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("submitters=%d/size=%s", subs, sizeName(size)), func(b *testing.B) {
				l, err := Open(b.TempDir(), Options{Sync: SyncAlways, Logger: quietLogger})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := l.Replay(Position{}, func(Position, []byte) error { return nil }); err != nil {
					b.Fatal(err)
				}
				runGroupCommit(b, subs, size, func(batch []*benchReq) error {
					for _, r := range batch {
						if _, err := l.Append(r.body); err != nil {
							return err
						}
					}
					return l.Commit()
				})
				if err := l.Close(); err != nil {
					b.Fatal(err)
				}
			})
		}
	}
}

func BenchmarkRawPwriteFdatasync(b *testing.B) {
	for _, subs := range benchSubmitters {
		for _, size := range benchSizes {
			b.Run(fmt.Sprintf("submitters=%d/size=%s", subs, sizeName(size)), func(b *testing.B) {
				f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				// Room for everything, so every write lands in fresh
				// preallocated space, as in a WAL segment.
				total := int64(b.N)*int64(size+FrameHeaderSize) + 1<<20
				if err := fallocateFile(f, total); err != nil {
					b.Fatal(err)
				}
				var off int64
				buf := make([]byte, 0, benchMaxBatchBytes+(64<<10))
				runGroupCommit(b, subs, size, func(batch []*benchReq) error {
					buf = buf[:0]
					for _, r := range batch {
						buf = binary.LittleEndian.AppendUint32(buf, uint32(len(r.body)))
						buf = binary.LittleEndian.AppendUint32(buf, 0)
						buf = append(buf, r.body...)
					}
					if _, err := f.WriteAt(buf, off); err != nil {
						return err
					}
					off += int64(len(buf))
					return fdatasyncFile(f)
				})
			})
		}
	}
}

// BenchmarkReadAt is a checked payload read of a committed frame, as a
// take that answers the job's payload does it.
//
//	go test -run x -bench ReadAt -benchmem ./internal/wal/
func BenchmarkReadAt(b *testing.B) {
	l, err := Open(b.TempDir(), Options{Sync: SyncNever, Logger: quietLogger})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Replay(Position{}, func(Position, []byte) error { return nil }); err != nil {
		b.Fatal(err)
	}
	body := make([]byte, 200)
	var last Position
	for range 64 {
		if last, err = l.Append(body); err != nil {
			b.Fatal(err)
		}
	}
	if err := l.Commit(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := l.ReadAt(last.Segment, last.Offset+FrameHeaderSize+50, 100); err != nil {
			b.Fatal(err)
		}
	}
}
