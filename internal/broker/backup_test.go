package broker

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/wal"
)

// jobLedger records what clients were told: puts and acks, in order.
type jobLedger struct {
	mu    sync.Mutex
	put   map[string]int // id → index in the order of answers
	acked map[string]int
	n     int
}

func (l *jobLedger) add(m map[string]int, id string) {
	l.mu.Lock()
	l.n++
	m[id] = l.n
	l.mu.Unlock()
}

// mark is the ledger's position now: everything with an index at or
// below it was answered before.
func (l *jobLedger) mark() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// takeBackup runs Backup and streams it into dir, as the admin route and
// `chronoq backup` do.
func takeBackup(t *testing.T, b *Broker, dir string) *BackupManifest {
	t.Helper()
	set, err := b.Backup(context.Background())
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	defer set.Release()
	pr, pw := io.Pipe()
	go func() { _, err := set.WriteTo(pw); pw.CloseWithError(err) }()
	m, err := ReceiveBackup(pr, dir)
	if err != nil {
		t.Fatalf("receive backup: %v", err)
	}
	return m
}

// TestBackupUnderLoad: producers and consumers run, a backup is taken,
// more writes follow, then the backup is restored into a new directory.
// The rule (backup.go): the restored server holds the state at the
// manifest's Cut, so every job put before the backup was requested is
// there unless its ack was answered before the backup finished; no job
// acked before the request is there; no job put after the backup finished
// is there; and the live job count is the manifest's.
func TestBackupUnderLoad(t *testing.T) {
	// one small chunk per loop turn: the snapshot spans many turns with
	// writes and acks in between, which is what the cut must get right
	defer func(c int, d time.Duration) { snapChunk, snapTurnBudget = c, d }(snapChunk, snapTurnBudget)
	snapChunk, snapTurnBudget = 64, 0
	dir := t.TempDir()
	// small segments and snapshots so regular snapshots and segment drops
	// run while the backup copies
	b, err := Open(Options{Dir: dir, Logger: quiet, SnapshotBytes: 256 << 10,
		WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	led := &jobLedger{put: map[string]int{}, acked: map[string]int{}}
	// a long-delayed job keeps its payload in the first segment, older
	// than any snapshot the backup takes
	hour := time.Hour
	old, err := b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte("old payload"), Delay: &hour})
	if err != nil {
		t.Fatal(err)
	}
	led.add(led.put, old.ID)
	// enough jobs that the backup's snapshot spans many loop turns with
	// writes in between (snapshotter.go's budget per turn)
	batch := make([]engine.PutRequest, 1000)
	for i := range batch {
		batch[i] = engine.PutRequest{Payload: []byte("preloaded")}
	}
	for range 10 {
		res, err := b.PutBatch(ctx, "default", "pre", batch)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			led.add(led.put, r.ID)
		}
	}

	var wg sync.WaitGroup
	var maxLat [2]time.Duration
	var latMu sync.Mutex
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				start := time.Now()
				res, err := b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(fmt.Sprintf("p%d-%d-%s", p, i, strings.Repeat("x", 200)))})
				if err != nil {
					return
				}
				latMu.Lock()
				maxLat[0] = max(maxLat[0], time.Since(start))
				latMu.Unlock()
				led.add(led.put, res.ID)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			jobs, err := b.Take(ctx, "default", engine.TakeRequest{Queues: []string{"q", "pre"}, Max: 5}, 0)
			if err != nil {
				return
			}
			for _, j := range jobs {
				if _, err := b.Ack(ctx, "default", j.Queue, j.ID, engine.AckRequest{Receipt: j.Receipt}); err != nil {
					return
				}
				led.add(led.acked, j.ID)
			}
			if len(jobs) == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	time.Sleep(300 * time.Millisecond)

	before := led.mark()
	bdir := filepath.Join(t.TempDir(), "backup")
	m := takeBackup(t, b, bdir)
	after := led.mark()
	time.Sleep(200 * time.Millisecond) // more writes after the backup
	cancel()
	wg.Wait()
	t.Logf("backup: %d jobs, start %v, cut %v, %d files; worst put latency under load %v", m.Jobs, m.Start, m.Cut, len(m.Files), maxLat[0])
	if len(m.Files) < 3 {
		t.Fatalf("backup has %d files; the test wants the log to span several segments", len(m.Files))
	}

	if _, err := VerifyBackup(bdir, io.Discard); err != nil {
		t.Fatalf("verify: %v", err)
	}
	ddir := filepath.Join(t.TempDir(), "restored")
	if _, err := RestoreBackup(bdir, ddir); err != nil {
		t.Fatalf("restore: %v", err)
	}
	r, err := Open(Options{Dir: ddir, Logger: quiet, WAL: wal.Options{SegmentSize: 64 << 10, Logger: quiet}})
	if err != nil {
		t.Fatalf("open restored: %v", err)
	}
	defer r.Close()
	if got := r.eng.Jobs(); got != m.Jobs {
		t.Fatalf("restored server has %d jobs, the manifest (state at cut) %d", got, m.Jobs)
	}
	present := func(id string) bool {
		_, err := r.Peek(context.Background(), "default", "q", id)
		if err != nil {
			_, err = r.Peek(context.Background(), "default", "pre", id)
		}
		return err == nil
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	checked := 0
	for id, at := range led.put {
		ack, wasAcked := led.acked[id]
		switch {
		case at <= before && (!wasAcked || ack > after):
			checked++
			if !present(id) {
				t.Fatalf("job %s, put before the backup and not acked by its end, is missing", id)
			}
		case wasAcked && ack <= before:
			if present(id) {
				t.Fatalf("job %s, acked before the backup, is in it", id)
			}
		case at > after:
			if present(id) {
				t.Fatalf("job %s, put after the backup finished, is in it", id)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d jobs put before the backup were checked", checked)
	}
	j, err := r.Peek(context.Background(), "default", "q", old.ID)
	if err != nil || string(j.Data) != "old payload" {
		t.Fatalf("the old delayed job after restore: %+v %v", j, err)
	}
	// the restored server takes writes
	if _, err := r.Put(context.Background(), "default", "q", engine.PutRequest{Payload: []byte("new")}); err != nil {
		t.Fatal(err)
	}
}

// TestBackupCorruptionRefused: a flipped byte in any backup file makes
// restore (and verify) fail, naming the file and the damaged range.
func TestBackupCorruptionRefused(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir, 1<<40)
	defer b.Close()
	ctx := context.Background()
	for i := range 3000 {
		if _, err := b.Put(ctx, "default", "q", engine.PutRequest{Payload: []byte(fmt.Sprintf("job %d %s", i, strings.Repeat("y", 300)))}); err != nil {
			t.Fatal(err)
		}
	}
	bdir := filepath.Join(t.TempDir(), "backup")
	m := takeBackup(t, b, bdir)
	for _, f := range m.Files {
		off := f.Size / 2
		if f.Size > BackupBlock+100 {
			off = BackupBlock + 100 // the second block
		}
		p := filepath.Join(bdir, filepath.FromSlash(f.Path))
		orig, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]byte(nil), orig...)
		bad[off] ^= 0x40
		os.WriteFile(p, bad, 0o600)
		blk := off / BackupBlock * BackupBlock
		want := fmt.Sprintf("%s: checksum mismatch in bytes %d..", f.Path, blk)
		_, err = RestoreBackup(bdir, filepath.Join(t.TempDir(), "r"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("restore of a backup with %s damaged at %d: %v, want %q", f.Path, off, err, want)
		}
		os.WriteFile(p, orig, 0o600)
	}
	// and a file cut short
	last := m.Files[len(m.Files)-1]
	p := filepath.Join(bdir, filepath.FromSlash(last.Path))
	orig, _ := os.ReadFile(p)
	os.Truncate(p, last.Size-10)
	if _, err := VerifyBackup(bdir, io.Discard); err == nil || !strings.Contains(err.Error(), last.Path) {
		t.Fatalf("verify of a truncated %s: %v", last.Path, err)
	}
	os.WriteFile(p, orig, 0o600)
	// a data dir that is not empty is refused before anything is written
	if _, err := RestoreBackup(bdir, dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a non-empty dir: %v", err)
	}
}
