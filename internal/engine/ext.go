package engine

import (
	"encoding/binary"
	"strings"
	"unsafe"
)

// Rare job fields (jobExt: client ids, tags, reply_to, cron, results, ...)
// are kept encoded in a byte arena rather than as one Go object per job:
// a struct of strings and slices costs ~200 bytes per job plus the spans
// that a few such long-lived small objects keep in use among the garbage
// of every request, while the encoded form of a typical entry (one tag) is
// ~20 bytes in large pointer-free chunks the garbage collector never
// scans. The slot → entry map holds no pointers either.
//
// Chunks are append-only: bytes once written never change, so a decoded
// jobExt may point its strings into them (no copy on the hot path). An
// entry rewritten or deleted leaves garbage behind; when garbage outgrows
// the live bytes the live entries are copied to fresh chunks and the old
// chunks are left to the garbage collector, which keeps any still
// referenced by a decoded string alive. Strings that leave the engine (job
// views, events, ids) are cloned so they never pin a chunk.

const extChunkSize = 1 << 20

// extMinCompact is the garbage below which the arena is never compacted
// (a variable so tests can compact on every delete).
var extMinCompact = 4 << 20

// presence bits of an encoded entry, in field order
const (
	xClientID uint32 = 1 << iota
	xCreated
	xExpire
	xTags
	xReplyTo
	xCron
	xNotify
	xLastError
	xResult
	xRetainResult
	xRetainUntil
	xCounters
)

type extStore struct {
	refs     extRefs // slot → chunk<<32 | offset of the entry
	chunks   [][]byte
	live     int // bytes of referenced entries
	garbage  int // bytes of entries no longer referenced
	compacts int
	buf      []byte
	// During a bulk load (snapchunk.go) the refs of loaded entries are
	// kept here and put in the map by flush, in one tight loop: a map
	// insert between the load's other per-job work cost ~3× as much as in
	// a run of inserts, and slowed that work down too (docs/benchmarks.md,
	// "Restart with far-future jobs"). Reading an entry flushes first.
	deferring bool
	pending   []extPending
}

type extPending struct {
	slot uint32
	ref  uint64
}

func newExtStore() extStore { return extStore{} }

func (s *extStore) len() int { return s.refs.len() + len(s.pending) }

// entry returns the encoded bytes of slot's entry (nil if none).
func (s *extStore) entry(slot uint32) []byte {
	if s.deferring {
		s.flush() // a bulk load reads no entry; be right if one did
	}
	ref, ok := s.refs.get(slot)
	if !ok {
		return nil
	}
	c := s.chunks[ref>>32]
	off := uint32(ref)
	n, k := binary.Uvarint(c[off:])
	start := int(off) + k
	return c[start : start+int(n)]
}

func entrySize(body int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(body)) + body
}

// set stores x as slot's entry (deleting it when x is empty).
func (s *extStore) set(slot uint32, x *jobExt) {
	s.del(slot)
	if x.empty() {
		return
	}
	s.buf = x.encode(s.buf[:0])
	need := entrySize(len(s.buf))
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < need {
		s.chunks = append(s.chunks, make([]byte, 0, max(extChunkSize, need)))
		last++
	}
	c := s.chunks[last]
	off := len(c)
	c = binary.AppendUvarint(c, uint64(len(s.buf)))
	c = append(c, s.buf...)
	s.chunks[last] = c
	s.refs.set(slot, uint64(last)<<32|uint64(off))
	s.live += need
}

// addRaw stores an encoded entry (from a snapshot; validExt checked it)
// for a slot that has none: one a snapshot load just allocated (a slot's
// entry goes when its job does). Not looking for an old entry spares a
// map miss per job with rare fields, most of what the arena cost a
// snapshot load (docs/benchmarks.md).
func (s *extStore) addRaw(slot uint32, b []byte) {
	need := entrySize(len(b))
	last := len(s.chunks) - 1
	if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < need {
		s.chunks = append(s.chunks, make([]byte, 0, max(extChunkSize, need)))
		last++
	}
	off := len(s.chunks[last])
	s.chunks[last] = append(binary.AppendUvarint(s.chunks[last], uint64(len(b))), b...)
	ref := uint64(last)<<32 | uint64(off)
	if s.deferring {
		s.pending = append(s.pending, extPending{slot, ref})
	} else {
		s.refs.set(slot, ref)
	}
	s.live += need
}

// flush ends deferring: the pending refs go into the table, in its order.
func (s *extStore) flush() {
	s.deferring = false
	s.refs.setAll(s.pending)
	s.pending = nil
}

