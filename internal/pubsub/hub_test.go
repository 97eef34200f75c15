package pubsub

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newHub(t *testing.T, conf Config) (*Hub, *fakeClock) {
	clk := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	h := New(Options{Default: conf, Clock: clk.now, SweepInterval: time.Hour})
	t.Cleanup(h.Close)
	return h, clk
}

// collector is a subscriber with a bounded queue, like a connection.
type collector struct {
	mu   sync.Mutex
	got  []*Publication
	cap  int
	full bool
}

func (c *collector) Deliver(p *Publication) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cap > 0 && len(c.got) >= c.cap {
		c.full = true
		return false
	}
	c.got = append(c.got, p)
	return true
}

func (c *collector) offsets() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []uint64
	for _, p := range c.got {
		out = append(out, p.Offset)
	}
	return out
}

func publish(t *testing.T, h *Hub, ns, ch string, n int) []*Publication {
	t.Helper()
	var out []*Publication
	for i := 0; i < n; i++ {
		p, err := h.Publish(ns, ch, []byte(fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

func offsetsOf(ps []*Publication) []uint64 {
	var out []uint64
	for _, p := range ps {
		out = append(out, p.Offset)
	}
	return out
}

func seq(from, to uint64) []uint64 {
	var out []uint64
	for o := from; o <= to; o++ {
		out = append(out, o)
	}
	return out
}

func same(a, b []uint64) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

func TestOffsetsAndOrder(t *testing.T) {
	h, _ := newHub(t, Config{})
	var c collector
	sub, err := h.Subscribe("ns", "ch", &c, SubscribeOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ps := publish(t, h, "ns", "ch", 5)
	if !same(offsetsOf(ps), seq(1, 5)) {
		t.Fatalf("offsets %v", offsetsOf(ps))
	}
	for _, p := range ps {
		if p.Epoch != ps[0].Epoch {
			t.Fatalf("epoch changed within a channel's life: %q vs %q", p.Epoch, ps[0].Epoch)
		}
	}
	if !same(c.offsets(), seq(1, 5)) {
		t.Fatalf("delivered %v", c.offsets())
	}
	sub.Unsubscribe()
	sub.Unsubscribe() // twice is fine
	publish(t, h, "ns", "ch", 1)
	if len(c.offsets()) != 5 {
		t.Fatalf("delivered after unsubscribe: %v", c.offsets())
	}
	other := publish(t, h, "ns", "other", 1)
	if other[0].Offset != 1 || other[0].Epoch == ps[0].Epoch {
		t.Fatalf("another channel: offset %d epoch %q (first channel %q)", other[0].Offset, other[0].Epoch, ps[0].Epoch)
	}
}

func TestRecovery(t *testing.T) {
	h, _ := newHub(t, Config{HistorySize: 10})
	ps := publish(t, h, "ns", "ch", 7)
	epoch := ps[0].Epoch
	for _, tc := range []struct {
		since     uint64
		epoch     string
		recovered bool
		want      []uint64
	}{
		{3, epoch, true, seq(4, 7)},
		{0, epoch, true, seq(1, 7)},
		{0, "", true, seq(1, 7)},
		{7, epoch, true, nil},
		{3, "", false, nil},      // an offset without its epoch proves nothing
		{3, "other", false, nil}, // epoch changed
		{8, epoch, false, nil},   // from the future: another epoch in disguise
	} {
		var c collector
		var res SubscribeResult
		sub, err := h.Subscribe("ns", "ch", &c, SubscribeOptions{Recover: true, Since: tc.since, Epoch: tc.epoch}, func(r SubscribeResult) { res = r })
		if err != nil {
			t.Fatal(err)
		}
		if res.Recovered != tc.recovered || !same(offsetsOf(res.Publications), tc.want) || res.Offset != 7 || res.Epoch != epoch {
			t.Errorf("since %d epoch %q: recovered %v pubs %v offset %d epoch %q; want %v %v 7 %q",
				tc.since, tc.epoch, res.Recovered, offsetsOf(res.Publications), res.Offset, res.Epoch, tc.recovered, tc.want, epoch)
		}
		sub.Unsubscribe()
	}

	// Ring overflow: offsets 1..5 are gone, so since=4 cannot be recovered
	// but since=5 (everything after 5 is held) can.
	publish(t, h, "ns", "ch", 8) // 15 in all, 6..15 held
	for _, tc := range []struct {
		since uint64
		ok    bool
	}{{4, false}, {5, true}, {14, true}} {
		r, _ := h.History("ns", "ch", tc.since, epoch, 0)
		if r.Recovered != tc.ok {
			t.Errorf("after overflow, since %d: recovered %v, want %v", tc.since, r.Recovered, tc.ok)
		}
		if tc.ok && !same(offsetsOf(r.Publications), seq(tc.since+1, 15)) {
			t.Errorf("after overflow, since %d: %v", tc.since, offsetsOf(r.Publications))
		}
	}
	r, _ := h.History("ns", "ch", 5, epoch, 3)
	if !r.Recovered || !same(offsetsOf(r.Publications), seq(6, 8)) {
		t.Errorf("limit 3: %v %v", r.Recovered, offsetsOf(r.Publications))
	}
}

func TestHistoryTTLAndEpochChange(t *testing.T) {
	h, clk := newHub(t, Config{HistoryTTL: time.Minute})
	ps := publish(t, h, "ns", "ch", 3)
	epoch := ps[0].Epoch
	clk.add(30 * time.Second)
	publish(t, h, "ns", "ch", 1) // offset 4, 30 s younger
	clk.add(40 * time.Second)    // 1..3 are 70 s old: expired; 4 is 40 s old
	r, _ := h.History("ns", "ch", 2, epoch, 0)
	if r.Recovered {
		t.Errorf("since 2 after 3 expired: recovered, %v", offsetsOf(r.Publications))
	}
	r, _ = h.History("ns", "ch", 3, epoch, 0)
	if !r.Recovered || !same(offsetsOf(r.Publications), []uint64{4}) {
		t.Errorf("since 3: %v %v", r.Recovered, offsetsOf(r.Publications))
	}
	clk.add(time.Minute)
	r, _ = h.History("ns", "ch", 4, epoch, 0)
	if !r.Recovered || len(r.Publications) != 0 {
		t.Errorf("since 4 with everything expired but nothing missed: %v %v", r.Recovered, offsetsOf(r.Publications))
	}
	// Idle, empty, no subscribers: the sweep forgets the channel, and its
	// next incarnation must not accept old positions.
	clk.add(2 * time.Minute)
	h.Sweep()
	if st := h.Stats(); st.Channels != 0 {
		t.Fatalf("idle channel not forgotten: %+v", st)
	}
	p := publish(t, h, "ns", "ch", 1)[0]
	if p.Offset != 1 || p.Epoch == epoch {
		t.Fatalf("after being forgotten: offset %d epoch %q (old %q)", p.Offset, p.Epoch, epoch)
	}
	r, _ = h.History("ns", "ch", 0, epoch, 0)
	if r.Recovered {
		t.Errorf("old epoch recovered after the channel was forgotten")
	}
}

func TestSweepKeepsChannelsInUse(t *testing.T) {
	h, clk := newHub(t, Config{HistoryTTL: time.Minute})
	var c collector
	sub, _ := h.Subscribe("ns", "ch", &c, SubscribeOptions{}, nil)
	p := publish(t, h, "ns", "ch", 1)[0]
	clk.add(time.Hour)
	h.Sweep()
	q := publish(t, h, "ns", "ch", 1)[0]
	if q.Epoch != p.Epoch || q.Offset != 2 {
		t.Fatalf("channel with a subscriber was forgotten: %d %q vs %q", q.Offset, q.Epoch, p.Epoch)
	}
	if !same(c.offsets(), []uint64{1, 2}) {
		t.Fatalf("subscriber got %v", c.offsets())
	}
	sub.Unsubscribe()
}

func TestSlowSubscriberDropped(t *testing.T) {
	h, _ := newHub(t, Config{})
	slow := &collector{cap: 2}
	var fast collector
	h.Subscribe("ns", "ch", slow, SubscribeOptions{}, nil)
	h.Subscribe("ns", "ch", &fast, SubscribeOptions{}, nil)
	publish(t, h, "ns", "ch", 5)
	if !slow.full || !same(slow.offsets(), []uint64{1, 2}) {
		t.Errorf("slow subscriber: full %v got %v", slow.full, slow.offsets())
	}
	if !same(fast.offsets(), seq(1, 5)) {
		t.Errorf("fast subscriber: %v", fast.offsets())
	}
	if st := h.Stats(); st.Subscriptions != 1 {
		t.Errorf("subscriptions after drop: %d", st.Subscriptions)
	}
}

func TestBadNames(t *testing.T) {
	h, _ := newHub(t, Config{})
	for _, n := range []string{"", "a/b", "a b", "user#", "user#a,,b", "user#a b", "..", "x#1#2"} {
		if _, err := h.Publish("ns", n, nil); err == nil {
			t.Errorf("channel %q accepted", n)
		}
	}
	for _, n := range []string{"a", "user#42", "chat#1,2", "A-b_c.d", "u#a@b.c"} {
		if _, err := h.Publish("ns", n, nil); err != nil {
			t.Errorf("channel %q: %v", n, err)
		}
	}
	if u, ok := ChannelUsers("chat#1,2"); !ok || fmt.Sprint(u) != "[1 2]" {
		t.Errorf("ChannelUsers: %v %v", u, ok)
	}
	if _, err := h.Publish("bad ns", "a", nil); err == nil {
		t.Error("bad namespace accepted")
	}
}

// TestConcurrentSubscribeNoGap races subscribers that recover from a
// position against publishers: each must see a gapless, duplicate-free run
// of offsets from its start to the end.
func TestConcurrentSubscribeNoGap(t *testing.T) {
	h, _ := newHub(t, Config{HistorySize: 100_000})
	const pubs = 2000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < pubs; i++ {
			h.Publish("ns", "ch", nil)
		}
	}()
	type result struct {
		since uint64
		c     *collector
	}
	results := make(chan result, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, _ := h.History("ns", "ch", 0, "", 0)
			since := r.Offset / 2
			c := &collector{}
			_, err := h.Subscribe("ns", "ch", c, SubscribeOptions{Recover: true, Since: since, Epoch: r.Epoch}, func(res SubscribeResult) {
				if !res.Recovered {
					t.Errorf("not recovered from %d", since)
				}
				c.got = append(c.got, res.Publications...)
			})
			if err != nil {
				t.Error(err)
			}
			results <- result{since, c}
		}()
	}
	wg.Wait()
	close(results)
	for r := range results {
		if got := r.c.offsets(); !same(got, seq(r.since+1, pubs)) {
			t.Errorf("subscriber from %d: %d offsets, first %v", r.since, len(got), got[:min(5, len(got))])
		}
	}
}

func TestRingGrowsAndWraps(t *testing.T) {
	var r ring
	for i := 1; i <= 25; i++ {
		r.push(&Publication{Offset: uint64(i)}, 10)
	}
	if r.len() != 10 || r.at(0).Offset != 16 || r.at(9).Offset != 25 {
		t.Fatalf("len %d first %d last %d", r.len(), r.at(0).Offset, r.at(9).Offset)
	}
	for r.len() > 0 {
		r.popFront()
	}
	if r.buf != nil {
		t.Fatal("empty ring kept its buffer")
	}
}
