package engine

import (
	"testing"
	"time"
)

// replayShifted applies every logged entry to a new engine as if the log
// had put each entry `shift` bytes further into its file, as another
// replica's log would.
func (s *memSink) replayShifted(t *testing.T, shift int) (*Engine, func(BlobRef) ([]byte, error)) {
	t.Helper()
	moved := append(make([]byte, shift), s.seg...)
	e := New(Options{Seed: 99})
	for _, b := range s.bodies {
		ent, err := DecodeEntry(moved[shift+b[0]:shift+b[1]], 2, uint32(shift+b[0]))
		if err != nil {
			t.Fatal(err)
		}
		e.Apply(ent)
	}
	return e, func(r BlobRef) ([]byte, error) { return moved[r.Offset : r.Offset+r.Len], nil }
}

func mustHash(t *testing.T, e *Engine, read func(BlobRef) ([]byte, error)) [32]byte {
	t.Helper()
	h, err := e.StateHash(read)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func hashFixture(t *testing.T) *fixture {
	f := newFixture(t)
	if _, _, err := f.e.CreateNamespace(f.now, "other", NamespaceConfig{AutoCreateQueues: true}); err != nil {
		t.Fatal(err)
	}
	if err := f.e.AddToken(f.now, "other", "hash-of-a-token", "ci"); err != nil {
		t.Fatal(err)
	}
	f.put("a", PutRequest{Payload: []byte("first"), Tags: map[string]string{"k": "v"}})
	f.put("a", PutRequest{Payload: []byte("second"), Delay: dur(time.Minute)})
	f.put("a", PutRequest{Payload: []byte("fourth"), Priority: u32(9)})
	f.put("b", PutRequest{Payload: []byte("third"), Key: "user-1"})
	f.tick(time.Second)
	j := f.take1("a")
	f.ack(j, AckRequest{})
	f.take1("b")
	return f
}

func TestStateHashEqualAcrossReplicaLayouts(t *testing.T) {
	f := hashFixture(t)
	want := mustHash(t, f.e, func(r BlobRef) ([]byte, error) { return f.sink.blob(r), nil })
	for _, shift := range []int{0, 1, 4096} {
		e, read := f.sink.replayShifted(t, shift)
		if got := mustHash(t, e, read); got != want {
			t.Fatalf("replica with its log shifted by %d bytes: hash %x, leader %x", shift, got, want)
		}
	}
}

func TestStateHashSeesEveryDifference(t *testing.T) {
	base := hashFixture(t)
	read := func(f *fixture) func(BlobRef) ([]byte, error) {
		return func(r BlobRef) ([]byte, error) { return f.sink.blob(r), nil }
	}
	want := mustHash(t, base.e, read(base))

	// The same payload bytes damaged in the replica's log.
	e, rd := base.sink.replayShifted(t, 8)
	damaged := func(r BlobRef) ([]byte, error) {
		b, _ := rd(r)
		b = append([]byte{}, b...)
		b[0] ^= 1
		return b, nil
	}
	if mustHash(t, e, damaged) == want {
		t.Fatal("a changed payload byte did not change the hash")
	}
	for name, change := range map[string]func(f *fixture){
		"one more job":    func(f *fixture) { f.put("c", PutRequest{Payload: []byte("x")}) },
		"a reservation":   func(f *fixture) { f.take1("a") },
		"queue paused":    func(f *fixture) { f.e.SetPaused(f.now, "default", "a", true) },
		"token revoked":   func(f *fixture) { f.e.RevokeToken(f.now, "other", "hash-of-a-token") },
		"namespace added": func(f *fixture) { f.e.CreateNamespace(f.now, "third", NamespaceConfig{}) },
	} {
		f := hashFixture(t)
		change(f)
		if mustHash(t, f.e, read(f)) == want {
			t.Errorf("%s: hash unchanged", name)
		}
	}
}