// validExt reports whether b is a well-formed encoded entry, walking it
// with every length checked (decode trusts them).
func validExt(b []byte) bool {
	bits, k := binary.Uvarint(b)
	if k <= 0 || bits >= uint64(xCounters)<<1 || bits == 0 {
		return false
	}
	b = b[k:]
	ok := true
	uv := func() uint64 {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			ok = false
			return 0
		}
		b = b[n:]
		return v
	}
	sv := func() {
		if _, n := binary.Varint(b); n <= 0 {
			ok = false
		} else {
			b = b[n:]
		}
	}
	str := func() {
		n := uv()
		if !ok || n > uint64(len(b)) {
			ok = false
			return
		}
		b = b[n:]
	}
	for bit := uint32(1); bit <= xCounters && ok; bit <<= 1 {
		if uint32(bits)&bit == 0 {
			continue
		}
		switch bit {
		case xClientID, xReplyTo, xCron, xNotify, xLastError:
			str()
		case xCreated, xExpire, xRetainResult, xRetainUntil:
			sv()
		case xTags:
			n := uv()
			if !ok || n > uint64(len(b)) || n%2 != 0 {
				return false
			}
			for i := uint64(0); i < n && ok; i++ {
				str()
			}
		case xResult:
			uv()
			uv()
			uv()
		case xCounters:
			uv()
			uv()
			uv()
			uv()
		}
	}
	return ok && len(b) == 0
}

// del forgets slot's entry.
func (s *extStore) del(slot uint32) {
	b := s.entry(slot)
	if b == nil {
		return
	}
	s.refs.del(slot)
	n := entrySize(len(b))
	s.live -= n
	s.garbage += n
	if s.garbage >= extMinCompact && s.garbage > s.live {
		s.compact()
	}
}

// compact copies the live entries into fresh chunks.
func (s *extStore) compact() {
	old := s.chunks
	s.chunks = nil
	s.compacts++
	s.live, s.garbage = 0, 0
	s.refs.each(func(e *extCell) {
		c := old[e.chunk]
		n, k := binary.Uvarint(c[e.off:])
		raw := c[e.off : int(e.off)+k+int(n)]
		last := len(s.chunks) - 1
		if last < 0 || cap(s.chunks[last])-len(s.chunks[last]) < len(raw) {
			s.chunks = append(s.chunks, make([]byte, 0, max(extChunkSize, len(raw))))
			last++
		}
		e.chunk, e.off = uint32(last), uint32(len(s.chunks[last]))
		s.chunks[last] = append(s.chunks[last], raw...)
		s.live += len(raw)
	})
}

// get decodes slot's entry; ok is false when the job has none. The
// strings point into the arena: clone any that leave the engine.
func (s *extStore) get(slot uint32) (x jobExt, ok bool) {
	b := s.entry(slot)
	if b == nil {
		return x, false
	}
	x.decode(b)
	return x, true
}

// clientID is the client-chosen id of slot's job, without decoding the
// rest (id lookups compare it).
func (s *extStore) clientID(slot uint32) string {
	b := s.entry(slot)
	if b == nil {
		return ""
	}
	bits, k := binary.Uvarint(b)
	if uint32(bits)&xClientID == 0 {
		return ""
	}
	str, _ := readStr(b[k:])
	return str
}

