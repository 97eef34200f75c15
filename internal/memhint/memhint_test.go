package memhint

import (
	"bytes"
	"testing"
)

// Regions that touch merge into one run (a huge page may straddle two
// slab chunks); regions apart stay apart; inward rounding never reaches
// outside a run.
func TestSpans(t *testing.T) {
	mem := make([]byte, 10<<20)
	s := spans([][]byte{mem[4<<20 : 6<<20], mem[:1<<20], mem[1<<20 : 3<<20], nil})
	if len(s) != 2 || s[0].to-s[0].from != 3<<20 || s[1].to-s[1].from != 2<<20 || s[0].to >= s[1].from {
		t.Fatalf("spans: %+v", s)
	}
	for _, x := range s {
		in, ok := inward(x, hugePage)
		if ok && (in.from < x.from || in.to > x.to || in.from%hugePage != 0 || in.to%hugePage != 0) {
			t.Fatalf("inward(%+v) = %+v", x, in)
		}
	}
	if _, ok := inward(span{4096, 8192}, hugePage); ok {
		t.Fatal("a run smaller than a huge page rounds to something")
	}
}

// The hints leave the bytes as they were, in every mode, and a closed
// stop ends Prepare without touching the rest.
func TestPrepareKeepsBytes(t *testing.T) {
	regions := make([][]byte, 4)
	want := make([][]byte, 4)
	for i := range regions {
		regions[i] = make([]byte, 3<<20+4096*i)
		for k := range regions[i] {
			regions[i][k] = byte(k*7 + i)
		}
		want[i] = bytes.Clone(regions[i])
	}
	stopped := make(chan struct{})
	close(stopped)
	for _, mode := range []Mode{0, HugePages, Populate, HugePages | Populate} {
		Prepare(regions, mode, nil)
		Prepare(regions, mode, stopped)
		for i := range regions {
			if !bytes.Equal(regions[i], want[i]) {
				t.Fatalf("mode %d changed region %d", mode, i)
			}
		}
	}
}
