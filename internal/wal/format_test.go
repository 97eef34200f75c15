package wal

import (
	"encoding/binary"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// saltedPrefix computes by hand what crc32.Checksum gives for the eight
// bytes salt ‖ word, without allocating.
func TestSaltedPrefixIsTheChecksum(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 10000 {
		salt, word := rng.Uint32(), rng.Uint32()
		if i == 0 {
			salt, word = 0, 0
		}
		var b [8]byte
		binary.LittleEndian.PutUint32(b[0:], salt)
		binary.LittleEndian.PutUint32(b[4:], word)
		if got, want := saltedPrefix(salt, word), crc32.Checksum(b[:], castagnoli); got != want {
			t.Fatalf("salt %#x word %#x: %#x, want %#x", salt, word, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { saltedPrefix(1, 2) }); n != 0 {
		t.Fatalf("%.0f allocations", n)
	}
}
