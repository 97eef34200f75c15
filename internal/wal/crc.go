package wal

import "hash/crc32"

// After a bad frame, recovery looks for the next offset where a frame
// validates. Checking a candidate by running CRC-32C over its claimed body
// costs O(length), and in garbage about one offset in sixty-four claims a
// length that fits in the file — tens of MiB each. To keep that search
// linear, crcIndex remembers the checksum of every 4 KiB prefix of the
// segment and derives the checksum of any byte range from two prefixes with
// the CRC "combine" algebra (as zlib's crc32_combine), so a candidate costs
// O(4 KiB + log length) no matter what length it claims.

const (
	castagnoliReflected = 0x82f63b78
	crcIndexStride      = 4096
)

// multModP multiplies two polynomials modulo the (reflected) Castagnoli
// polynomial.
func multModP(a, b uint32) uint32 {
	m := uint32(1) << 31
	var p uint32
	for {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		m >>= 1
		if b&1 != 0 {
			b = b>>1 ^ castagnoliReflected
		} else {
			b >>= 1
		}
	}
	return p
}

// x2nTable[k] = x^(2^k) mod P.
var x2nTable = func() (t [32]uint32) {
	p := uint32(1) << 30 // x^1
	t[0] = p
	for k := 1; k < 32; k++ {
		p = multModP(p, p)
		t[k] = p
	}
	return t
}()

// xPow8n returns x^(8n) mod P: the operator that appends n zero bytes.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	k := 3
	for n != 0 {
		if n&1 != 0 {
			p = multModP(x2nTable[k&31], p)
		}
		n >>= 1
		k++
	}
	return p
}

// crcCombine returns CRC(a ‖ b) from CRC(a), CRC(b) and len(b).
func crcCombine(crcA, crcB uint32, lenB int64) uint32 {
	return multModP(xPow8n(lenB), crcA) ^ crcB
}

// crcIndex answers "CRC-32C of data[a:b]" in O(stride + log(b-a)).
type crcIndex struct {
	data   []byte
	prefix []uint32 // prefix[i] = CRC of data[:i*stride]
}

func newCRCIndex(data []byte) *crcIndex {
	ix := &crcIndex{data: data, prefix: make([]uint32, len(data)/crcIndexStride+1)}
	var c uint32
	for i := 1; i < len(ix.prefix); i++ {
		c = crc32.Update(c, castagnoli, data[(i-1)*crcIndexStride:i*crcIndexStride])
		ix.prefix[i] = c
	}
	return ix
}

func (ix *crcIndex) prefixCRC(k int) uint32 {
	i := k / crcIndexStride
	return crc32.Update(ix.prefix[i], castagnoli, ix.data[i*crcIndexStride:k])
}

// rangeCRC returns the CRC-32C of data[a:b]. Since
// CRC(x ‖ y) = CRC(x)·x^(8|y|) ⊕ CRC(y), CRC(y) = CRC(x ‖ y) ⊕ CRC(x)·x^(8|y|).
func (ix *crcIndex) rangeCRC(a, b int) uint32 {
	if b-a <= 2*crcIndexStride {
		return crc32.Checksum(ix.data[a:b], castagnoli)
	}
	return ix.prefixCRC(b) ^ multModP(xPow8n(int64(b-a)), ix.prefixCRC(a))
}
