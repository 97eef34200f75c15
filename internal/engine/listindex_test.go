package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/oklog/ulid/v2"
)

// checkListIndexes holds each queue's listing indexes (listindex.go) to a
// count of its jobs: the blocks' per-state counts, no empty block, and each
// id index exactly the queue's jobs of its state, in id order.
func (e *Engine) checkListIndexes() error {
	type bk struct {
		q   uint32
		idx uint64
	}
	want := map[bk][StateCompleted]uint32{}
	inState := map[uint32]*[len(idIndexed)][]uint32{}
	e.forEachJob(func(slot uint32, j *job) {
		k := bk{e.jq(j), j.seqNo() >> seqPageBits}
		n := want[k]
		n[j.state-1]++
		want[k] = n
		if i := idIndexOf(j.state); i >= 0 {
			if inState[e.jq(j)] == nil {
				inState[e.jq(j)] = new([len(idIndexed)][]uint32)
			}
			inState[e.jq(j)][i] = append(inState[e.jq(j)][i], slot)
		}
	})
	for _, q := range e.queues {
		if q == nil {
			continue
		}
		var err error
		if q.lists.blocks != nil {
			q.lists.blocks.Scan(func(b *seqBlock) bool {
				k := bk{q.idx, b.idx}
				var total uint32
				for _, c := range b.n {
					total += c
				}
				if b.n != want[k] || total != b.total || total == 0 {
					err = fmt.Errorf("queue %s block %d counts %v (total %d), jobs %v", q.name, b.idx, b.n, b.total, want[k])
					return false
				}
				delete(want, k)
				if q.lists.byIdx[b.idx] != b {
					err = fmt.Errorf("queue %s block %d not in the map", q.name, b.idx)
					return false
				}
				return true
			})
		}
		if err != nil {
			return err
		}
		if q.lists.blocks != nil && len(q.lists.byIdx) != q.lists.blocks.Len() {
			return fmt.Errorf("queue %s: %d blocks in the map, %d in the tree", q.name, len(q.lists.byIdx), q.lists.blocks.Len())
		}
		for _, h := range q.lists.hot {
			if h != nil && h.total == 0 {
				return fmt.Errorf("queue %s: an empty block is cached", q.name)
			}
		}
		for i, s := range idIndexed {
			var got []uint32
			if t := q.lists.byID[i]; t != nil {
				prev := ""
				t.Scan(func(it idItem) bool {
					id := e.jobID(it.slot)
					if it != e.idItemOf(it.slot) || len(got) > 0 && prev >= id {
						err = fmt.Errorf("queue %s %s index: %s after %s, or a stale item", q.name, s, id, prev)
						return false
					}
					prev = id
					got = append(got, it.slot)
					return true
				})
			}
			if err != nil {
				return err
			}
			var exp []uint32
			if inState[q.idx] != nil {
				exp = inState[q.idx][i]
			}
			slices.Sort(got)
			slices.Sort(exp)
			if !slices.Equal(got, exp) {
				return fmt.Errorf("queue %s %s index holds %d jobs, the queue %d", q.name, s, len(got), len(exp))
			}
		}
	}
	for k, n := range want {
		return fmt.Errorf("queue %d: block %d of jobs %v missing", k.q, k.idx, n)
	}
	return nil
}

// ulidPrefix reads the first 12 characters of a ULID's text from its bits.
func TestULIDPrefixIsTheTextPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 10000; i++ {
		var u ulid.ULID
		for k := range u {
			u[k] = byte(rng.IntN(256))
		}
		if i%3 == 0 {
			u[0] &= 7 // a valid timestamp: the text's first character ≤ 7
		}
		k0, k1 := ulidPrefix((*[16]byte)(&u))
		w0, w1 := idPrefix(u.String())
		if k0 != w0 || k1 != w1 {
			t.Fatalf("%s: prefix %x %x, its text's %x %x", u, k0, k1, w0, w1)
		}
	}
}

// A bulk load appends to the id indexes (Tree.Load) while jobs come in id
// order; jobs that do not must still land in their places. Here a key's
// blocked jobs have client ids in descending order, then ascending again.
func TestBulkLoadIDIndexOutOfOrder(t *testing.T) {
	f := newFixture(t)
	var want []string
	for i := 0; i < 300; i++ {
		id := fmt.Sprintf("job-%04d", 1000-i)
		if i >= 200 {
			id = fmt.Sprintf("job-%04d", 2000+i)
		}
		f.put("q", PutRequest{ID: id, Key: "k"})
		if i > 0 { // the first is the chain's ready head
			want = append(want, id)
		}
	}
	slices.Sort(want)
	it := f.e.Snapshot()
	r := New(Options{Seed: 3})
	r.StartBulkLoad()
	for {
		item, ok := it.NextItem(nil, 16)
		if !ok {
			break
		}
		if err := r.LoadItem(item); err != nil {
			t.Fatal(err)
		}
	}
	r.FinishBulkLoad()
	if err := r.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	got := listIDs(t, r, f.now, "q", Filter{States: []State{StateBlocked}}, 64)
	if !slices.Equal(got, want) {
		t.Fatalf("blocked jobs listed after the load:\n%v\nwant\n%v", got, want)
	}
}
