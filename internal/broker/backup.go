package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/farstore"
	"github.com/chronoq/chronoq/internal/snapshot"
	"github.com/chronoq/chronoq/internal/wal"
)

// An online backup is a snapshot plus the log it needs, taken while
// writes go on (docs/operations.md, "Backup and restore").
//
// The snapshot is an ordinary fuzzy snapshot (snapshotter.go): it starts
// at log position Start and its items are taken over many loop turns.
// When the last item has been taken the loop notes the log's end, Cut.
// Replaying the log from Start to Cut over the snapshot gives exactly the
// state the server had at Cut, so the backup holds precisely the changes
// logged before Cut: every change acknowledged before the backup was asked
// for (the request reaches the loop after them, and Cut comes after the
// request), and changes acknowledged while the snapshot was being written
// only if their records lie before Cut. Nothing after Cut is in it.
//
// The backup also carries every older segment still on disk: payloads are
// written once, and a job's payload may live in a segment older than
// Start (docs/architecture.md, "The log").
//
// With the far-future store on (far.go), the snapshot's first item lists
// every bucket file and the size of it the snapshot covers; the backup
// carries those files cut at those sizes. A bucket file only grows, and a
// listed one is not deleted before the snapshot after the next completes,
// nor while a backup links bucket files (off the loop, right after its
// snapshot commits), so those hard links pin exactly the bytes the
// snapshot names, even if the bucket is rewritten or taken back in during
// the copy.

// BackupSet is one backup ready to be copied: the files and how many
// bytes of each belong to it. Release it when the copy is done.
type BackupSet struct {
	Start    wal.Position // the snapshot's replay position
	Cut      wal.Position // the log end when the snapshot was complete
	Jobs     int          // live jobs at Cut
	Snapshot string       // a link to the snapshot file, private to this backup
	Segments []BackupSegment
	Far      []BackupBucket // far-future bucket files (links private to this backup)
	Took     time.Duration  // writing the snapshot

	b  *Broker
	id uint64
}

// BackupSegment is a log segment and the length that belongs to the backup.
type BackupSegment struct {
	Number uint32
	Path   string
	Size   int64
}

// BackupBucket is a far-future bucket file and the length of it that the
// backup's snapshot covers.
type BackupBucket struct {
	Name string // its file name in the data directory's far/
	Path string // a link to it, private to this backup
	Size int64
}

// backups tracks running backups: each pins the log segments it copies,
// so a snapshot finishing meanwhile does not delete them.
type backups struct {
	mu     sync.Mutex
	nextID uint64
	pins   map[uint64]uint32 // backup → lowest segment it needs
}

// minPin is the lowest segment a running backup needs (ok false: none).
func (bk *backups) minPin() (uint32, bool) {
	bk.mu.Lock()
	defer bk.mu.Unlock()
	lo, ok := uint32(0), false
	for _, s := range bk.pins {
		if !ok || s < lo {
			lo, ok = s, true
		}
	}
	return lo, ok
}

// backupWaiter is a backup request waiting for its snapshot.
type backupWaiter struct {
	id  uint64
	res chan backupResult
}

type backupResult struct {
	set *BackupSet
	err error
}

func (b *Broker) backupDir() string { return filepath.Join(b.opts.Dir, "backup") }

// Backup takes a fresh snapshot while writes continue, the snapshotter's
// usual bounded work per loop turn, and returns the files of a consistent
// copy. ctx bounds the wait; the snapshot itself is not abandoned.
func (b *Broker) Backup(ctx context.Context) (*BackupSet, error) {
	if err := b.Ready(); err != nil {
		return nil, err
	}
	bk := &b.snap.bk
	bk.mu.Lock()
	if bk.pins == nil {
		bk.pins = map[uint64]uint32{}
	}
	bk.nextID++
	id := bk.nextID
	bk.pins[id] = 0 // everything, until the loop knows the oldest segment
	bk.mu.Unlock()
	if err := b.clearStaleBackups(); err != nil {
		b.unpin(id)
		return nil, err
	}
	w := backupWaiter{id: id, res: make(chan backupResult, 1)}
	_, err := b.do(ctx, func(time.Time) (any, error) {
		if segs := b.log.Segments(); len(segs) > 0 {
			bk.mu.Lock()
			bk.pins[id] = segs[0].Number
			bk.mu.Unlock()
		}
		b.snap.want = append(b.snap.want, w)
		return nil, nil
	})
	if err != nil {
		b.unpin(id)
		return nil, err
	}
	select {
	case r := <-w.res:
		if r.err != nil {
			b.unpin(id)
			return nil, r.err
		}
		return r.set, nil
	case <-b.done:
		b.unpin(id)
		return nil, errClosed
	case <-ctx.Done():
		go func() { // the loop answers eventually; free what it made
			if r := <-w.res; r.set != nil {
				r.set.Release()
			} else {
				b.unpin(id)
			}
		}()
		return nil, ctx.Err()
	}
}