func (x *jobExt) encode(b []byte) []byte {
	var bits uint32
	if x.clientID != "" {
		bits |= xClientID
	}
	if x.created != 0 {
		bits |= xCreated
	}
	if x.expire != 0 {
		bits |= xExpire
	}
	if len(x.tags) > 0 {
		bits |= xTags
	}
	if x.replyTo != "" {
		bits |= xReplyTo
	}
	if x.cron != "" {
		bits |= xCron
	}
	if x.notify != "" {
		bits |= xNotify
	}
	if x.lastError != "" {
		bits |= xLastError
	}
	if x.result != (BlobRef{}) {
		bits |= xResult
	}
	if x.retainResult != 0 {
		bits |= xRetainResult
	}
	if x.retainUntil != 0 {
		bits |= xRetainUntil
	}
	if x.timeouts|x.releases|x.buries|x.kicks != 0 {
		bits |= xCounters
	}
	b = binary.AppendUvarint(b, uint64(bits))
	if bits&xClientID != 0 {
		b = appendStr(b, x.clientID)
	}
	if bits&xCreated != 0 {
		b = binary.AppendVarint(b, x.created)
	}
	if bits&xExpire != 0 {
		b = binary.AppendVarint(b, x.expire)
	}
	if bits&xTags != 0 {
		b = binary.AppendUvarint(b, uint64(len(x.tags)))
		for _, t := range x.tags {
			b = appendStr(b, t)
		}
	}
	if bits&xReplyTo != 0 {
		b = appendStr(b, x.replyTo)
	}
	if bits&xCron != 0 {
		b = appendStr(b, x.cron)
	}
	if bits&xNotify != 0 {
		b = appendStr(b, x.notify)
	}
	if bits&xLastError != 0 {
		b = appendStr(b, x.lastError)
	}
	if bits&xResult != 0 {
		b = binary.AppendUvarint(b, uint64(x.result.Segment))
		b = binary.AppendUvarint(b, uint64(x.result.Offset))
		b = binary.AppendUvarint(b, uint64(x.result.Len))
	}
	if bits&xRetainResult != 0 {
		b = binary.AppendVarint(b, x.retainResult)
	}
	if bits&xRetainUntil != 0 {
		b = binary.AppendVarint(b, x.retainUntil)
	}
	if bits&xCounters != 0 {
		for _, v := range [4]uint32{x.timeouts, x.releases, x.buries, x.kicks} {
			b = binary.AppendUvarint(b, uint64(v))
		}
	}
	return b
}

// decode reads an entry the engine itself encoded (never bytes from
// outside), so it trusts the lengths.
func (x *jobExt) decode(b []byte) {
	bits64, k := binary.Uvarint(b)
	bits := uint32(bits64)
	b = b[k:]
	uv := func() uint64 { v, n := binary.Uvarint(b); b = b[n:]; return v }
	sv := func() int64 { v, n := binary.Varint(b); b = b[n:]; return v }
	str := func() string { s, n := readStr(b); b = b[n:]; return s }
	if bits&xClientID != 0 {
		x.clientID = str()
	}
	if bits&xCreated != 0 {
		x.created = sv()
	}
	if bits&xExpire != 0 {
		x.expire = sv()
	}
	if bits&xTags != 0 {
		x.tags = make([]string, uv())
		for i := range x.tags {
			x.tags[i] = str()
		}
	}
	if bits&xReplyTo != 0 {
		x.replyTo = str()
	}
	if bits&xCron != 0 {
		x.cron = str()
	}
	if bits&xNotify != 0 {
		x.notify = str()
	}
	if bits&xLastError != 0 {
		x.lastError = str()
	}
	if bits&xResult != 0 {
		x.result.Segment = uint32(uv())
		x.result.Offset = uint32(uv())
		x.result.Len = uint32(uv())
	}
	if bits&xRetainResult != 0 {
		x.retainResult = sv()
	}
	if bits&xRetainUntil != 0 {
		x.retainUntil = sv()
	}
	if bits&xCounters != 0 {
		x.timeouts, x.releases, x.buries, x.kicks = uint32(uv()), uint32(uv()), uint32(uv()), uint32(uv())
	}
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// readStr returns the length-prefixed string at the start of b, pointing
// into b, and the bytes it took.
func readStr(b []byte) (string, int) {
	n, k := binary.Uvarint(b)
	if n == 0 {
		return "", k
	}
	return unsafe.String(&b[k], int(n)), k + int(n)
}

// ext returns the rare fields of slot's job (zero when it has none).
func (e *Engine) ext(slot uint32) (jobExt, bool) {
	if e.jobs.get(slot).flags&fHasExt == 0 {
		return jobExt{}, false
	}
	return e.exts.get(slot)
}

// setExt stores the rare fields of slot's job.
func (e *Engine) setExt(slot uint32, x *jobExt) {
	e.exts.set(slot, x)
	if j := e.jobs.get(slot); x.empty() {
		j.flags &^= fHasExt
	} else {
		j.flags |= fHasExt
	}
}

// delExt drops the rare fields of slot's job.
func (e *Engine) delExt(slot uint32) {
	e.exts.del(slot)
	e.jobs.get(slot).flags &^= fHasExt
}

// cloneExtStrings detaches x's strings from the arena, for copies that
// leave the engine.
func cloneExtStrings(x *jobExt) {
	x.clientID = strings.Clone(x.clientID)
	x.replyTo = strings.Clone(x.replyTo)
	x.cron = strings.Clone(x.cron)
	x.notify = strings.Clone(x.notify)
	x.lastError = strings.Clone(x.lastError)
	if len(x.tags) > 0 {
		for i, t := range x.tags {
			x.tags[i] = strings.Clone(t)
		}
	}
}
