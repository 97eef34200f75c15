package engine

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func lessByFields(a, b idItem) bool {
	if a.k0 != b.k0 {
		return a.k0 < b.k0
	}
	if a.k1 != b.k1 {
		return a.k1 < b.k1
	}
	return a.slot < b.slot
}

// The index answers as a sorted list would through random sets, loads and
// deletes that carry it across both thresholds many times, and it is a
// tree only between them as its size came.
func TestIDIndexMatchesASortedList(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x := newIDIndex(lessByFields)
	var ref []idItem
	item := func() idItem {
		return idItem{k0: uint64(rng.IntN(8)), k1: uint32(rng.IntN(64)), slot: uint32(rng.IntN(4))}
	}
	target := 0
	for step := 0; step < 60000; step++ {
		if step%2000 == 0 {
			target = []int{0, 40, idIndexShrink - 1, idIndexGrow + 1, 400, 1000}[rng.IntN(6)]
		}
		it := item()
		if len(ref) < target || len(ref) == target && rng.IntN(2) == 0 {
			wasTree := x.tree != nil
			if rng.IntN(3) == 0 {
				x.Load(it)
			} else {
				x.Set(it)
			}
			if i, found := slices.BinarySearchFunc(ref, it, cmpByFields); !found {
				ref = slices.Insert(ref, i, it)
			}
			if !wasTree && x.tree != nil && len(ref) != idIndexGrow+1 {
				t.Fatalf("step %d: became a tree at %d items", step, len(ref))
			}
		} else if len(ref) > 0 {
			if rng.IntN(4) > 0 {
				it = ref[rng.IntN(len(ref))]
			}
			wasTree := x.tree != nil
			x.Delete(it)
			if i, found := slices.BinarySearchFunc(ref, it, cmpByFields); found {
				ref = slices.Delete(ref, i, i+1)
			}
			if wasTree && x.tree == nil && len(ref) != idIndexShrink-1 {
				t.Fatalf("step %d: became a slice at %d items", step, len(ref))
			}
		}
		if x.Len() != len(ref) {
			t.Fatalf("step %d: %d items, want %d", step, x.Len(), len(ref))
		}
		if step%97 != 0 {
			continue
		}
		var got []idItem
		x.Scan(func(it idItem) bool { got = append(got, it); return true })
		if !slices.Equal(got, ref) {
			t.Fatalf("step %d: scan %v, want %v", step, got, ref)
		}
		pivot := item()
		from, _ := slices.BinarySearchFunc(ref, pivot, cmpByFields)
		limit := rng.IntN(20)
		got = got[:0]
		x.Ascend(pivot, func(it idItem) bool { got = append(got, it); return len(got) < limit })
		want := ref[from:min(len(ref), from+max(limit, 1))]
		if len(want) == 0 {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Fatalf("step %d: from %v limit %d: %v, want %v", step, pivot, limit, got, want)
		}
	}
}

func cmpByFields(a, b idItem) int {
	switch {
	case lessByFields(a, b):
		return -1
	case lessByFields(b, a):
		return 1
	}
	return 0
}

// A window of items sliding forward — a pool of workers taking and acking
// in id order, each reservation going in at the end and the oldest out —
// allocates nothing once the index has its room, whatever the pool's size
// below the tree's threshold. (The B-tree alone split and merged its root
// on every step of a window of 63 or 64.)
func TestIDIndexSlidingWindowAllocatesNothing(t *testing.T) {
	for w := uint64(1); w < idIndexGrow; w++ {
		x := newIDIndex(lessByFields)
		next := uint64(0)
		for ; next < w; next++ {
			x.Set(idItem{k0: next})
		}
		step := func() {
			x.Set(idItem{k0: next})
			x.Delete(idItem{k0: next - w})
			x.Delete(idItem{k0: next - w + 1})
			x.Set(idItem{k0: next + 1})
			next += 2
		}
		for i := 0; i < 300; i++ {
			step()
		}
		if n := testing.AllocsPerRun(200, step); n != 0 {
			t.Fatalf("window of %d: %.2f allocations per step, want 0", w, n)
		}
	}
}
