package broker

import (
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/wal"
)

func TestReclaimPacer(t *testing.T) {
	const mib = 1 << 20
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	t.Run("a burst, then the rate", func(t *testing.T) {
		p := reclaimPacer{rate: 32 * mib, burst: reclaimBurst}
		if d := p.wait(at(0), 0, 64*mib, false); d != 0 {
			t.Fatalf("first segment after a quiet spell waits %s", d)
		}
		if d := p.wait(at(0), 0, 64*mib, false); d != 2*time.Second {
			t.Fatalf("second segment at once: wait %s, want 2s", d)
		}
		if d := p.wait(at(time.Second), 0, 64*mib, false); d != time.Second {
			t.Fatalf("a second later: wait %s, want 1s", d)
		}
		if d := p.wait(at(2*time.Second), 0, 64*mib, false); d != 0 {
			t.Fatalf("two seconds later: wait %s", d)
		}
	})

	t.Run("idle credit is capped at the burst", func(t *testing.T) {
		p := reclaimPacer{rate: 32 * mib, burst: reclaimBurst}
		p.wait(at(0), 0, 64*mib, false)
		if d := p.wait(at(time.Hour), 0, 64*mib, false); d != 0 {
			t.Fatalf("after an hour: wait %s", d)
		}
		if d := p.wait(at(time.Hour), 0, 64*mib, false); d != 2*time.Second {
			t.Fatalf("an hour's credit was kept: second segment waits %s, want 2s", d)
		}
	})

	t.Run("the log's write rate raises the pace", func(t *testing.T) {
		p := reclaimPacer{rate: 1 * mib, burst: reclaimBurst}
		p.wait(at(0), 0, 64*mib, false)
		// the log wrote 32 MiB in a second: credit 2 × 32 MiB, not 1 MiB
		if d := p.wait(at(time.Second), 32*mib, 64*mib, false); d != 0 {
			t.Fatalf("a log writing 32 MiB/s against a 1 MiB/s pace: wait %s", d)
		}
		if d := p.wait(at(2*time.Second), 33*mib, 64*mib, false); d == 0 {
			t.Fatal("a log that wrote 1 MiB in a second paid for a 64 MiB segment")
		}
	})

	t.Run("a large file leaves a debt", func(t *testing.T) {
		p := reclaimPacer{rate: 32 * mib, burst: reclaimBurst}
		if d := p.wait(at(0), 0, 640*mib, false); d != 0 {
			t.Fatalf("a large file with full credit waits %s", d)
		}
		// 576 MiB owed, then 64 MiB for the next segment: 20 s at 32 MiB/s
		if d := p.wait(at(0), 0, 64*mib, false); d != 20*time.Second {
			t.Fatalf("after a 640 MiB file: wait %s, want 20s", d)
		}
	})

	t.Run("short of space, files go at once and cost nothing", func(t *testing.T) {
		p := reclaimPacer{rate: 32 * mib, burst: reclaimBurst}
		for i := range 10 {
			if d := p.wait(at(0), 0, 64*mib, true); d != 0 {
				t.Fatalf("file %d waits %s with the disk short of space", i, d)
			}
		}
		if d := p.wait(at(0), 0, 64*mib, false); d != 0 {
			t.Fatalf("space back: the burst was spent by files removed for space (wait %s)", d)
		}
	})
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
