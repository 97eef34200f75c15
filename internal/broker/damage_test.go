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
	refused, dead atomic.Int64
}

func (c *damageCounter) Damage(event string, n int) {
	switch event {
	case "read_refused":
		c.refused.Add(int64(n))
	case "job_dead_lettered":
		c.dead.Add(int64(n))
	}
}

func openObserved(t *testing.T, dir string, obs Observer) *Broker {
	t.Helper()
	b, err := Open(Options{Dir: dir, Logger: quiet, Observer: obs, WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
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

// A payload damaged in a segment before the newest snapshot — where it is
// not replayed — is found at start: the job is dead-lettered (naming the
// file and offset) through the log, and no read serves the altered bytes.
func TestDamagedPayloadBeforeSnapshotFoundAtStart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b := open(t, dir, 0)
	// Enough to fill a few 64 KiB segments: the victim's segment then
	// lies wholly before the snapshot Close writes.
	ids := putN(t, b, 600)
	victim, err := b.Peek(ctx, "default", "q", ids[5])
	if err != nil {
		t.Fatal(err)
	}
	if victim.Payload.Segment != 1 {
		t.Fatalf("victim in segment %d", victim.Payload.Segment)
	}
	if err := b.Close(); err != nil { // writes a snapshot after every put
		t.Fatal(err)
	}
	path := flipPayloadByte(t, dir, victim.Payload)

	obs := &damageCounter{}
	b = openObserved(t, dir, obs)
	j, err := b.Peek(ctx, "default", "q", ids[5])
	if err != nil {
		t.Fatalf("peek of the dead-lettered job: %v", err)
	}
	// The damaged payload is dropped: an empty (JSON null) payload remains.
	if j.State != engine.StateDead || !strings.Contains(j.LastError, path) || (len(j.Data) != 0 && string(j.Data) != "null") {
		t.Fatalf("damaged job at start: state %v, error %q, data %q", j.State, j.LastError, j.Data)
	}
	if bytes.Contains(j.Data, []byte("job")) {
		t.Fatal("altered payload served")
	}
	if obs.dead.Load() != 1 {
		t.Fatalf("dead-lettered metric %d", obs.dead.Load())
	}
	for i, id := range ids {
		if i == 5 {
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
	if j, err := b.Peek(ctx, "default", "q", ids[5]); err != nil || j.State != engine.StateDead || !strings.Contains(j.LastError, path) {
		t.Fatalf("after replay: %v %v %q", j.State, err, j.LastError)
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
