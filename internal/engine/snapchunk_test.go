package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// chunkFixture holds one job of every kind job chunks carry: ULID and
// client ids, tags, TTL, key chains in both key modes, reserved (with its
// reservation), dead by bury and by tries, completed with a result,
// delayed, ready.
func chunkFixture(t *testing.T) *fixture {
	f := newFixture(t)
	excl := KeyExclusive
	if _, _, err := f.e.PutQueue(f.now, "default", "x", QueuePatch{KeyMode: &excl}); err != nil {
		t.Fatal(err)
	}
	hour, ttl, ttr := time.Hour, 2*time.Hour, 7*time.Second
	f.put("a", PutRequest{Payload: []byte("p1")})
	f.put("a", PutRequest{ID: "client-1", Tags: map[string]string{"t": "1", "u": "2"}, TTL: &ttl})
	f.put("a", PutRequest{Delay: &hour, Key: "k"})
	f.put("a", PutRequest{Key: "k", ReplyTo: "r", Notify: "n"})
	f.put("a", PutRequest{Key: "k"})
	f.put("x", PutRequest{Key: "k"})
	f.put("x", PutRequest{Key: "k", Delay: &hour})
	f.put("x", PutRequest{Key: "k2"})
	f.put("b", PutRequest{ID: "01ARZ3NDEKTSV4RRFFQ69G5FAV"}) // a client id spelled as a ULID
	j := f.take(1, "b")[0]
	if err := f.e.Bury(f.now, "default", "b", j.ID, BuryRequest{Receipt: j.Receipt, Reason: "why"}); err != nil {
		t.Fatal(err)
	}
	retain := time.Hour
	if _, _, err := f.e.PutQueue(f.now, "default", "c", QueuePatch{RetainResults: &retain}); err != nil {
		t.Fatal(err)
	}
	f.put("c", PutRequest{})
	f.put("c", PutRequest{})
	j = f.take1("c")
	f.ack(j, AckRequest{HasResult: true, Result: []byte(`{"ok":1}`), ResultJSON: true})
	if _, err := f.e.Nack(f.now, "default", "x", f.take1("x").ID, NackRequest{AnyReceipt: true, Error: "boom", Delay: &hour}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"c", "x", "a"} {
		if _, err := f.e.Take(f.now, "default", TakeRequest{Queues: []string{q}, Max: 1, TTR: &ttr}); err != nil {
			t.Fatal(err)
		}
	}
	if c := f.counts("a"); c.Reserved != 1 || c.Ready+c.Blocked+c.Delayed < 3 {
		t.Fatalf("fixture: %+v", c)
	}
	f.tick(time.Second)
	return f
}

func chunkItems(t *testing.T, e *Engine, n int) [][]byte {
	var items [][]byte
	it := e.Snapshot()
	for {
		item, ok := it.NextItem(nil, n)
		if !ok {
			return items
		}
		items = append(items, item)
	}
}

// Without writes during the walk, loading the chunks rebuilds exactly the
// engine they came from.
func TestJobChunksRoundTrip(t *testing.T) {
	f := chunkFixture(t)
	for _, n := range []int{1, 3, 1000} {
		items := chunkItems(t, f.e, n)
		if !IsChunk(items[len(items)-1]) {
			t.Fatal("the walk wrote no job chunk")
		}
		r := New(Options{Seed: 7})
		for i, b := range items {
			if err := r.LoadItem(b); err != nil {
				t.Fatalf("chunk size %d, item %d: %v", n, i, err)
			}
		}
		if err := r.checkInvariants(); err != nil {
			t.Fatal(err)
		}
		compareEngines(t, f.e, r, f.now)
		if r.Jobs() != f.e.Jobs() || r.seq != f.e.seq {
			t.Fatalf("%d jobs, seq %d; want %d, %d", r.Jobs(), r.seq, f.e.Jobs(), f.e.seq)
		}
		for k, v := range f.e.resv {
			if w := r.resv[r.findSlot(t, f.e, k)]; w != v {
				t.Fatalf("reservation %+v came back as %+v", v, w)
			}
		}
	}
}

