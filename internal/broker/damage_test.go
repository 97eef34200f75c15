package broker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

type damageCounter struct {
	nopObserver
	refused, dead, scrubbed atomic.Int64
}

func (c *damageCounter) Damage(event string, n int) {
	switch event {
	case "read_refused":
		c.refused.Add(int64(n))
	case "job_dead_lettered":
		c.dead.Add(int64(n))
	case "scrub_damaged_range":
		c.scrubbed.Add(int64(n))
	}
}

func openObserved(t *testing.T, dir string, obs Observer) *Broker {
	t.Helper()
	return openScrubbing(t, dir, obs, 0)
}

func openScrubbing(t *testing.T, dir string, obs Observer, scrubRate int64) *Broker {
	t.Helper()
	b, err := Open(Options{Dir: dir, Logger: quiet, Observer: obs, ScrubRate: scrubRate, WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return b
}

// flipPayloadByte changes one byte of a job's stored payload on disk.
func flipPayloadByte(t *testing.T, dir string, ref engine.BlobRef) string {
	t.Helper()
	path := filepath.Join(dir, "wal", fmt.Sprintf("%020d.log", ref.Segment))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	off := int64(ref.Offset) + int64(ref.Len)/2
	f.ReadAt(b, off)
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
	return path
}

func putN(t *testing.T, b *Broker, n int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		res, err := b.Put(context.Background(), "default", "q", engine.PutRequest{Payload: []byte(fmt.Sprintf(`{"job":%d,"pad":"%0300d"}`, i, i)), PayloadJSON: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.ID)
	}
	return ids
}

// waitDead waits (bounded) until the job is dead-lettered with an error
// naming path, and returns it.
func waitDead(t *testing.T, b *Broker, id, path string) engine.Job {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := b.Peek(context.Background(), "default", "q", id)
		if err == nil && j.State == engine.StateDead {
			if !strings.Contains(j.LastError, path) {
				t.Fatalf("last error %q does not name %s", j.LastError, path)
			}
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not dead-lettered: %v %v", j.State, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// damageBeforeSnapshot puts jobs over a few 64 KiB segments, closes (the
// snapshot then covers the victim's segment, which is not replayed) and
// flips a byte of the victim's payload. It returns the ids, the victim's
// index and the damaged file.
func damageBeforeSnapshot(t *testing.T, dir string) ([]string, int, string) {
	t.Helper()
	b := open(t, dir, 0)
	ids := putN(t, b, 600)
	victim, err := b.Peek(context.Background(), "default", "q", ids[5])
	if err != nil {
		t.Fatal(err)
	}
	if victim.Payload.Segment != 1 {
		t.Fatalf("victim in segment %d", victim.Payload.Segment)
	}
	if err := b.Close(); err != nil { // writes a snapshot after every put
		t.Fatal(err)
	}
	return ids, 5, flipPayloadByte(t, dir, victim.Payload)
}

// A payload damaged in a segment before the newest snapshot — where it is
// not replayed, and not read at start — does not stop the start: the
// background scrub finds it, counts it, and the job is dead-lettered
// (naming the file and offset) through the log; no read serves the
// altered bytes.
func TestDamagedPayloadBeforeSnapshotFoundByScrub(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ids, v, path := damageBeforeSnapshot(t, dir)
	obs := &damageCounter{}
	b := openObserved(t, dir, obs)
	// No read before the scrub has done its work: it alone finds the damage.
	for deadline := time.Now().Add(10 * time.Second); obs.dead.Load() == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the scrub did not dead-letter the damaged job")
		}
	}
	j := waitDead(t, b, ids[v], path)
	// The damaged payload is dropped: an empty (JSON null) payload remains.
	if len(j.Data) != 0 && string(j.Data) != "null" {
		t.Fatalf("damaged job: data %q", j.Data)
	}
	if obs.scrubbed.Load() != 1 || obs.dead.Load() != 1 || obs.refused.Load() != 0 {
		t.Fatalf("metrics: scrub found %d ranges, %d dead-lettered, %d reads refused", obs.scrubbed.Load(), obs.dead.Load(), obs.refused.Load())
	}
	// The scrub goes on to the segments after the victim's once it has
	// dead-lettered the job: wait for it to finish them too.
	for deadline := time.Now().Add(10 * time.Second); len(b.log.Unchecked()) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("segments left unchecked by the scrub: %v", b.log.Unchecked())
		}
	}
	for i, id := range ids {
		if i == v {
			continue
		}
		if j, err := b.Peek(ctx, "default", "q", id); err != nil || j.State != engine.StateReady {
			t.Fatalf("intact job %d: %v %v", i, j.State, err)
		}
	}
	b.skipFinalSnapshot = true // the next start must replay the change
	b.Close()
	b = openObserved(t, dir, &damageCounter{})
	defer b.Close()
	if j, err := b.Peek(ctx, "default", "q", ids[v]); err != nil || j.State != engine.StateDead || !strings.Contains(j.LastError, path) {
		t.Fatalf("after replay: %v %v %q", j.State, err, j.LastError)
	}
}

