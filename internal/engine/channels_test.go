package engine

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func (f *fixture) durableNS(name string, c ChannelHistory) {
	f.t.Helper()
	c.Durable = true
	if _, _, err := f.e.ConfigureNamespace(f.now, name, NamespaceConfig{AutoCreateQueues: true, Channels: c}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) publish(ns, ch string, hub ChannelPosition, data string) Publication {
	f.t.Helper()
	p, err := f.e.Publish(f.now, ns, ch, hub, []byte(data))
	if err != nil {
		f.t.Fatalf("publish %s/%s: %v", ns, ch, err)
	}
	return p
}

// held renders what the engine holds for the durable channels of ns.
func held(e *Engine, ns string) string {
	out := ""
	e.DurableChannels(func(n, ch string, pos ChannelPosition, pubs []Publication) {
		if n != ns {
			return
		}
		out += fmt.Sprintf("%s@%s:%d[", ch, pos.Epoch, pos.Offset)
		for _, p := range pubs {
			out += fmt.Sprintf(" %d=%s", p.Offset, p.Data)
		}
		out += " ]"
	})
	return out
}

func TestPublishNeedsDurableNamespace(t *testing.T) {
	f := newFixture(t)
	_, err := f.e.Publish(f.now, "default", "c", ChannelPosition{Epoch: "e1"}, []byte(`1`))
	if !errors.Is(err, ErrNotDurable) {
		t.Fatalf("publish to a memory-only namespace: %v, want ErrNotDurable", err)
	}
	f.durableNS("web", ChannelHistory{})
	if _, err := f.e.Publish(f.now, "web", "bad/name", ChannelPosition{Epoch: "e1"}, []byte(`1`)); err == nil {
		t.Fatal("bad channel name accepted")
	}
	if _, err := f.e.Publish(f.now, "nope", "c", ChannelPosition{Epoch: "e1"}, []byte(`1`)); err == nil {
		t.Fatal("unknown namespace accepted")
	}
}

func TestDurableHistoryOffsetsAndReplay(t *testing.T) {
	f := newFixture(t)
	f.durableNS("web", ChannelHistory{Size: 3})
	// the engine adopts the hub's epoch and offset on first sight...
	if p := f.publish("web", "c", ChannelPosition{Epoch: "E", Offset: 5}, `"a"`); p.Offset != 6 || p.Epoch != "E" {
		t.Fatalf("first publication %+v, want offset 6 epoch E", p)
	}
	// ...and keeps its own when the hub lags (publications not yet synced)
	f.publish("web", "c", ChannelPosition{Epoch: "E", Offset: 5}, `"b"`)
	f.publish("web", "c", ChannelPosition{Epoch: "E", Offset: 7}, `"c"`)
	f.publish("web", "c", ChannelPosition{Epoch: "E", Offset: 8}, `"d"`)
	want := `c@E:9[ 7="b" 8="c" 9="d" ]`
	if got := held(f.e, "web"); got != want {
		t.Fatalf("held %s, want %s (size 3)", got, want)
	}
	for _, twice := range []bool{false, true} {
		if got := held(f.sink.replay(t, twice), "web"); got != want {
			t.Fatalf("after replay (twice=%v) %s, want %s", twice, got, want)
		}
	}
	// a hub on another epoch (its history was lost) wins
	if p := f.publish("web", "c", ChannelPosition{Epoch: "F", Offset: 0}, `"x"`); p.Offset != 1 || p.Epoch != "F" {
		t.Fatalf("publication after an epoch change %+v", p)
	}
	if got, want := held(f.e, "web"), `c@F:1[ 1="x" ]`; got != want {
		t.Fatalf("held %s, want %s", got, want)
	}
}

func TestDurableHistoryTTLAndSnapshot(t *testing.T) {
	f := newFixture(t)
	f.durableNS("web", ChannelHistory{TTL: time.Minute})
	f.publish("web", "old", ChannelPosition{Epoch: "E"}, `1`)
	f.tick(30 * time.Second)
	f.publish("web", "c", ChannelPosition{Epoch: "G"}, `1`)
	f.publish("web", "c", ChannelPosition{Epoch: "G"}, `2`)
	f.tick(40 * time.Second) // "old" expired, c's two have not
	f.e.Advance(f.now)

	// snapshot, then one more publication after it; replay on top of the
	// snapshot must equal the live state, the empty channel keeping its
	// position (and so its epoch)
	snap := New(Options{Seed: 1})
	it := f.e.Snapshot()
	var ents []*Entry
	for ent := it.Next(2); ent != nil; ent = it.Next(2) {
		buf := ent.Encode(nil)
		dec, err := DecodeEntry(buf, 9, 0)
		if err != nil {
			t.Fatal(err)
		}
		ents = append(ents, dec)
	}
	mark := len(f.sink.bodies)
	f.publish("web", "c", ChannelPosition{Epoch: "G", Offset: 2}, `3`)
	for _, ent := range ents {
		snap.Apply(ent)
	}
	for _, b := range f.sink.bodies[mark-1:] { // one entry earlier: replay overlaps the snapshot
		ent, err := DecodeEntry(f.sink.seg[b[0]:b[1]], 1, uint32(b[0]))
		if err != nil {
			t.Fatal(err)
		}
		snap.Apply(ent)
	}
	want := `c@G:3[ 1=1 2=2 3=3 ]old@E:1[ ]`
	if got := held(f.e, "web"); !sameHeld(got, want) {
		t.Fatalf("live %s, want %s", got, want)
	}
	if got := held(snap, "web"); !sameHeld(got, want) {
		t.Fatalf("snapshot+replay %s, want %s", got, want)
	}

	// turning durability off forgets the durable history
	if _, _, err := f.e.ConfigureNamespace(f.now, "web", NamespaceConfig{AutoCreateQueues: true}); err != nil {
		t.Fatal(err)
	}
	if got := held(f.e, "web"); got != "" {
		t.Fatalf("after durability off: %s", got)
	}
}

// sameHeld compares renderings whose channel order is a map's.
func sameHeld(a, b string) bool {
	return len(a) == len(b) && (a == b || swapHalves(a) == b)
}

func swapHalves(s string) string {
	for i := 0; i+2 < len(s); i++ {
		if s[i] == ']' {
			return s[i+1:] + s[:i+1]
		}
	}
	return s
}

func TestChannelHistoryValidated(t *testing.T) {
	f := newFixture(t)
	for _, c := range []ChannelHistory{{Size: MaxChannelHistory + 1}, {Size: -2}, {TTL: -2}, {TTL: time.Microsecond}} {
		if _, _, err := f.e.ConfigureNamespace(f.now, "x", NamespaceConfig{Channels: c}); err == nil {
			t.Errorf("config %+v accepted", c)
		}
	}
	info, created, err := f.e.ConfigureNamespace(f.now, "x", NamespaceConfig{Channels: ChannelHistory{Size: 10, Durable: true}})
	if err != nil || !created || info.Config.Channels.Size != 10 {
		t.Fatalf("configure: %+v %v %v", info, created, err)
	}
	if _, created, _ := f.e.ConfigureNamespace(f.now, "x", NamespaceConfig{Channels: ChannelHistory{Size: 20}}); created {
		t.Fatal("second configure reported created")
	}
	e2 := f.sink.replay(t, false)
	if got, _ := e2.Namespace("x"); got.Config.Channels != (ChannelHistory{Size: 20}) {
		t.Fatalf("replayed config %+v", got.Config)
	}
}
