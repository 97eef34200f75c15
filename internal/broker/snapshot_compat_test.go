package broker

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/snapshot"
)

// A snapshot written before job chunks existed — format version 1, every
// job an encoded entry — still loads: an upgrade needs nothing but the
// new binary, and its first snapshot is written in the new format.
func TestVersion1SnapshotStillLoads(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, 1<<40)
	churn(t, b, rand.New(rand.NewPCG(5, 6)), 2000)
	holdCompactor(t, b)
	want := dump(t, b)
	// write a version-1 snapshot of the current state, the way builds
	// before job chunks did
	path := writeSnapshotBy(t, b, func(w *snapshot.Writer, it *engine.SnapshotIter) error {
		for ent := it.Next(100); ent != nil; ent = it.Next(100) {
			if err := w.Add(ent.Encode(nil)); err != nil {
				return err
			}
		}
		return nil
	})
	b.skipFinalSnapshot = true
	b.Close()
	setFooterVersion(t, path, 1)
	snaps, _ := snapshot.List(b.snapDir())
	for _, s := range snaps {
		if s.Path != path {
			os.Remove(s.Path)
		}
	}

	b = open(t, dir, 1<<40)
	if b.recovered.Records != 0 {
		t.Fatalf("replayed %d records: the version-1 snapshot was not used", b.recovered.Records)
	}
	same(t, want, dump(t, b))
	// A change, so that the stop writes a snapshot: one of a state
	// unchanged since the last is skipped. (This relied on compaction
	// re-logging something before the stop, which it need not.)
	if _, err := b.Put(context.Background(), "default", "v1-upgraded", engine.PutRequest{Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	want = dump(t, b)
	b.Close() // writes a new snapshot, in the current format
	snaps, _ = snapshot.List(filepath.Join(dir, "snap"))
	if v := footerVersion(t, snaps[0].Path); v != 2 {
		t.Fatalf("new snapshot has format version %d", v)
	}
	b = open(t, dir, 1<<40)
	same(t, want, dump(t, b))
	b.Close()
}

func footerVersion(t *testing.T, path string) uint32 {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return binary.LittleEndian.Uint32(b[len(b)-64+8:])
}

// setFooterVersion rewrites a snapshot's footer version (and its CRC;
// internal/snapshot/format.go has the layout).
func setFooterVersion(t *testing.T, path string, v uint32) {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ft := b[len(b)-64:]
	binary.LittleEndian.PutUint32(ft[8:], v)
	binary.LittleEndian.PutUint32(ft[60:], crc32.Checksum(ft[:60], crc32.MakeTable(crc32.Castagnoli)))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// A job chunk whose block checksum is right but whose content does not
// make sense (a bug, or another build's records) is refused naming the
// file, the block and its offset; recovery then falls back to the log.
func TestBadJobChunkRefusedWithFileAndOffset(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, 1<<40)
	churn(t, b, rand.New(rand.NewPCG(7, 8)), 500)
	want := dump(t, b)
	path := writeSnapshotBy(t, b, func(w *snapshot.Writer, it *engine.SnapshotIter) error {
		chunks := 0
		for {
			item, ok := it.NextItem(nil, 1024)
			if !ok {
				break
			}
			if engine.IsChunk(item) {
				chunks++
				item[2]++ // the record size: another build's layout
			}
			if err := w.Add(item); err != nil {
				return err
			}
		}
		if chunks == 0 {
			t.Error("no job chunk written")
		}
		return nil
	})
	b.skipFinalSnapshot = true
	b.Close()

	_, _, err := loadSnapshot(path)
	if !errors.Is(err, engine.ErrCorrupt) || !strings.Contains(err.Error(), path) ||
		!strings.Contains(err.Error(), "block 0 at offset 0") || !strings.Contains(err.Error(), "another version") {
		t.Fatalf("bad chunk: %v", err)
	}
	b = open(t, dir, 1<<40)
	if b.recovered.Records == 0 {
		t.Fatal("the bad snapshot was used")
	}
	same(t, want, dump(t, b))
	b.Close()
}

// writeSnapshotBy writes a snapshot of b's current state on its loop, its
// items produced by write (the way another build would), and answers the
// file's path.
// holdCompactor stops the loop's compactor from picking a segment (it
// picks once a second): once a snapshot covers the log it would re-log
// payloads after it, and a test that counts the records replayed after
// the snapshot would see them on a machine slow enough to reach a pick
// before Close.
func holdCompactor(t *testing.T, b *Broker) {
	t.Helper()
	if _, err := b.do(context.Background(), func(now time.Time) (any, error) {
		b.compact.nextPick = now.Add(time.Hour)
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func writeSnapshotBy(t *testing.T, b *Broker, write func(*snapshot.Writer, *engine.SnapshotIter) error) string {
	t.Helper()
	var path string
	_, err := b.do(context.Background(), func(time.Time) (any, error) {
		b.syncBarrier()
		w, err := snapshot.Create(b.snapDir(), b.log.End())
		if err != nil {
			return nil, err
		}
		if err := write(w, b.eng.Snapshot()); err != nil {
			w.Abort()
			return nil, err
		}
		info, err := w.Commit()
		path = info.Path
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}
