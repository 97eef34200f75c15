package broker

import (
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/wal"
)

func TestReclaimPacer(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	// one call of wait: at t0+at, the log having written written bytes,
	// for a file of size bytes; want: the wait it must answer
	type step struct {
		at            time.Duration
		written, size int64
		low           bool
		want          time.Duration
	}
	seg := func(at time.Duration, want time.Duration) step { return step{at: at, size: 64 * mib, want: want} }
	for _, c := range []struct {
		name  string
		rate  float64
		steps []step
	}{
		{"a burst, then the rate", 32 * mib, []step{
			seg(0, 0), seg(0, 2*time.Second), seg(time.Second, time.Second), seg(2*time.Second, 0),
		}},
		{"idle credit is capped at the burst", 32 * mib, []step{
			seg(0, 0), seg(time.Hour, 0), seg(time.Hour, 2*time.Second),
		}},
		{"the log's write rate raises the pace", 1 * mib, []step{
			seg(0, 0),
			// 32 MiB written in a second: credit 2 × 32 MiB, not 1 MiB
			{at: time.Second, written: 32 * mib, size: 64 * mib, want: 0},
			// 1 MiB written in the next: credit 2 MiB, 62 MiB short
			{at: 2 * time.Second, written: 33 * mib, size: 64 * mib, want: 62 * time.Second},
		}},
		{"a large file leaves a debt", 32 * mib, []step{
			{size: 640 * mib, want: 0},
			// 576 MiB owed, then 64 MiB for the next segment: 20 s
			seg(0, 20*time.Second),
		}},
		{"short of space, files go at once and cost nothing", 32 * mib, []step{
			{size: 64 * mib, low: true}, {size: 64 * mib, low: true}, {size: 640 * mib, low: true},
			seg(0, 0), // the burst is still there
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := reclaimPacer{rate: c.rate, burst: reclaimBurst}
			for i, st := range c.steps {
				if d := p.wait(t0.Add(st.at), st.written, st.size, st.low); d != st.want {
					t.Fatalf("step %d (%+v): wait %s, want %s", i, st, d, st.want)
				}
			}
		})
	}
}

// TestReclaimOneSegmentAtATime: with a pace that allows one segment and
// then a wait of hours, exactly the oldest emptied segment goes while the
// others due stay; Close ends the wait instead of sitting it out, and
// the next start (removing at once) takes the rest.
func TestReclaimOneSegmentAtATime(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Dir: dir, Logger: quiet, SnapshotBytes: 128 << 10, ReclaimRate: 1,
		WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}}
	b, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	b.snap.pacer.burst = 1 // the first file goes, the next owes ~18 hours
	consumed(t, b, 200)    // ~400 KB of consumed jobs: several emptied segments
	var first, due uint32
	untilOnLoop(t, b, "no segment was removed", func() bool {
		first, due = b.log.Segments()[0].Number, b.snap.goneBelow
		return first > 1
	})
	if first != 2 || due < 3 {
		t.Fatalf("first segment %d, segments below %d due: want only segment 1 gone while more are due", first, due)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close waited out the removal pace")
	}

	opts.ReclaimRate = -1
	b, err = Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	untilOnLoop(t, b, "the segments due were not removed after the restart", func() bool {
		if b.snap.dropAgain || !b.snap.dropSegments(b) {
			return false
		}
		return b.log.Segments()[0].Number >= due
	})
}