// Without the scrub (or before it reaches the segment), the first read of
// the damaged payload runs the segment's check: the read is refused with
// the file named and the job is dead-lettered, as for damage found while
// running; the other jobs of that segment are served.
func TestDamagedPayloadBeforeSnapshotRefusedOnFirstRead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	ids, v, path := damageBeforeSnapshot(t, dir)
	obs := &damageCounter{}
	b := openScrubbing(t, dir, obs, -1)
	defer b.Close()
	if u := b.log.Unchecked(); len(u) == 0 || u[0] != 1 {
		t.Fatalf("start-up checked the old segments itself: unchecked %v", u)
	}
	if j, err := b.Peek(ctx, "default", "q", ids[v]); err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("peek of the damaged payload: state %v, data %q, err %v", j.State, j.Data, err)
	}
	waitDead(t, b, ids[v], path)
	// the count follows the loop's answer to the dead-lettering
	for deadline := time.Now().Add(10 * time.Second); obs.dead.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if obs.scrubbed.Load() != 1 || obs.dead.Load() != 1 {
		t.Fatalf("metrics: check found %d ranges, %d dead-lettered", obs.scrubbed.Load(), obs.dead.Load())
	}
	for i, id := range ids[:50] {
		if i == v {
			continue
		}
		if j, err := b.Peek(ctx, "default", "q", id); err != nil || j.State != engine.StateReady || !bytes.Contains(j.Data, []byte("job")) {
			t.Fatalf("intact job %d: %v %v", i, j.State, err)
		}
	}
}

// Damage that happens while the server runs is caught by the read: it is
// refused with the file named, counted, and the job is dead-lettered.
func TestDamagedPayloadRefusedOnRead(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	obs := &damageCounter{}
	b := openObserved(t, dir, obs)
	defer b.Close()
	ids := putN(t, b, 10)
	victim, err := b.Peek(ctx, "default", "q", ids[3])
	if err != nil {
		t.Fatal(err)
	}
	path := flipPayloadByte(t, dir, victim.Payload)
	_, err = b.Peek(ctx, "default", "q", ids[3])
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("peek of a damaged payload: %v", err)
	}
	// The refused peek queued the dead-lettering; a take either runs before
	// it (and is refused: its batch holds the damaged payload) or after it
	// (and serves the intact jobs only). It never serves the damaged one.
	if jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q"}, Max: 10}, 0); err == nil {
		for _, j := range jobs {
			if j.ID == ids[3] {
				t.Fatalf("take served the job whose payload is damaged: %q", j.Data)
			}
		}
	}
	if obs.refused.Load() < 1 {
		t.Fatal("refused read not counted")
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		j, err := b.Peek(ctx, "default", "q", ids[3])
		if err == nil && j.State == engine.StateDead && obs.dead.Load() > 0 {
			if !strings.Contains(j.LastError, path) {
				t.Fatalf("last error %q", j.LastError)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job not dead-lettered: %v %v", j.State, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if obs.dead.Load() != 1 {
		t.Fatalf("dead-lettered metric %d", obs.dead.Load())
	}
}