func (r *Engine) findSlot(t *testing.T, src *Engine, slot uint32) uint32 {
	q := src.queues[src.jq(src.jobs.get(slot))]
	_, s, err := r.findJob(q.ns.name, q.name, src.jobID(slot))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A truncated chunk is refused with ErrCorrupt, random flips never crash
// the loader, and a chunk from a build with another record layout says so.
func TestJobChunksDamageRefused(t *testing.T) {
	f := chunkFixture(t)
	items := chunkItems(t, f.e, 1000)
	meta, chunk := items[0], items[1]
	load := func(b []byte) error {
		r := New(Options{Seed: 7})
		if err := r.LoadItem(meta); err != nil {
			t.Fatal(err)
		}
		return r.LoadItem(b)
	}
	for cut := 1; cut < len(chunk); cut += 7 {
		if err := load(chunk[:cut]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("chunk cut at %d: %v", cut, err)
		}
	}
	bad := append([]byte(nil), chunk...)
	bad[2]++ // record size
	if err := load(bad); !errors.Is(err, ErrCorrupt) || !contains(err.Error(), "another version") {
		t.Fatalf("other layout: %v", err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 6000; i++ {
		b := append([]byte(nil), chunk...)
		for k := rng.IntN(4) + 1; k > 0; k-- {
			b[rng.IntN(len(b))] ^= byte(1 << rng.IntN(8))
		}
		r := New(Options{Seed: 7})
		r.LoadItem(meta)
		// Flips in times, payload references or ids load as other values:
		// the snapshot's block CRC (internal/snapshot) is what catches
		// those; here a flip must only never crash the loader, loading
		// one job at a time or in bulk as recovery does.
		bulk := i%2 == 1
		if bulk {
			r.StartBulkLoad()
		}
		err := r.LoadItem(b)
		if bulk {
			r.FinishBulkLoad()
		}
		if err == nil {
			r.Advance(f.now.Add(time.Hour))
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// testdata/chunks-v1.bin was written by the build before records lost
// their priority and attempt count (64-byte records, chunk version 1):
// the state hash of the engine that wrote it, then its snapshot items
// (uvarint length ‖ bytes) — the chunk fixture (reserved, nacked, buried
// and completed jobs carry attempt counts) plus two jobs of their own
// priority, walked 4 jobs a chunk. Loading it must give the same state:
// the hash covers every job's whole image.
func TestVersion1JobChunksStillLoad(t *testing.T) {
	b, err := os.ReadFile("testdata/chunks-v1.bin")
	if err != nil {
		t.Fatal(err)
	}
	want, b := b[:32], b[32:]
	r := New(Options{Seed: 7})
	v1 := 0
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		item := b[k : k+int(n)]
		b = b[k+int(n):]
		if IsChunk(item) && item[1] == chunkVersionV1 {
			v1++
		}
		if err := r.LoadItem(item); err != nil {
			t.Fatal(err)
		}
	}
	if v1 == 0 {
		t.Fatal("no version-1 chunk in the file")
	}
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	read := func(r BlobRef) ([]byte, error) { return []byte(fmt.Sprint(r)), nil }
	got, err := r.StateHash(read)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:], want) {
		t.Fatal("the engine loaded from version-1 chunks hashes differently from the one that wrote them")
	}
	// and it writes them back as the current version, which loads the same
	r2 := New(Options{Seed: 7})
	for _, item := range chunkItems(t, r, 3) {
		if IsChunk(item) && item[1] != chunkVersion {
			t.Fatalf("wrote chunk version %d", item[1])
		}
		if err := r2.LoadItem(item); err != nil {
			t.Fatal(err)
		}
	}
	if got2, _ := r2.StateHash(read); got2 != got {
		t.Fatal("rewritten chunks hash differently")
	}
}

// A bulk load (the broker's restart) builds the delayed heap once at the
// end instead of pushing each job: the heap is in order, every job knows
// its place, and jobs come due in the same order as after a plain load.
func TestBulkLoadBuildsTheDelayedHeap(t *testing.T) {
	f := newFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 3000; i++ {
		d := time.Duration(1+rng.IntN(300)) * time.Second // many equal times: the seq breaks ties
		req := PutRequest{Delay: &d}
		if i%7 == 0 {
			req.Key = fmt.Sprintf("k%d", i%13)
		}
		f.put("a", req)
	}
	f.put("a", PutRequest{}) // a ready job among them
	items := chunkItems(t, f.e, 256)
	load := func(bulk bool, reserve int) *Engine {
		// with a reserve limit the snapshot's job count sizes the slab,
		// and a bulk load sizes the delayed arrays from it
		r := New(Options{Seed: 7, ReserveLimit: reserve})
		if bulk {
			r.StartBulkLoad()
		}
		for i, b := range items {
			if err := r.LoadItem(b); err != nil {
				t.Fatalf("item %d: %v", i, err)
			}
		}
		r.FinishBulkLoad()
		if err := r.checkInvariants(); err != nil {
			t.Fatal(err)
		}
		return r
	}
	plain := load(false, 0)
	for _, reserve := range []int{0, 1 << 20} {
		bulk := load(true, reserve)
		if len(bulk.delayed.s) < 2900 {
			t.Fatalf("%d delayed jobs", len(bulk.delayed.s))
		}
		checkBulk(t, f, plain, bulk)
		plain = load(false, 0) // the check took every job
	}
}

func checkBulk(t *testing.T, f *fixture, plain, bulk *Engine) {
	t.Helper()
	for i, slot := range bulk.delayed.s {
		if h := bulk.jobs.get(slot).hidx; h != uint32(i) {
			t.Fatalf("job at heap position %d says %d", i, h)
		}
		if i > 0 && bulk.less(&bulk.delayed, slot, bulk.delayed.s[(i-1)/2]) {
			t.Fatalf("heap order broken at position %d", i)
		}
	}
	compareEngines(t, plain, bulk, f.now)
	for step := 0; step <= 301; step++ {
		now := f.now.Add(time.Duration(step) * time.Second)
		a, err1 := plain.Take(now, "default", TakeRequest{Queues: []string{"a"}, Max: 1000})
		b, err2 := bulk.Take(now, "default", TakeRequest{Queues: []string{"a"}, Max: 1000})
		if err1 != nil || err2 != nil || len(a) != len(b) {
			t.Fatalf("second %d: took %d (%v) after a plain load, %d (%v) after a bulk load", step, len(a), err1, len(b), err2)
		}
		for i := range a {
			if a[i].ID != b[i].ID {
				t.Fatalf("second %d, job %d: %s after a plain load, %s after a bulk load", step, i, a[i].ID, b[i].ID)
			}
		}
	}
	if plain.Jobs() != bulk.Jobs() {
		t.Fatalf("%d jobs left after a plain load, %d after a bulk load", plain.Jobs(), bulk.Jobs())
	}
}

// A bulk load builds the tag index at the end, each tag's set at once:
// every tagged job of the snapshot is in the set of each of its tags and
// nothing else is, as after a plain load, including tags that jobs of
// several chunks and states share.
func TestBulkLoadBuildsTheTagIndex(t *testing.T) {
	f := chunkFixture(t) // tagged jobs among reserved, dead, completed ones
	hour := time.Hour
	for i := 0; i < 2000; i++ {
		req := PutRequest{}
		switch {
		case i%3 == 0:
			req.Tags = map[string]string{"tenant": fmt.Sprint(i % 7)}
		case i%5 == 0:
			req.Tags = map[string]string{"tenant": fmt.Sprint(i % 7), "kind": fmt.Sprint(i % 2)}
			req.Delay = &hour
		}
		f.put(fmt.Sprint("q", i%3), req)
	}
	for _, j := range f.take(10, "q0") { // taken: tagged jobs in the reservation table
		if j.ID == "" {
			t.Fatal("took a job without an id")
		}
	}
	items := chunkItems(t, f.e, 128)
	r := New(Options{Seed: 7})
	r.StartBulkLoad()
	for i, b := range items {
		if err := r.LoadItem(b); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	r.FinishBulkLoad()
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	if len(r.tagIndex) != len(f.e.tagIndex) || len(f.e.tagIndex) < 10 {
		t.Fatalf("%d tags after a bulk load, %d before", len(r.tagIndex), len(f.e.tagIndex))
	}
	for k, set := range f.e.tagIndex {
		got := r.tagIndex[k]
		if len(got) != len(set) {
			t.Fatalf("tag %q: %d jobs after a bulk load, %d before", k, len(got), len(set))
		}
		for slot := range set {
			if _, ok := got[r.findSlot(t, f.e, slot)]; !ok {
				t.Fatalf("tag %q: job %s missing after a bulk load", k, f.e.jobID(slot))
			}
		}
	}
	// and the index serves: cancelling by tag finds the same jobs
	filter := Filter{Tags: map[string]string{"tenant": "3", "kind": "1"}}
	a, err1 := f.e.CancelByFilter(f.now, "default", "q1", filter)
	b, err2 := r.CancelByFilter(f.now, "default", "q1", filter)
	if err1 != nil || err2 != nil || a == 0 || a != b {
		t.Fatalf("cancel by tag: %d (%v) before, %d (%v) after a bulk load", a, err1, b, err2)
	}
}

// LoadMemory names the memory a bulk load is about to fill once the
// snapshot's metadata has sized the slab: room for every job of the
// snapshot, and nothing of the slab once they are all in.
func TestLoadMemory(t *testing.T) {
	f := newFixture(t)
	hour := time.Hour
	for i := 0; i < 3*chunkSize/2; i++ {
		f.put("a", PutRequest{Delay: &hour})
	}
	items := chunkItems(t, f.e, 4096)
	r := New(Options{Seed: 7, ReserveLimit: 1 << 30})
	r.StartBulkLoad()
	if err := r.LoadItem(items[0]); err != nil { // the metadata
		t.Fatal(err)
	}
	size := func() (n int) {
		for _, m := range r.LoadMemory() {
			n += len(m)
		}
		return n
	}
	if n, want := size(), f.e.Jobs()*(jobSize+4+8); n < want {
		t.Fatalf("%d bytes named for %d jobs, want at least %d", n, f.e.Jobs(), want)
	}
	for _, b := range items[1:] {
		if err := r.LoadItem(b); err != nil {
			t.Fatal(err)
		}
	}
	if n := size(); n >= chunkSize*jobSize {
		t.Fatalf("%d bytes still named after the load", n)
	}
	r.FinishBulkLoad()
	if r.Jobs() != f.e.Jobs() {
		t.Fatalf("%d jobs, want %d", r.Jobs(), f.e.Jobs())
	}
}
