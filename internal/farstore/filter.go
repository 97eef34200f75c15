package farstore

import "encoding/binary"

// Filter answers "may this key be in the bucket?" without reading the
// bucket: a Bloom filter that grows by adding sub-filters of twice the
// capacity (a bucket's final size is unknown while it fills), at 12 bits
// and 8 probes per key, about 0.3 % false positives per sub-filter. A false
// positive costs one bucket read; there are no false negatives. Removing a
// key is not possible: a tombstoned job keeps answering "maybe" until its
// bucket is gone.
type Filter struct {
	subs []sub
}

type sub struct {
	bits []uint64
	// 32 bits: a sub-filter holds at most filterMaxSub keys, and a
	// year of sparse buckets holds two sub-filters each
	n, limit uint32
}

// Sized returns an empty filter whose first sub-filter holds n keys: a
// filter rebuilt from a bucket whose size is known takes no more memory
// than its keys need.
func Sized(n int) Filter {
	n = max(n, filterMin)
	n = min(n, filterMaxSub)
	return Filter{subs: []sub{{bits: make([]uint64, (n*filterBitsPerKey+63)/64), limit: uint32(n)}}}
}

const (
	filterBitsPerKey = 12
	filterProbes     = 8
	filterFirst      = 64
	filterMin        = 8
	filterMaxSub     = 1 << 30
)

// Add records key (a well-mixed 64-bit hash).
func (f *Filter) Add(key uint64) {
	if len(f.subs) == 0 || f.subs[len(f.subs)-1].n >= f.subs[len(f.subs)-1].limit {
		limit := filterFirst
		if len(f.subs) > 0 {
			limit = min(int(f.subs[len(f.subs)-1].limit)*2, filterMaxSub)
		}
		f.subs = append(f.subs, sub{bits: make([]uint64, (limit*filterBitsPerKey+63)/64), limit: uint32(limit)})
	}
	s := &f.subs[len(f.subs)-1]
	m := uint64(len(s.bits) * 64)
	h1, h2 := key, mix(key)|1
	for i := uint64(0); i < filterProbes; i++ {
		b := (h1 + i*h2) % m
		s.bits[b/64] |= 1 << (b % 64)
	}
	s.n++
}

// MayHave reports whether key may have been added.
func (f *Filter) MayHave(key uint64) bool {
	h1, h2 := key, mix(key)|1
outer:
	for i := range f.subs {
		s := &f.subs[i]
		m := uint64(len(s.bits) * 64)
		for j := uint64(0); j < filterProbes; j++ {
			b := (h1 + j*h2) % m
			if s.bits[b/64]&(1<<(b%64)) == 0 {
				continue outer
			}
		}
		return true
	}
	return false
}

// Bytes is the memory the filter holds.
func (f *Filter) Bytes() int {
	n := 0
	for i := range f.subs {
		n += len(f.subs[i].bits) * 8
	}
	return n
}

func (f *Filter) appendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(f.subs)))
	for i := range f.subs {
		s := &f.subs[i]
		b = binary.AppendUvarint(b, uint64(s.limit))
		b = binary.AppendUvarint(b, uint64(s.n))
		b = binary.AppendUvarint(b, uint64(len(s.bits)))
		for _, w := range s.bits {
			b = binary.LittleEndian.AppendUint64(b, w)
		}
	}
	return b
}

// mix is splitmix64's finalizer: a second hash from the first.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Hash is the hash filter keys are made with: FNV-1a from a seed, then
// mixed. It is the same in every process given the seed, so filters can be
// saved (side.go) and used after a restart; the seed is random per data
// directory, so clients cannot choose ids that collide on purpose.
func Hash(seed uint64, s string) uint64 {
	h := seed ^ 0xcbf29ce484222325
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 0x100000001b3
	}
	return mix(h)
}

// HashUint64 is Hash for a number.
func HashUint64(seed, v uint64) uint64 { return mix(mix(seed^0x9e3779b97f4a7c15) ^ v) }

// Clone returns a copy that shares nothing with f.
func (f *Filter) Clone() Filter {
	c := Filter{subs: make([]sub, len(f.subs))}
	for i, s := range f.subs {
		c.subs[i] = sub{bits: append([]uint64(nil), s.bits...), n: s.n, limit: s.limit}
	}
	return c
}
