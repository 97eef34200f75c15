package engine

import (
	"bytes"
	"testing"
	"time"
)

func sampleEntries(t testing.TB) [][]byte {
	f := newFixture(t.(*testing.T))
	f.put("q", PutRequest{Key: "k", Tags: map[string]string{"a": "b"}, TTL: dur(2 * time.Hour), ReplyTo: "r", Cron: "@hourly"})
	f.put("q", PutRequest{Key: "k2", Tags: map[string]string{"c": "d"}, TTL: dur(time.Hour), ReplyTo: "r", Payload: []byte{0, 1, 2}})
	j := f.take1("q")
	f.e.Nack(f.now, "default", "q", j.ID, NackRequest{Receipt: j.Receipt, Error: "x"})
	f.e.PutQueue(f.now, "default", "q2", QueuePatch{})
	f.e.CreateNamespace(f.now, "ns2", NamespaceConfig{})
	f.put("q", PutRequest{IdempotencyKey: "i", Notify: "watch#42"})
	f.e.ConfigureNamespace(f.now, "web", NamespaceConfig{Channels: ChannelHistory{Size: 3, TTL: time.Minute, Durable: true}})
	f.e.Publish(f.now, "web", "c", ChannelPosition{Epoch: "E1", Offset: 4}, []byte(`{"x":1}`))
	var out [][]byte
	for _, b := range f.sink.bodies {
		out = append(out, f.sink.seg[b[0]:b[1]])
	}
	return out
}

func TestEntryRoundTrip(t *testing.T) {
	for _, body := range sampleEntries(t) {
		ent, err := DecodeEntry(body, 3, 100)
		if err != nil {
			t.Fatal(err)
		}
		again := ent.Encode(nil)
		if !bytes.Equal(again, body) {
			t.Fatalf("re-encoding differs:\n%x\n%x", body, again)
		}
		// every truncation is an error, never a panic
		for i := 0; i < len(body); i++ {
			if _, err := DecodeEntry(body[:i], 0, 0); err == nil {
				t.Fatalf("truncated at %d of %d decoded", i, len(body))
			}
		}
	}
}

func FuzzDecodeEntry(f *testing.F) {
	for _, b := range sampleEntries(&testing.T{}) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ent, err := DecodeEntry(body, 1, 0)
		if err != nil {
			return
		}
		// whatever decodes must apply without panicking
		e := New(Options{Seed: 1})
		e.Apply(ent)
		e.Advance(time.UnixMilli(ent.Time).Add(time.Hour))
		if err := e.checkInvariants(); err != nil {
			t.Fatalf("decoded entry broke invariants: %v", err)
		}
	})
}
