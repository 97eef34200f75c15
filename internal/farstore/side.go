package farstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// # Side files
//
// Next to each bucket, DIR/<bucket start>.idx holds what the broker keeps
// of the bucket in memory, so a restart loads that instead of reading the
// bucket:
//
//	side   = magic "CHQFIX01" | start i64 | size i64 | seed u64 |
//	         gen uvarint | jobs uvarint | dead uvarint | nq uvarint |
//	         nq × (uvarint key length ‖ key ‖ uvarint jobs) |
//	         filter (ids) | filter (sequence numbers) | crc u32
//	filter = nsub uvarint | nsub × (limit uvarint | n uvarint |
//	         words uvarint | words × u64)
//	         crc = CRC-32C of every byte before it
//
// gen and size say which generation of the bucket (farstore.go) and how
// many bytes of it the file describes; seed is the
// hash seed the filters were built with. A side file is only a cache: it
// is written without fsync (a torn or lost one fails its CRC or is
// missing), and one whose size is not the size a snapshot recorded for
// the bucket describes other bytes (stale). In each case the broker reads
// the bucket instead; a side file alone never stops a start.

const sideSuffix = ".idx"

var sideMagic = [8]byte{'C', 'H', 'Q', 'F', 'I', 'X', '0', '1'}

// maxSide bounds a side file read, so a damaged file cannot make the
// reader allocate without bound: a bucket's filters take about 3 bytes per
// job, and a bucket holds far fewer than 100 M jobs.
const maxSide = 512 << 20

// Side is what a side file holds.
type Side struct {
	Start, Size int64
	Gen         uint32
	Seed        uint64
	Jobs        int64
	Dead        int64 // items the bucket holds that are no longer live
	Queues      []QueueCount
	IDs, Seqs   Filter
}

// QueueCount is how many jobs of one queue a bucket holds.
type QueueCount struct {
	Key  string
	Jobs int64
}

// SideName is the file name of the side file of the bucket starting at
// start.
func SideName(start int64) string { return strconv.FormatInt(start, 10) + sideSuffix }

// WriteSide writes s to its side file: a temporary file renamed over the
// old one, so a crash leaves the old file or the new one whole (or, the
// write not being synced, a file that fails its CRC).
func WriteSide(dir string, s *Side) error {
	b := make([]byte, 0, 64+s.IDs.Bytes()+s.Seqs.Bytes())
	b = append(b, sideMagic[:]...)
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Start))
	b = binary.LittleEndian.AppendUint64(b, uint64(s.Size))
	b = binary.LittleEndian.AppendUint64(b, s.Seed)
	b = binary.AppendUvarint(b, uint64(s.Gen))
	b = binary.AppendUvarint(b, uint64(s.Jobs))
	b = binary.AppendUvarint(b, uint64(s.Dead))
	b = binary.AppendUvarint(b, uint64(len(s.Queues)))
	for _, q := range s.Queues {
		b = binary.AppendUvarint(b, uint64(len(q.Key)))
		b = append(b, q.Key...)
		b = binary.AppendUvarint(b, uint64(q.Jobs))
	}
	b = s.IDs.appendBinary(b)
	b = s.Seqs.appendBinary(b)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	path := filepath.Join(dir, SideName(s.Start))
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("farstore: write side file: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("farstore: write side file: %w", err)
	}
	return nil
}

// ReadSide reads and checks the side file of the bucket starting at start.
// A missing file wraps os.ErrNotExist; a damaged one is a *DamageError.
func ReadSide(dir string, start int64) (*Side, error) {
	path := filepath.Join(dir, SideName(start))
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("farstore: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("farstore: %w", err)
	}
	bad := func(off int, reason string) error {
		return &DamageError{File: path, Offset: int64(off), Reason: reason}
	}
	if st.Size() > maxSide {
		return nil, bad(0, fmt.Sprintf("side file of %d bytes exceeds %d", st.Size(), maxSide))
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return nil, fmt.Errorf("farstore: read %s: %w", path, err)
	}
	if len(b) < 8+24+4 || [8]byte(b[:8]) != sideMagic {
		return nil, bad(0, "not a side file (bad magic or too short)")
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, bad(len(body), "side file checksum mismatch")
	}
	s := &Side{
		Start: int64(binary.LittleEndian.Uint64(body[8:])),
		Size:  int64(binary.LittleEndian.Uint64(body[16:])),
		Seed:  binary.LittleEndian.Uint64(body[24:]),
	}
	d := decoder{p: body[32:]}
	s.Gen = uint32(d.uvarint())
	s.Jobs = int64(d.uvarint())
	s.Dead = int64(d.uvarint())
	nq := d.uvarint()
	if nq > uint64(len(d.p)) {
		return nil, bad(len(body)-len(d.p), "bad queue count")
	}
	s.Queues = make([]QueueCount, 0, nq)
	for i := uint64(0); i < nq && d.err == nil; i++ {
		k := d.bytes()
		s.Queues = append(s.Queues, QueueCount{Key: string(k), Jobs: int64(d.uvarint())})
	}
	d.filter(&s.IDs)
	d.filter(&s.Seqs)
	if d.err == nil && len(d.p) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, bad(len(body)-len(d.p), d.err.Error())
	}
	if s.Start != start {
		return nil, bad(8, fmt.Sprintf("side file names bucket %d, not %d", s.Start, start))
	}
	return s, nil
}

// RemoveSide deletes a side file (a missing one is not an error).
func RemoveSide(dir string, start int64) error {
	err := os.Remove(filepath.Join(dir, SideName(start)))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ListSides returns the bucket starts of the side files in dir.
func ListSides(dir string) ([]int64, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, e := range ents {
		base, ok := strings.CutSuffix(e.Name(), sideSuffix)
		if !ok {
			continue
		}
		if v, err := strconv.ParseInt(base, 10, 64); err == nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// decoder reads a side file's body; the first error sticks.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, k := binary.Uvarint(d.p)
	if k <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.p = d.p[k:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.err = errors.New("length runs past the end")
		return nil
	}
	v := d.p[:n]
	d.p = d.p[n:]
	return v
}

func (d *decoder) filter(f *Filter) {
	nsub := d.uvarint()
	if d.err == nil && nsub > 64 {
		d.err = fmt.Errorf("filter of %d sub-filters", nsub)
	}
	for i := uint64(0); i < nsub && d.err == nil; i++ {
		limit, n, words := d.uvarint(), d.uvarint(), d.uvarint()
		if d.err != nil {
			return
		}
		if words == 0 || words > uint64(len(d.p))/8 || n > limit || limit > filterMaxSub {
			d.err = errors.New("bad sub-filter")
			return
		}
		bits := make([]uint64, words)
		for w := range bits {
			bits[w] = binary.LittleEndian.Uint64(d.p[8*w:])
		}
		d.p = d.p[8*words:]
		f.subs = append(f.subs, sub{bits: bits, n: uint32(n), limit: uint32(limit)})
	}
}
