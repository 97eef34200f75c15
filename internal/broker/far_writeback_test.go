package broker

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/farstore"
)

// TestFarBucketsWrittenBackInEpochs: what hand-outs append to bucket files
// is handed to write-back an epoch later, in whole pages, each byte once:
// after two rounds of hand-outs and the epochs that follow, each bucket's
// handed ranges are contiguous and cover its file up to its last whole
// page. Epochs of length 0 end on every turn.
func TestFarBucketsWrittenBackInEpochs(t *testing.T) {
	defer func(a time.Duration, f func(string, []farstore.Range)) { farWritebackAge, farWriteBack = a, f }(farWritebackAge, farWriteBack)
	farWritebackAge = 0
	var mu sync.Mutex
	handed := map[int64][]farstore.Range{}
	farWriteBack = func(dir string, ranges []farstore.Range) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range ranges {
			handed[r.Start] = append(handed[r.Start], r)
		}
	}
	clk := &testClock{t: farT0}
	b := mustOpenFar(t, t.TempDir(), clk, time.Hour)
	defer b.Close()
	ctx := context.Background()
	turn := func() {
		t.Helper()
		if _, err := call(b, ctx, func(time.Time) (struct{}, error) { b.far.wb.wait(); return struct{}{}, nil }); err != nil {
			t.Fatal(err)
		}
	}
	const buckets, perRound = 3, 10
	for round := range 2 {
		for k := range buckets {
			for i := range perRound {
				at := farT0.Add(time.Duration(3+2*k) * time.Hour)
				putAt(t, b, "q", engine.PutRequest{ID: fmt.Sprintf("r%d-b%d-%d", round, k, i), Payload: bytes.Repeat([]byte{'x'}, 2000)}, at)
			}
		}
		waitFar(t, b, (round+1)*buckets*perRound)
		for range 4 {
			turn()
		}
	}
	sizes, err := call(b, ctx, func(time.Time) (map[int64]int64, error) {
		m := map[int64]int64{}
		for s, bk := range b.far.buckets {
			m[s] = bk.file.Size()
		}
		return m, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sizes) != buckets {
		t.Fatalf("%d buckets, want %d", len(sizes), buckets)
	}
	mu.Lock()
	defer mu.Unlock()
	for start, size := range sizes {
		rs := handed[start]
		slices.SortFunc(rs, func(a, b farstore.Range) int { return int(a.From - b.From) })
		at := int64(0)
		for _, r := range rs {
			if r.From != at || r.To <= r.From || r.To%farPage != 0 {
				t.Fatalf("bucket %d: handed %v; want contiguous whole pages from 0", start, rs)
			}
			at = r.To
		}
		if want := size &^ (farPage - 1); at != want || len(rs) < 2 {
			t.Fatalf("bucket %d of %d bytes: handed up to %d in %d ranges, want up to %d in two or more", start, size, at, len(rs), want)
		}
	}
}
