package pubsub

import (
	"testing"
	"time"
)

// TestPublishAtFollowsTheLog: durable publications are numbered by the
// caller; the hub keeps their numbers, ignores repeats, and treats another
// epoch or a gap as lost history.
func TestPublishAtFollowsTheLog(t *testing.T) {
	h, clk := newHub(t, Config{Durable: true})
	pos, err := h.Position("ns", "c")
	if err != nil || pos.Offset != 0 || pos.Epoch == "" {
		t.Fatalf("position of a new channel: %+v %v", pos, err)
	}
	sub := &collector{}
	if _, err := h.Subscribe("ns", "c", sub, SubscribeOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	at := clk.now()
	for o := uint64(1); o <= 3; o++ {
		if _, err := h.PublishAt("ns", "c", pos.Epoch, o, at, []byte(`1`)); err != nil {
			t.Fatal(err)
		}
	}
	if p, _ := h.PublishAt("ns", "c", pos.Epoch, 2, at, []byte(`1`)); p != nil {
		t.Fatal("a repeated offset was published again")
	}
	if !same(sub.offsets(), seq(1, 3)) {
		t.Fatalf("subscriber got %v, want 1..3", sub.offsets())
	}
	// a gap: what is held no longer leads to offset 6 without a loss
	h.PublishAt("ns", "c", pos.Epoch, 6, at, []byte(`1`))
	if r, _ := h.History("ns", "c", 3, pos.Epoch, 0); r.Recovered {
		t.Fatalf("recovered across a gap: %+v", r)
	}
	if r, _ := h.History("ns", "c", 5, pos.Epoch, 0); !r.Recovered || !same(offsetsOf(r.Publications), seq(6, 6)) {
		t.Fatalf("history after the gap: %+v", r)
	}
	// another epoch replaces the old one
	h.PublishAt("ns", "c", "other", 1, at, []byte(`1`))
	if p, _ := h.Position("ns", "c"); p.Epoch != "other" || p.Offset != 1 {
		t.Fatalf("after an epoch change: %+v", p)
	}
	if _, err := h.PublishAt("ns", "c", "", 1, at, nil); err == nil {
		t.Fatal("publication without an epoch accepted")
	}
}

// TestRestoreAndDurableSweep: a restored channel answers recovery from the
// restored history, and the sweep never forgets a durable channel that has
// had publications (its epoch lives in the log).
func TestRestoreAndDurableSweep(t *testing.T) {
	h, clk := newHub(t, Config{HistoryTTL: time.Minute})
	h.Configure("dur", Config{Durable: true, HistoryTTL: time.Minute})
	pubs := []*Publication{{Offset: 4, Epoch: "E", Data: []byte(`4`), Time: clk.now()}, {Offset: 5, Epoch: "E", Data: []byte(`5`), Time: clk.now()}}
	if err := h.Restore("dur", "c", Position{Epoch: "E", Offset: 5}, pubs); err != nil {
		t.Fatal(err)
	}
	r, _ := h.History("dur", "c", 3, "E", 0)
	if !r.Recovered || !same(offsetsOf(r.Publications), seq(4, 5)) {
		t.Fatalf("history of a restored channel: %+v", r)
	}
	publish(t, h, "mem", "c", 1)
	clk.add(time.Hour)
	h.Sweep()
	clk.add(time.Hour)
	h.Sweep()
	if p, _ := h.Position("dur", "c"); p.Epoch != "E" || p.Offset != 5 {
		t.Fatalf("durable channel after idle sweeps: %+v, want epoch E offset 5", p)
	}
	if p, _ := h.Position("mem", "c"); p.Offset != 0 {
		t.Fatalf("memory-only channel after idle sweeps: %+v, want forgotten (offset 0)", p)
	}
}
