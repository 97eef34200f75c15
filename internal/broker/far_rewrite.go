package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chronoq/chronoq/internal/farstore"
)

// Rewriting a bucket (docs/architecture.md, "The far-future store"):
// buckets only grow, so one whose jobs keep being taken back (cancelled,
// updated, peeked) fills with dead items. Once they are more than half of
// its items (and at least farRewriteMinDead), its live items are copied
// off the loop into a file of the next generation, which replaces the
// old one on the loop.
//
// Durability: the new file is complete and synced before the loop
// switches to it, and the switch changes nothing on disk. Every snapshot
// names the generation it covers (the manifest), so until a snapshot
// begun after the switch has completed, a recovery uses the old
// generation, cut back to its recorded size as always, and deletes the
// new one as unlisted; after it, the new one. The old generation's file
// is deleted once two snapshots have completed after the switch (all
// that snapshot.Prune keeps), so no kept snapshot lists it. A crash at
// any step leaves the generation its snapshot lists intact: no job is
// lost, and no tombstone is lost (the log still restores the ones past
// the recorded size, rule 2).
//
// The copy runs in rounds off the loop while the loop keeps appending to
// the old file: the first copies the live items of the old file up to the
// size it had when the rewrite began; each later one copies, as they are,
// the blocks appended since. The switch is made on the loop when no block
// was appended since the last round; after farRewriteRounds rounds, the
// loop copies the last round's blocks itself (a few, not synced: the
// snapshot that first lists the new file syncs it, as every bucket).

// farRewriteMinDead is the least number of dead items that makes a bucket
// worth rewriting (a variable so tests can use small buckets); a far store
// reads it when it opens (farStore.minDead), so a test can change its own
// store's threshold on the loop.
var farRewriteMinDead = 1024

// farRewriteRounds bounds the rounds of copying off the loop.
const farRewriteRounds = 8

// farRewriteHook, when set (tests), is called at each step of a rewrite
// off the loop; returning false stops the rewrite there, leaving its
// files as a crash at that point would.
var farRewriteHook func(step farRewriteStep) bool

type farRewriteStep int

const (
	rewriteTorn   farRewriteStep = iota + 1 // one block of the new file written, not synced
	rewriteCopied                           // the new file complete and synced, not switched to
)

type farOld struct {
	gen   uint32
	snaps int // snapshots completed since the switch
}

// dropOldGens deletes the old generations of a bucket that no kept
// snapshot lists any more; called when a snapshot completes.
func (f *farStore) dropOldGens(bk *farBucket) {
	kept := bk.old[:0]
	for _, o := range bk.old {
		if o.snaps++; o.snaps < 2 {
			kept = append(kept, o)
			continue
		}
		if err := farstore.Remove(f.dir, bk.start, o.gen, false); err != nil {
			f.b.lg.Warn("far-future store: removing a rewritten bucket's old file failed", "err", err)
		}
	}
	bk.old = kept
	if len(bk.old) == 0 {
		bk.old = nil
	}
}

// maybeRewrite starts rewriting bk if its dead items call for it.
func (f *farStore) maybeRewrite(bk *farBucket) {
	if f.rewriting || bk.rewriting || bk.state != bucketOpen || bk.dead < f.minDead || bk.dead <= bk.jobs || f.b.failed.Load() != nil {
		return
	}
	f.rewriting, bk.rewriting = true, true
	f.flushBucket(bk) // the copy and its count of live jobs see held items
	rw := &farRewrite{f: f, bk: bk, start: bk.start, oldPath: bk.file.Path(), gen: bk.file.Gen() + 1, upTo: bk.file.Size()}
	f.rwWG.Add(1)
	go rw.run()
}

type farRewrite struct {
	f       *farStore
	bk      *farBucket // touched on the loop only
	start   int64
	oldPath string
	gen     uint32
	upTo    int64 // bytes of the old file copied so far
	file    *farstore.File
	live    map[string]uint64 // key → sequence number of the live jobs
	items   int               // items written
	ids     farstore.Filter
	seqs    farstore.Filter
}

