package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// evs renders events compactly: "id:event:state[:error]".
func evs(list []JobEvent) string {
	var out []string
	for _, ev := range list {
		s := fmt.Sprintf("%s:%s:%s", ev.ID, ev.Event, ev.State)
		if ev.Error != "" {
			s += ":" + ev.Error
		}
		if ev.HasResult {
			s += "=" + string(ev.Result)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func (f *fixture) events(want string) {
	f.t.Helper()
	if got := evs(f.e.TakeEvents()); got != want {
		f.t.Fatalf("events:\n got %q\nwant %q", got, want)
	}
}

func TestJobEventsLifecycle(t *testing.T) {
	f := newFixture(t)
	f.e.SetEvents(true)
	f.put("q", PutRequest{ID: "a", Notify: "watch", Tries: u32(2)})
	f.put("q", PutRequest{ID: "quiet"}) // no notify: never an event
	f.events("")

	j := f.take1("q")
	f.events("a:reserved:reserved")
	if _, err := f.e.Touch(f.now, "default", "q", "a", TouchRequest{Receipt: j.Receipt}); err != nil {
		t.Fatal(err)
	}
	f.events("") // a touch is no event
	if _, err := f.e.Nack(f.now, "default", "q", "a", NackRequest{Receipt: j.Receipt, Error: "boom", Delay: dur(0)}); err != nil {
		t.Fatal(err)
	}
	f.events("a:nacked:ready:boom")

	// the reservation runs out on the last try: dead, noted as time passes
	j = f.take1("q")
	f.events("a:reserved:reserved")
	f.tick(31 * time.Second)
	f.e.Advance(f.now)
	f.events("a:dead:dead:reservation timed out on the last try")

	// the quiet job goes through its life without events
	q := f.take1("q")
	f.ack(q, AckRequest{})
	f.events("")
}

func TestJobEventsCompletedWithResult(t *testing.T) {
	f := newFixture(t)
	f.e.SetEvents(true)
	f.put("q", PutRequest{ID: "a", Notify: "watch"})
	j := f.take1("q")
	f.e.TakeEvents()
	f.ack(j, AckRequest{HasResult: true, Result: []byte(`{"ok":1}`), ResultJSON: true})
	f.events(`a:completed:deleted={"ok":1}`)

	// retained results: the job stays completed
	f.put("r", PutRequest{ID: "b", Notify: "watch", RetainResult: time.Minute})
	j = f.take1("r")
	f.e.TakeEvents()
	f.ack(j, AckRequest{HasResult: true, Result: []byte(`7`), ResultJSON: true})
	f.events(`b:completed:completed=7`)

	// a periodic job's run completes and it waits for its next run
	f.put("c", PutRequest{ID: "cr", Notify: "watch", Cron: "@every 1m"})
	f.tick(time.Minute)
	j = f.take1("c")
	f.e.TakeEvents()
	f.ack(j, AckRequest{})
	f.events(`cr:completed:delayed`)
}

func TestJobEventsCancelAndExpire(t *testing.T) {
	f := newFixture(t)
	f.e.SetEvents(true)
	f.put("q", PutRequest{ID: "a", Notify: "watch"})
	f.put("q", PutRequest{ID: "b", Notify: "watch", Tags: map[string]string{"t": "x"}})
	f.put("q", PutRequest{ID: "c", Notify: "watch", TTL: dur(time.Second)})
	if err := f.e.Cancel(f.now, "default", "q", "a", ""); err != nil {
		t.Fatal(err)
	}
	f.events("a:cancelled:deleted")
	if _, err := f.e.CancelByFilter(f.now, "default", "q", Filter{Tags: map[string]string{"t": "x"}}); err != nil {
		t.Fatal(err)
	}
	f.events("b:cancelled:deleted")
	f.tick(2 * time.Second)
	f.e.Advance(f.now)
	f.events("c:expired:deleted")
}

func TestJobEventsOnlyWhenOn(t *testing.T) {
	f := newFixture(t)
	f.put("q", PutRequest{ID: "a", Notify: "watch"})
	f.take1("q")
	f.events("") // replay mode: nothing noted

	// a failed commit notes nothing
	f.e.SetEvents(true)
	f.put("q", PutRequest{ID: "b", Notify: "watch"})
	f.sink.fail = fmt.Errorf("disk gone")
	if _, err := f.e.Take(f.now, "default", TakeRequest{Queues: []string{"q"}}); err == nil {
		t.Fatal("take with a failing sink succeeded")
	}
	f.events("")
}

func TestNotifyValidatedAndLogged(t *testing.T) {
	f := newFixture(t)
	_, err := f.e.Put(f.now, "default", "q", PutRequest{Payload: []byte(`1`), PayloadJSON: true, Notify: "bad/name"})
	if err == nil || !strings.Contains(err.Error(), "notify") {
		t.Fatalf("bad notify channel: err %v, want one naming notify", err)
	}
	f.put("q", PutRequest{ID: "a", Notify: "user#42"})
	if got := f.peek("q", "a").Notify; got != "user#42" {
		t.Fatalf("notify after put = %q", got)
	}
	e2 := f.sink.replay(t, true)
	j, err := e2.Peek(f.now, "default", "q", "a")
	if err != nil || j.Notify != "user#42" {
		t.Fatalf("notify after replay = %q, %v", j.Notify, err)
	}
}

// A job whose TTL passed while it was reserved goes when it is given back,
// by nack or by beanstalkd's release alike, and either way its watchers
// hear that it expired (the two share one give-back rule).
func TestJobEventsExpiredOnGiveBack(t *testing.T) {
	f := newFixture(t)
	f.e.SetEvents(true)
	f.put("q", PutRequest{ID: "n", Notify: "watch", TTL: dur(time.Second)})
	f.put("q", PutRequest{ID: "r", Notify: "watch", TTL: dur(time.Second)})
	jn, jr := f.take1("q"), f.take1("q")
	f.e.TakeEvents()
	f.tick(2 * time.Second)
	if s, err := f.e.Nack(f.now, "default", "q", "n", NackRequest{Receipt: jn.Receipt}); err != nil || s != StateGone {
		t.Fatalf("nack after the TTL: %v %v", s, err)
	}
	f.events("n:expired:deleted")
	if s, err := f.e.Release(f.now, "default", "q", "r", ReleaseRequest{Receipt: jr.Receipt}); err != nil || s != StateGone {
		t.Fatalf("release after the TTL: %v %v", s, err)
	}
	f.events("r:expired:deleted")
}
