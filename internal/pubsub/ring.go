package pubsub

// ring is a growable circular buffer of publications. It starts empty and
// grows by doubling up to the history size, so the many channels that see
// a handful of publications do not each pay for a full-size ring.
type ring struct {
	buf  []*Publication
	head int // index of the oldest entry
	n    int
}

func (r *ring) len() int { return r.n }

func (r *ring) at(i int) *Publication { return r.buf[(r.head+i)%len(r.buf)] }

// push appends p, dropping the oldest entry when size are held already.
func (r *ring) push(p *Publication, size int) {
	if size <= 0 {
		r.clear()
		return
	}
	for r.n >= size {
		r.popFront()
	}
	if r.n == len(r.buf) {
		r.grow(size)
	}
	r.buf[(r.head+r.n)%len(r.buf)] = p
	r.n++
}

func (r *ring) grow(size int) {
	c := 2 * len(r.buf)
	if c < 4 {
		c = 4
	}
	if c > size {
		c = size
	}
	nb := make([]*Publication, c)
	for i := 0; i < r.n; i++ {
		nb[i] = r.at(i)
	}
	r.buf, r.head = nb, 0
}

func (r *ring) popFront() {
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	if r.n == 0 {
		r.clear()
	}
}

// clear also frees the buffer: an emptied ring (all history expired) is
// the common state of an idle channel.
func (r *ring) clear() { *r = ring{} }