// Release removes the backup's links and unpins its segments.
func (s *BackupSet) Release() {
	if s.Snapshot != "" {
		os.Remove(s.Snapshot)
	}
	for _, f := range s.Far {
		os.Remove(f.Path)
	}
	s.b.unpin(s.id)
}

func (b *Broker) unpin(id uint64) {
	b.snap.bk.mu.Lock()
	delete(b.snap.bk.pins, id)
	b.snap.bk.mu.Unlock()
}

// clearStaleBackups removes snapshot links left by backups of an earlier
// run (a crash during the copy); those of running backups stay.
func (b *Broker) clearStaleBackups() error {
	ents, err := os.ReadDir(b.backupDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	b.snap.bk.mu.Lock()
	defer b.snap.bk.mu.Unlock()
	for _, e := range ents {
		idStr, _, _ := strings.Cut(e.Name(), "-")
		if id, err := strconv.ParseUint(idStr, 10, 64); err == nil {
			if _, running := b.snap.bk.pins[id]; running {
				continue
			}
		}
		os.Remove(filepath.Join(b.backupDir(), e.Name()))
	}
	return nil
}

// backupsTaken hands the snapshot just committed to the backups waiting
// for it (on the loop, before old snapshots are pruned): each gets a hard
// link of its own, so pruning cannot take the file away mid-copy.
func (s *snapshotter) backupsTaken(b *Broker, err error) {
	taking := s.taking
	s.taking = nil
	if len(taking) == 0 {
		return
	}
	if err != nil {
		for _, w := range taking {
			w.res <- backupResult{err: fmt.Errorf("backup: snapshot failed: %w", err)}
		}
		return
	}
	src := filepath.Join(b.snapDir(), snapshot.Name(s.pos))
	var segs []BackupSegment
	for _, seg := range b.log.Segments() {
		switch {
		case seg.Number < s.goneBelow:
			// being removed (dropSegments): nothing live is in it
		case seg.Number < s.cut.Segment:
			segs = append(segs, BackupSegment{Number: seg.Number, Path: seg.Path, Size: seg.Size})
		case seg.Number == s.cut.Segment:
			segs = append(segs, BackupSegment{Number: seg.Number, Path: seg.Path, Size: int64(s.cut.Offset)})
		}
	}
	for _, w := range taking {
		set := &BackupSet{Start: s.pos, Cut: s.cut, Jobs: s.cutJobs, Segments: segs, Took: b.now().Sub(s.started), b: b, id: w.id}
		if err := os.MkdirAll(b.backupDir(), 0o700); err != nil {
			w.res <- backupResult{err: fmt.Errorf("backup: %w", err)}
			continue
		}
		link := filepath.Join(b.backupDir(), fmt.Sprintf("%d-%s", w.id, snapshot.Name(s.pos)))
		if err := os.Link(src, link); err != nil {
			w.res <- backupResult{err: fmt.Errorf("backup: link snapshot: %w", err)}
			continue
		}
		set.Snapshot = link
		if len(s.far) == 0 {
			w.res <- backupResult{set: set}
			continue
		}
		// Linking 17 000 bucket files takes ~0.3 s: off the loop, while
		// the far store deletes no bucket file (far.snapshotDone).
		b.far.linking.Add(1)
		go func(w backupWaiter, listed []farListed) {
			defer b.far.linking.Add(-1)
			if err := linkFar(b, set, listed); err != nil {
				set.Release()
				w.res <- backupResult{err: err}
				return
			}
			w.res <- backupResult{set: set}
		}(w, slices.Clone(s.far))
	}
}

// linkFar links the bucket files the snapshot's far manifest lists into
// the backup directory. The far store deletes no bucket file while it runs
// (farStore.linking), so every listed file is still there.
func linkFar(b *Broker, set *BackupSet, listed []farListed) error {
	for _, l := range listed {
		name := farstore.Name(l.start, l.gen)
		link := filepath.Join(b.backupDir(), fmt.Sprintf("%d-far-%s", set.id, name))
		if err := os.Link(filepath.Join(b.far.dir, name), link); err != nil {
			return fmt.Errorf("backup: link far-future bucket: %w", err)
		}
		set.Far = append(set.Far, BackupBucket{Name: name, Path: link, Size: l.size})
	}
	return nil
}

// failBackups answers every waiting backup with err (a snapshot that
// could not start or failed, or shutdown).
func (s *snapshotter) failBackups(err error) {
	for _, w := range s.want {
		w.res <- backupResult{err: fmt.Errorf("backup: %w", err)}
	}
	s.want = nil
}
