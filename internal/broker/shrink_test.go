package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// After most jobs of a peak are gone, the loop shrinks the job table
// between batches by itself, and nothing is lost: the jobs left answer
// before and after a restart.
func TestJobTableShrinksAfterAPeak(t *testing.T) {
	if testing.Short() {
		t.Skip("fills five chunks of the job table")
	}
	dir := t.TempDir()
	b := open(t, dir, 0)
	ctx := context.Background()
	const n = 320_000 // five chunks of the job table
	batch := make([]engine.PutRequest, 0, 1000)
	for i := 0; i < n; i += cap(batch) {
		batch = batch[:0]
		for k := i; k < i+cap(batch); k++ {
			req := engine.PutRequest{Payload: []byte("x"), Tags: map[string]string{"g": "drop"}}
			if k%10 == 0 {
				req.Tags = nil
				req.ID = fmt.Sprintf("keep-%d", k)
			}
			batch = append(batch, req)
		}
		if _, err := b.PutBatch(ctx, "default", "q", batch); err != nil {
			t.Fatal(err)
		}
	}
	st, err := b.JobTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	peak := st.Bytes
	if st.Shrinking {
		t.Fatal("a full table is due to shrink")
	}
	if _, err := b.CancelByFilter(ctx, "default", "q", engine.Filter{Tags: map[string]string{"g": "drop"}}); err != nil {
		t.Fatal(err)
	}
	// every request is a loop turn, and a turn moves a bounded number of jobs
	st.Shrinking = true
	for turn := 0; turn < 1000 && st.Shrinking; turn++ {
		if st, err = b.JobTable(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if st.Shrinking || st.Bytes >= peak/2 {
		t.Fatalf("job table %d bytes after the drain (shrinking %v), %d at the peak", st.Bytes, st.Shrinking, peak)
	}
	want := dump(t, b)
	if len(want) != n/10+1 {
		t.Fatalf("%d jobs listed, want %d", len(want)-1, n/10)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = open(t, dir, 0)
	defer b.Close()
	got := dump(t, b)
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("after the restart %s is %q, was %q", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d entries after the restart, %d before", len(got), len(want))
	}
}

// A turn's count halves after a turn over budget, doubles after one under
// half of it, and stays within its bounds.
func TestPacedTurns(t *testing.T) {
	over, under, near := 3*compactBudget, compactBudget/4, compactBudget*3/4
	for _, c := range []struct {
		n    int
		took time.Duration
		want int
	}{
		{0, 0, 4096}, {4096, over, 2048}, {300, over, 256}, {256, over, 256},
		{1000, under, 2000}, {3000, under, 4096}, {1000, near, 1000}, {1000, 0, 1000},
	} {
		if got := paced(c.n, 256, 4096, c.took); got != c.want {
			t.Errorf("paced(%d, %s) = %d, want %d", c.n, c.took, got, c.want)
		}
	}
}
