package engine

// The sequence index maps a job's enqueue sequence number to its slot
// (beanstalkd addresses jobs by this number, and server job ids carry it:
// idtable.go).
//
// Sequence numbers are handed out in order, so the jobs alive at any time
// mostly sit in runs of consecutive numbers. The index keeps those runs in
// pages: a page is the slots of 4096 consecutive numbers, written in
// place — 4 bytes a job when the page is full, no hashing, and a snapshot
// load writes it sequentially instead of missing the cache once per job
// as a hash table does. A page whose jobs have mostly gone (fewer than a
// quarter left) would cost more than a hash table for the rest, so it is
// dissolved: its remaining jobs move to an overflow hash table (a
// slotTable) and its numbers are never paged again. Each number is thus in
// exactly one place: its page if that exists, else the overflow table.
//
// Pages are created only at or above floor (one past the highest page
// ever dissolved); below it, numbers go to the overflow table.

const (
	seqPageBits = 12
	seqPageLen  = 1 << seqPageBits
	// a page with fewer jobs than this (and not the newest) is dissolved
	seqPageMin = seqPageLen / 4
)

type seqPage struct {
	slots *[seqPageLen]uint32 // noSlot = empty
	n     int
}

type seqIndex struct {
	pages map[uint64]*seqPage // by seq >> seqPageBits
	// the page used last: puts and loads mostly stay on one page
	lastIdx uint64
	last    *seqPage
	head    uint64 // highest page index created
	floor   uint64 // no page below this is created
	paged   int    // jobs held in pages
	over    slotTable[seqHasher]
}

type seqHasher struct{}

func seqHash(seq uint64) uint64 { return seq * 0x9e3779b97f4a7c15 }

func (seqHasher) hash(e *Engine, slot uint32) uint64 { return seqHash(e.jobs.get(slot).seqNo()) }

func (x *seqIndex) init() {
	x.pages = make(map[uint64]*seqPage)
	x.last, x.lastIdx, x.head, x.floor, x.paged = nil, 0, 0, 0, 0
	x.over.init(1024)
}

// len is the number of jobs indexed.
func (x *seqIndex) len() int { return x.paged + x.over.len() }

func (x *seqIndex) page(pi uint64) *seqPage {
	if x.last != nil && x.lastIdx == pi {
		return x.last
	}
	p := x.pages[pi]
	if p != nil {
		x.last, x.lastIdx = p, pi
	}
	return p
}

func (x *seqIndex) insert(e *Engine, slot uint32) {
	seq := e.jobs.get(slot).seqNo()
	pi := seq >> seqPageBits
	p := x.page(pi)
	if p == nil && pi >= x.floor {
		if pi > x.head {
			// the newest page is complete now: a sparse one (its jobs
			// were taken about as fast as they came) goes
			if prev := x.pages[x.head]; prev != nil && prev.n < seqPageMin {
				x.dissolve(e, x.head, prev)
			}
			x.head = pi
		} else if len(x.pages) > 8 && x.paged < len(x.pages)*seqPageMin {
			// pages made out of order (a snapshot load or replay) may be
			// sparse: keep their total cost bounded
			x.sweep(e)
		}
		if pi >= x.floor {
			p = &seqPage{slots: new([seqPageLen]uint32)}
			for i := range p.slots {
				p.slots[i] = noSlot
			}
			x.pages[pi] = p
			x.last, x.lastIdx = p, pi
		}
	}
	if p == nil {
		x.over.insert(e, slot)
		return
	}
	p.slots[seq&(seqPageLen-1)] = slot
	p.n++
	x.paged++
}

func (x *seqIndex) remove(e *Engine, slot uint32) {
	seq := e.jobs.get(slot).seqNo()
	pi := seq >> seqPageBits
	p := x.page(pi)
	if p == nil {
		x.over.remove(e, slot)
		return
	}
	off := seq & (seqPageLen - 1)
	if p.slots[off] != slot {
		return
	}
	p.slots[off] = noSlot
	p.n--
	x.paged--
	if p.n < seqPageMin && pi != x.head {
		x.dissolve(e, pi, p)
	}
}

// dissolve moves page pi's jobs to the overflow table and drops the page.
func (x *seqIndex) dissolve(e *Engine, pi uint64, p *seqPage) {
	for _, s := range p.slots {
		if s != noSlot {
			x.over.insert(e, s)
		}
	}
	x.paged -= p.n
	delete(x.pages, pi)
	if x.last == p {
		x.last = nil
	}
	x.floor = max(x.floor, pi+1)
}

// sweep dissolves every sparse page but the newest.
func (x *seqIndex) sweep(e *Engine) {
	for pi, p := range x.pages {
		if p.n < seqPageMin && pi != x.head {
			x.dissolve(e, pi, p)
		}
	}
}

func (e *Engine) seqLookup(seq uint64) uint32 {
	x := &e.seqs
	if p := x.page(seq >> seqPageBits); p != nil {
		return p.slots[seq&(seqPageLen-1)]
	}
	return e.seqOverLookup(seq)
}

// seqOverLookup finds seq in the overflow table (its page does not exist).
func (e *Engine) seqOverLookup(seq uint64) uint32 {
	t := &e.seqs.over
	t.flush(e)
	mask := uint64(len(t.slots) - 1)
	for i := seqHash(seq) & mask; ; i = (i + 1) & mask {
		s := t.slots[i]
		if s == noSlot || e.jobs.get(s).seqNo() == seq {
			return s
		}
	}
}
