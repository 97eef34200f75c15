package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// hintsOf returns the load hints of a snapshot's metadata item (nil when
// it has none) and the item re-encoded without them, as a build from
// before the hints wrote it.
func hintsOf(t *testing.T, meta []byte) (*LoadHints, []byte) {
	t.Helper()
	ent, err := DecodeEntry(meta, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var h *LoadHints
	old := &Entry{Time: ent.Time}
	for i := range ent.Records {
		r := ent.Records[i]
		if r.Kind == KindLoadHints {
			h = r.Hints
			continue
		}
		old.Records = append(old.Records, r)
	}
	return h, old.Encode(nil)
}

// loadBulk loads snapshot items the way the broker's restart does, into
// an engine whose slab the snapshot's job count sizes.
func loadBulk(t *testing.T, items [][]byte, reserve int) *Engine {
	t.Helper()
	return loadBulkEach(t, items, reserve, nil)
}

// loadBulkEach is loadBulk calling each (when not nil) after item i.
func loadBulkEach(t *testing.T, items [][]byte, reserve int, each func(i int, r *Engine)) *Engine {
	t.Helper()
	r := New(Options{Seed: 7, ReserveLimit: reserve})
	r.StartBulkLoad()
	for i, b := range items {
		if !IsChunk(b) {
			r.FinishBulkLoad()
		}
		if err := r.LoadItem(b); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
		r.StartBulkLoad()
		if each != nil {
			each(i, r)
		}
	}
	r.FinishBulkLoad()
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	return r
}

func stateHash(t *testing.T, e *Engine) [32]byte {
	t.Helper()
	h, err := e.StateHash(func(r BlobRef) ([]byte, error) { return []byte(fmt.Sprint(r)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// hintsFixture: keyed, tagged, client-id, reserved and taken-before jobs,
// and jobs whose sequence numbers thinned out enough to sit in the
// sequence index's overflow table, more of them than a slab chunk holds,
// so a snapshot's chunks (1000 jobs, not a divisor of the slab chunk)
// straddle slab chunks.
func hintsFixture(t *testing.T) *fixture {
	f := chunkFixture(t)
	hour := time.Hour
	var ids []string
	for i := 0; i < chunkSize+5000; i++ {
		req := PutRequest{Payload: []byte(fmt.Sprint(i))}
		if i%10 == 0 {
			req.Key = fmt.Sprint("user:", i%97)
		}
		if i%20 == 0 {
			req.Tags = map[string]string{"tenant": fmt.Sprint(i % 11)}
		}
		if i%2 == 0 {
			req.Delay = &hour
		}
		if i%7 == 0 {
			req.ID = fmt.Sprint("client-", i)
		}
		ids = append(ids, f.put("h", req).ID)
	}
	// nine in ten of a page's numbers gone: the rest go to the overflow table
	for i := seqPageLen; i < 4*seqPageLen; i++ {
		if i%10 != 0 {
			if err := f.e.Cancel(f.now, "default", "h", ids[i], ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	// jobs cancelled early give their slots to keyed jobs put last: in
	// slot order (a snapshot's order) these come before older jobs of
	// their keys, whose chains must still be in seq order
	for _, j := range ids[:3000] {
		if err := f.e.Cancel(f.now, "default", "h", j, ""); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 2000; i++ {
		f.put("h", PutRequest{Key: fmt.Sprint("user:", i%97)})
	}
	ttr := time.Minute
	if _, err := f.e.Take(f.now, "default", TakeRequest{Queues: []string{"h"}, Max: 50, TTR: &ttr}); err != nil {
		t.Fatal(err)
	}
	return f
}

// A snapshot's metadata carries the sizes of the tables its jobs fill,
// a bulk load sizes them from it, and the result is the engine the
// snapshot came from.
func TestLoadHintsSizeTheTables(t *testing.T) {
	f := hintsFixture(t)
	items := chunkItems(t, f.e, 1000)
	h, _ := hintsOf(t, items[0])
	if h == nil {
		t.Fatal("the snapshot's metadata has no load hints")
	}
	tagged := 0
	for _, set := range f.e.tagIndex {
		tagged += len(set)
	}
	want := LoadHints{Keys: uint64(len(f.e.keys.ids)), Exts: uint64(f.e.exts.len()), ExtBytes: uint64(f.e.exts.live),
		Tags: uint64(len(f.e.tagIndex)), Tagged: uint64(tagged), Reserved: uint64(len(f.e.resv)), Attempts: uint64(len(f.e.attempts)),
		SeqOver: uint64(f.e.seqs.over.n), IDs: uint64(f.e.ids.n)}
	if *h != want || h.Keys < 90 || h.Tags < 11 || h.Reserved < 50 || h.Attempts == 0 || h.SeqOver < 1000 || h.IDs < 1000 {
		t.Fatalf("hints %+v, want %+v", *h, want)
	}

	r := New(Options{Seed: 7, ReserveLimit: 1 << 30})
	if err := r.LoadItem(items[0]); err != nil {
		t.Fatal(err)
	}
	if cap(r.keys.keys) < int(h.Keys)+1 || cap(r.keys.refs) < int(h.Keys)+1 || r.hints.tags != int(h.Tags) || r.hints.perTag != int(h.Tagged/h.Tags) {
		t.Fatalf("after the metadata: key table for %d keys, tag hints %+v; hints %+v", cap(r.keys.keys), r.hints, *h)
	}
	// the slot tables hold what the hints say without growing
	if len(r.seqs.over.slots)*3 < int(h.SeqOver)*4 || len(r.ids.slots)*3 < int(h.IDs)*4 {
		t.Fatalf("after the metadata: overflow table of %d for %d jobs, id table of %d for %d",
			len(r.seqs.over.slots), h.SeqOver, len(r.ids.slots), h.IDs)
	}

	bulk := loadBulk(t, items, 1<<30)
	if got, want := stateHash(t, bulk), stateHash(t, f.e); got != want {
		t.Fatal("the engine a hinted bulk load built hashes differently from the one that wrote the snapshot")
	}
	compareEngines(t, f.e, bulk, f.now)
}

// A snapshot written before the hints existed (its metadata has no such
// record) loads as before, the tables growing as jobs arrive.
func TestSnapshotWithoutLoadHintsLoads(t *testing.T) {
	f := hintsFixture(t)
	items := chunkItems(t, f.e, 1000)
	h, old := hintsOf(t, items[0])
	if h == nil {
		t.Fatal("no hints to leave out")
	}
	items[0] = old
	if h2, _ := hintsOf(t, old); h2 != nil {
		t.Fatal("the old-format metadata still has hints")
	}
	for _, reserve := range []int{0, 1 << 30} {
		r := loadBulk(t, items, reserve)
		if got, want := stateHash(t, r), stateHash(t, f.e); got != want {
			t.Fatalf("reserve limit %d: a snapshot without hints loads into another state", reserve)
		}
	}
}

// Damaged or implausible counts size nothing beyond the slab the
// snapshot's job count sized (itself bounded by the snapshot's size), and
// the jobs load all the same; a count of fields the bytes cannot hold is
// refused as corrupt.
func TestImplausibleLoadHints(t *testing.T) {
	f := hintsFixture(t)
	items := chunkItems(t, f.e, 1000)
	_, old := hintsOf(t, items[0])
	ent, err := DecodeEntry(old, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	huge := uint64(1) << 60
	r := ent.add()
	r.Kind, r.Hints = KindLoadHints, &LoadHints{Keys: huge, Exts: huge, ExtBytes: huge, Tags: 1, Tagged: huge, Reserved: huge, Attempts: huge,
		SeqOver: huge, IDs: huge}
	items[0] = ent.Encode(nil)

	e := New(Options{Seed: 7, ReserveLimit: 1 << 30})
	if err := e.LoadItem(items[0]); err != nil {
		t.Fatal(err)
	}
	slab := len(e.jobs.chunks) * chunkSize
	if slab == 0 || slab > f.e.Jobs()+chunkSize {
		t.Fatalf("slab of %d jobs for %d", slab, f.e.Jobs())
	}
	if cap(e.keys.keys) > slab+1 || cap(e.exts.chunks) > slab/extChunkSize+1 || e.hints.perTag > slab ||
		len(e.seqs.over.slots) > slotTableSize(slab) || len(e.ids.slots) > slotTableSize(slab) {
		t.Fatalf("hints of 2^60 sized the key table for %d, the arena for %d chunks, tag lists for %d, slot tables for %d and %d; the slab holds %d",
			cap(e.keys.keys), cap(e.exts.chunks), e.hints.perTag, len(e.seqs.over.slots), len(e.ids.slots), slab)
	}
	if got, want := stateHash(t, loadBulk(t, items, 1<<30)), stateHash(t, f.e); got != want {
		t.Fatal("a load with implausible hints built another state")
	}

	// no slab sized (a job count over the reserve limit): no hint is used
	e = New(Options{Seed: 7, ReserveLimit: 10})
	if err := e.LoadItem(items[0]); err != nil {
		t.Fatal(err)
	}
	if cap(e.keys.keys) > 1 || e.hints.perTag != 0 || len(e.jobs.chunks) != 0 {
		t.Fatalf("hints used without a sized slab: key table %d, per tag %d", cap(e.keys.keys), e.hints.perTag)
	}

	// a field count beyond the record's bytes
	bad := (&Entry{Time: ent.Time, Records: []Record{{Kind: KindLoadHints}}}).Encode(nil)
	bad[len(bad)-1] = 0x7f // count 127, no fields follow
	if _, err := DecodeEntry(bad, 0, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("hints claiming 127 fields in no bytes: %v", err)
	}
	// fields a later build appended are skipped
	later := (&Entry{Time: ent.Time, Records: []Record{{Kind: KindLoadHints, Hints: &LoadHints{Keys: 3}}}}).Encode(nil)
	known := len((&LoadHints{}).fields())       // each a one-byte uvarint here
	later[len(later)-known-1] = byte(known + 2) // the known fields and two more
	later = append(later, 5, 6)
	got, err := DecodeEntry(later, 0, 0)
	if err != nil || got.Records[0].Hints == nil || got.Records[0].Hints.Keys != 3 {
		t.Fatalf("hints with two fields more: %+v, %v", got, err)
	}
}

// A bulk load maps the snapshot writer's key ids to its own by the key's
// bytes, not by the id alone: the writer's walk is fuzzy, and an id freed
// and handed to another key between two chunks stands for that other key
// in the later chunk.
func TestBulkLoadKeyIDReusedForAnotherKey(t *testing.T) {
	a := newFixture(t)
	a.put("q", PutRequest{Key: "first"})
	b := newFixture(t)
	for i := 0; i < 5; i++ { // seqs after a's
		j := b.put("q", PutRequest{})
		if err := b.e.Cancel(b.now, "default", "q", j.ID, ""); err != nil {
			t.Fatal(err)
		}
	}
	b.put("q", PutRequest{Key: "second"})
	ai, bi := chunkItems(t, a.e, 10), chunkItems(t, b.e, 10)
	if a.e.keys.ids["first"] != b.e.keys.ids["second"] {
		t.Fatal("the two writers gave their keys different ids")
	}
	r := loadBulk(t, [][]byte{ai[0], ai[1], bi[1]}, 1<<20)
	keys := map[string]int{}
	for slot := uint32(0); slot < r.jobs.next; slot++ {
		if j := r.jobs.get(slot); j.state != StateNone {
			keys[r.keys.keys[j.key]]++
		}
	}
	if keys["first"] != 1 || keys["second"] != 1 {
		t.Fatalf("keys after the load: %v, want first and second once each", keys)
	}
}

// A bulk load defers the slot tables' inserts (the sequence index's
// overflow table, the client-id table) and the arena's map to its end;
// with enough jobs for placeAll's sorted path, and with a lookup forced in
// the middle of a load (which flushes), every job is still found by
// sequence number and by id, and the engine is the one the snapshot came
// from.
func TestBulkLoadDefersSlotTables(t *testing.T) {
	f := chunkFixture(t)
	var ids []string
	for i := 0; i < 20*seqPageLen; i++ {
		req := PutRequest{Payload: []byte(fmt.Sprint(i))}
		if i%5 == 0 {
			req.ID = fmt.Sprint("client-", i)
			req.Tags = map[string]string{"tenant": fmt.Sprint(i % 7)}
		}
		ids = append(ids, f.put("d", req).ID)
	}
	// one in five left: each page too sparse to keep (seqtable.go)
	for i, id := range ids {
		if i%5 != 0 {
			if err := f.e.Cancel(f.now, "default", "d", id, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := f.e.seqs.over.len(); n < 8192 || f.e.ids.len() < 8192 {
		t.Fatalf("fixture: %d jobs in the overflow table, %d in the id table; want over 8192 each", n, f.e.ids.len())
	}
	items := chunkItems(t, f.e, 1000)
	want := stateHash(t, f.e)

	defer func(n int) { placeRun = n }(placeRun)
	for _, run := range []int{placeRun, 5000} { // one sorted run, several
		placeRun = run
		r := loadBulk(t, items, 1<<30)
		if r.seqs.over.deferring || len(r.seqs.over.pending) != 0 || r.ids.deferring || r.exts.deferring {
			t.Fatal("a finished bulk load left inserts pending")
		}
		if got := stateHash(t, r); got != want {
			t.Fatalf("runs of %d: a bulk load with deferred tables built another state", run)
		}
		compareEngines(t, f.e, r, f.now)
	}

	// a lookup in the middle of a load places what is pending at once
	r := loadBulkEach(t, items, 1<<30, func(i int, r *Engine) {
		if i != len(items)/2 {
			return
		}
		if len(r.seqs.over.pending) == 0 || len(r.ids.pending) == 0 || len(r.exts.pending) == 0 {
			t.Fatal("nothing deferred halfway through a bulk load")
		}
		k := r.slotKey(r.ids.pending[0])
		if got := r.idLookup(r.jq(r.jobs.get(r.ids.pending[0])), &k); got == noSlot {
			t.Fatal("a lookup during a bulk load misses a loaded job")
		}
		seq := r.jobs.get(r.seqs.over.pending[0]).seqNo()
		if r.seqLookup(seq) == noSlot {
			t.Fatal("a sequence lookup during a bulk load misses a loaded job")
		}
	})
	if got := stateHash(t, r); got != want {
		t.Fatal("a bulk load with a lookup halfway built another state")
	}
}
