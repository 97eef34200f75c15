package engine

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unsafe"
)

// The arena must hand back exactly what was stored, through rewrites,
// deletes and compactions, for every combination of fields.
func TestExtStoreAgainstMap(t *testing.T) {
	defer func(v int) { extMinCompact = v }(extMinCompact)
	extMinCompact = 256
	rng := rand.New(rand.NewPCG(1, 2))
	s := newExtStore()
	want := map[uint32]jobExt{}
	str := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return fmt.Sprintf("s%d", rng.IntN(1000))
	}
	for i := 0; i < 20000; i++ {
		slot := uint32(rng.IntN(300))
		if rng.IntN(4) == 0 {
			s.del(slot)
			delete(want, slot)
		} else {
			var x jobExt
			x.clientID, x.replyTo, x.cron, x.notify, x.lastError = str(), str(), str(), str(), str()
			if rng.IntN(2) == 0 {
				x.created, x.expire = rng.Int64N(1<<45), -rng.Int64N(1000)
			}
			for k := rng.IntN(3); k > 0; k-- {
				x.tags = append(x.tags, str(), str())
			}
			if rng.IntN(3) == 0 {
				x.result = BlobRef{Segment: rng.Uint32(), Offset: rng.Uint32(), Len: rng.Uint32()}
			}
			x.retainResult, x.retainUntil = rng.Int64N(3), rng.Int64N(3)
			x.timeouts, x.kicks = rng.Uint32N(2), rng.Uint32()
			s.set(slot, &x)
			if x.empty() {
				delete(want, slot)
			} else {
				want[slot] = x
			}
		}
		if i%997 == 0 || i == 19999 {
			if s.len() != len(want) {
				t.Fatalf("step %d: %d entries, want %d", i, s.len(), len(want))
			}
			for slot, w := range want {
				got, ok := s.get(slot)
				if !ok || !reflect.DeepEqual(got, w) {
					t.Fatalf("step %d slot %d: got %+v (%v), want %+v", i, slot, got, ok, w)
				}
				if s.clientID(slot) != w.clientID {
					t.Fatalf("slot %d: client id %q, want %q", slot, s.clientID(slot), w.clientID)
				}
			}
		}
	}
	if s.compacts == 0 {
		t.Fatal("the arena never compacted")
	}
	// garbage stays bounded by the live bytes (plus the threshold)
	if s.garbage > s.live+extMinCompact {
		t.Fatalf("garbage %d with %d live", s.garbage, s.live)
	}
}

// The model test again, compacting the arena on every delete, so decoded
// strings that outlive a compaction and entries moved by it are exercised
// by every rule of the engine.
func TestModelWithArenaCompaction(t *testing.T) {
	defer func(v int) { extMinCompact = v }(extMinCompact)
	extMinCompact = 0
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for seed := 0; seed < seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runModel(t, uint64(1000+seed), 120) })
	}
}

// Names that outlive a command (a queue a reply_to creates, a cached cron
// spec) are copies, not strings into the arena: they would keep a chunk
// alive after every compaction.
func TestLongLivedNamesDoNotPointIntoTheArena(t *testing.T) {
	f := newFixture(t)
	f.put("q", PutRequest{ReplyTo: "replies-for-q"})
	f.ack(f.take1("q"), AckRequest{})
	r := f.put("c", PutRequest{Cron: "*/5 * * * *"})
	f.tick(6 * time.Minute)
	clear(f.e.crons) // the ack re-arms from the stored spec
	f.ack(f.take1("c"), AckRequest{})
	inArena := func(s string) bool {
		p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
		for _, c := range f.e.exts.chunks {
			if len(c) > 0 {
				start := uintptr(unsafe.Pointer(&c[:cap(c)][0]))
				if p >= start && p < start+uintptr(cap(c)) {
					return true
				}
			}
		}
		return false
	}
	q, err := f.e.findQueue("default", "replies-for-q")
	if err != nil {
		t.Fatal(err)
	}
	if inArena(q.name) {
		t.Fatal("the reply queue's name points into the arena")
	}
	for spec := range f.e.crons {
		if inArena(spec) {
			t.Fatalf("cached cron spec %q points into the arena", spec)
		}
	}
	if len(f.e.crons) == 0 || f.state("c", r.ID) != StateDelayed {
		t.Fatalf("the cron job was not re-armed (%d specs cached)", len(f.e.crons))
	}
}
