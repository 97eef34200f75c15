package engine

import (
	"sort"

	"github.com/tidwall/btree"
)

// idIndex is a queue's index of its jobs in one state by id (listindex.go):
// a sorted slice while it is small, a B-tree once it is large.
//
// Why not always the B-tree: its root leaf splits at 64 items and merges
// back at 63, with no slack between. A queue whose workers hold 64
// reservations between them — a pool of 64 workers, each taking its next
// job as it acks the last — crossed that line on every take and every
// ack, allocating and freeing nodes each time: ~1.7 KB a job, a fifth of
// the server's allocation in the HTTP lifecycle at 64 connections. The
// switch between the two forms has room between its thresholds
// (idIndexGrow, idIndexShrink), so no steady size flips it back and forth,
// and a tree never holds so few items that its root is a lone leaf.
type idIndex struct {
	less  func(a, b idItem) bool
	small []idItem // in order; unused once tree is set
	tree  *btree.BTreeG[idItem]
}

const (
	idIndexGrow   = 256 // a slice that would exceed this becomes a tree
	idIndexShrink = 128 // a tree that falls below this becomes a slice
)

func newIDIndex(less func(a, b idItem) bool) *idIndex {
	return &idIndex{less: less}
}

// find is the position of the first item of the slice not before it.
func (x *idIndex) find(it idItem) int {
	return sort.Search(len(x.small), func(i int) bool { return !x.less(x.small[i], it) })
}

// Set adds it (or replaces the item equal to it).
func (x *idIndex) Set(it idItem) {
	if x.tree != nil {
		x.tree.Set(it)
		return
	}
	// ids made here grow with time, so most items go last
	n := len(x.small)
	if n == 0 || x.less(x.small[n-1], it) {
		x.small = append(x.small, it)
	} else {
		i := x.find(it)
		if !x.less(it, x.small[i]) {
			x.small[i] = it
			return
		}
		x.small = append(x.small, idItem{})
		copy(x.small[i+1:], x.small[i:])
		x.small[i] = it
	}
	if len(x.small) > idIndexGrow {
		x.grow()
	}
}

// Load adds it as Set does; items that come in order, as a snapshot load
// mostly gives them, go into a tree's last leaf without a descent.
func (x *idIndex) Load(it idItem) {
	if x.tree != nil {
		x.tree.Load(it)
		return
	}
	x.Set(it)
}

// Delete removes the item equal to it, if there is one.
func (x *idIndex) Delete(it idItem) {
	if x.tree != nil {
		x.tree.Delete(it)
		if x.tree.Len() < idIndexShrink {
			x.shrink()
		}
		return
	}
	i := x.find(it)
	if i == len(x.small) || x.less(it, x.small[i]) {
		return
	}
	copy(x.small[i:], x.small[i+1:])
	x.small = x.small[:len(x.small)-1]
}

// Len is the number of items.
func (x *idIndex) Len() int {
	if x.tree != nil {
		return x.tree.Len()
	}
	return len(x.small)
}

// Scan calls fn on every item in order until fn returns false.
func (x *idIndex) Scan(fn func(idItem) bool) {
	if x.tree != nil {
		x.tree.Scan(fn)
		return
	}
	x.walk(0, fn)
}

// Ascend calls fn on every item not before pivot, in order, until fn
// returns false.
func (x *idIndex) Ascend(pivot idItem, fn func(idItem) bool) {
	if x.tree != nil {
		x.tree.Ascend(pivot, fn)
		return
	}
	x.walk(x.find(pivot), fn)
}

func (x *idIndex) walk(i int, fn func(idItem) bool) {
	for ; i < len(x.small); i++ {
		if !fn(x.small[i]) {
			return
		}
	}
}

func (x *idIndex) grow() {
	x.tree = btree.NewBTreeGOptions(x.less, btree.Options{Degree: 32, NoLocks: true})
	for _, it := range x.small {
		x.tree.Load(it) // in order: appends
	}
	x.small = nil
}

func (x *idIndex) shrink() {
	small := make([]idItem, 0, idIndexGrow)
	x.tree.Scan(func(it idItem) bool {
		small = append(small, it)
		return true
	})
	x.small, x.tree = small, nil
}