func (rw *farRewrite) run() {
	f := rw.f
	defer f.rwWG.Done()
	err := rw.copy()
	for round := 1; err == nil; round++ {
		var done bool
		to := rw.upTo
		// on the loop: switch if nothing was appended since the last
		// round (or copy the last round's blocks), else learn how far
		// the next round copies
		_, err = f.b.do(context.Background(), func(time.Time) (any, error) {
			bk := rw.bk
			if bk.state != bucketOpen || f.b.failed.Load() != nil {
				done = true // it is being taken back in: nothing to gain
				return nil, nil
			}
			f.flushBucket(bk)
			if to = bk.file.Size(); to != rw.upTo && round < farRewriteRounds {
				return nil, nil
			}
			if to != rw.upTo {
				if err := rw.catchUp(rw.upTo, to, false); err != nil {
					return nil, err
				}
			}
			if bk.jobs != len(rw.live) {
				return nil, fmt.Errorf("the copy holds %d live jobs, the bucket %d", len(rw.live), bk.jobs)
			}
			old := bk.file
			bk.file, rw.file = rw.file, nil
			bk.ids, bk.seqs = rw.ids, rw.seqs
			bk.dead = rw.items - len(rw.live)
			bk.sideSize = 0 // the side file describes the old generation
			bk.old = append(bk.old, farOld{gen: old.Gen()})
			old.Close()
			f.rewrites++
			f.releaseAllFiles()
			done = true
			return nil, nil
		})
		if done || err != nil {
			break
		}
		err = rw.catchUp(rw.upTo, to, true)
	}
	if errors.Is(err, errRewriteStopped) {
		return // as a crash there: the files stay as they are
	}
	failed := err != nil && !errors.Is(err, errClosed)
	if failed {
		f.b.lg.Warn("far-future store: rewriting a bucket failed; it keeps its old file and is not rewritten again until a restart", "bucket", rw.oldPath, "err", err)
		if errors.As(err, new(*farstore.DamageError)) {
			// the next start must read the bucket and apply the rules
			// for damage, not trust its side file
			_ = farstore.RemoveSide(f.dir, rw.start)
		}
	}
	if rw.file != nil { // not switched to: no snapshot lists it
		rw.file.Close()
		_ = farstore.Remove(f.dir, rw.start, rw.file.Gen(), false)
	}
	f.b.do(context.Background(), func(time.Time) (any, error) {
		f.rewriting, rw.bk.rewriting = false, failed
		if failed && errors.As(err, new(*farstore.DamageError)) {
			rw.bk.sideSize = -1 // no later snapshot writes it again
		}
		return nil, nil
	})
}

// copy writes the live items of the old file up to upTo into the new
// file (first round, off the loop).
func (rw *farRewrite) copy() error {
	var items [][]byte
	idx := map[string]int{}
	rw.live = map[string]uint64{}
	err := farstore.Read(rw.oldPath, rw.upTo, func(off int64, item []byte) error {
		it, err := decodeFarItem(item)
		if err != nil {
			return &farstore.DamageError{File: rw.oldPath, Offset: off, Reason: err.Error()}
		}
		if i, ok := idx[it.key]; ok {
			items[i] = nil
			delete(idx, it.key)
			delete(rw.live, it.key)
		}
		if it.tomb {
			return nil
		}
		idx[it.key] = len(items)
		items = append(items, bytes.Clone(item))
		rw.live[it.key] = it.rec.Job.Seq
		return nil
	})
	if err != nil {
		return err
	}
	if rw.file, err = farstore.Create(rw.f.dir, rw.start, rw.gen); err != nil {
		return err
	}
	const perBlock = 1024
	block := make([][]byte, 0, perBlock)
	blocks := 0
	flush := func() error {
		if len(block) == 0 {
			return nil
		}
		if err := rw.file.Append(block); err != nil {
			return err
		}
		rw.items += len(block)
		block = block[:0]
		if blocks++; blocks == 1 && farRewriteHook != nil && !farRewriteHook(rewriteTorn) {
			return errRewriteStopped
		}
		return nil
	}
	for _, it := range items {
		if it == nil {
			continue
		}
		if block = append(block, it); len(block) == perBlock {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	if err := rw.file.Sync(); err != nil {
		return err
	}
	if farRewriteHook != nil && !farRewriteHook(rewriteCopied) {
		return errRewriteStopped
	}
	// sized to the live jobs; the jobs later rounds copy are added
	rw.ids, rw.seqs = farstore.Sized(len(rw.live)), farstore.Sized(len(rw.live))
	for key, seq := range rw.live {
		rw.ids.Add(rw.f.hash(key))
		rw.seqs.Add(rw.f.seqHash(seq))
	}
	return nil
}

var errRewriteStopped = errors.New("rewrite stopped by the test hook")

// catchUp copies the blocks appended to the old file between from and to
// (as they are: jobs and tombstones) into the new file, and syncs it when
// sync (off the loop).
func (rw *farRewrite) catchUp(from, to int64, sync bool) error {
	var items [][]byte
	err := farstore.ReadFrom(rw.oldPath, from, to, func(off int64, item []byte) error {
		it, err := decodeFarItem(item)
		if err != nil {
			return &farstore.DamageError{File: rw.oldPath, Offset: off, Reason: err.Error()}
		}
		if it.tomb {
			delete(rw.live, it.key)
		} else {
			rw.live[it.key] = it.rec.Job.Seq
			rw.ids.Add(rw.f.hash(it.key))
			rw.seqs.Add(rw.f.seqHash(it.rec.Job.Seq))
		}
		items = append(items, bytes.Clone(item))
		return nil
	})
	if err != nil {
		return err
	}
	if err := rw.file.Append(items); err != nil {
		return err
	}
	rw.items += len(items)
	rw.upTo = to
	if sync {
		return rw.file.Sync()
	}
	return nil
}
