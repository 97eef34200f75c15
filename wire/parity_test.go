package wire_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/client"
	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
	"github.com/chronoq/chronoq/wire"
)

// These tests hold the server's encoder (internal/api/wireenc), the wire
// shapes and the Go client together: a field the server writes must be in
// the shape and must survive a trip through the client's own types. A field
// added to one side only fails them.

var t0 = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// tagNames is every JSON name of struct type v, in order.
func tagNames(t *testing.T, v any) []string {
	t.Helper()
	rt := reflect.TypeOf(v)
	var out []string
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Fatalf("%s.%s has no JSON name", rt.Name(), rt.Field(i).Name)
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// filled decodes server JSON and fails on any missing or zero field, so a
// shape field the server leaves empty shows up here; skip names fields
// that are the alternative form of another (payload / payload_base64).
func filled(t *testing.T, what string, raw []byte, shape any, skip ...string) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	for _, name := range tagNames(t, shape) {
		if contains(skip, name) {
			if _, ok := m[name]; ok {
				t.Errorf("%s: %s is present; expected its alternative form", what, name)
			}
			continue
		}
		v, ok := m[name]
		if !ok {
			t.Errorf("%s: the server does not write %q (a shape field it never fills)", what, name)
			continue
		}
		switch string(v) {
		case `""`, `0`, `false`, `null`, `{}`, `[]`:
			t.Errorf("%s: %q is %s; the test object sets every field", what, name, v)
		}
		delete(m, name)
	}
	for name := range m {
		if !contains(skip, name) {
			t.Errorf("%s: the server writes %q, which the shape does not have", what, name)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// roundTrip decodes server JSON into the client's type and encodes it back:
// the result must be the same JSON, or the client lost or changed a field.
func roundTrip[T any](t *testing.T, what string, raw []byte) {
	t.Helper()
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: client decode: %v", what, err)
	}
	back, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("%s: client encode: %v", what, err)
	}
	if !jsonSame(t, raw, back) {
		t.Errorf("%s: the client does not carry the server's object:\nserver %s\nclient %s", what, raw, back)
	}
}

func jsonSame(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func fullJob(binary bool) engine.Job {
	j := engine.Job{
		ID: "01JOB", Namespace: "ns", Queue: "q", State: engine.StateReserved,
		PayloadJSON: !binary, Data: []byte(`{"a":1}`),
		Priority: 7, Key: "k", Tags: map[string]string{"t": "v"},
		CreatedAt: t0, ActivateAt: t0.Add(time.Second), ExpireAt: t0.Add(time.Hour),
		TTR: 30 * time.Second, Tries: 5, Attempt: 2, Receipt: "r1", ReservedUntil: t0.Add(time.Minute),
		LastError: "boom", ReplyTo: "replies", Notify: "done", Cron: "*/5 * * * *",
		HasResult: true, ResultData: []byte(`[1]`), ResultJSON: !binary,
	}
	if binary {
		j.Data = []byte{0, 1, 0xff}
		j.ResultData = []byte{2, 3}
	}
	return j
}

func TestJobParity(t *testing.T) {
	for _, binary := range []bool{false, true} {
		j := fullJob(binary)
		raw := encode(t, wireenc.Job(&j))
		skip := []string{"payload_base64", "result_base64"}
		if binary {
			skip = []string{"payload", "result"}
		}
		filled(t, "job", raw, wire.Job{}, skip...)
		roundTrip[client.Job](t, "job", raw)
	}
}

func TestQueueParity(t *testing.T) {
	q := engine.QueueInfo{
		Namespace: "ns", Name: "q", Paused: true, OldestReadyAge: 3 * time.Second,
		Config: engine.QueueConfig{
			DefaultTTR: time.Minute, DefaultTries: 3, DefaultTTL: time.Hour, DefaultPriority: 4,
			MaxJobs: 100, MaxPayload: 1 << 20, DedupWindow: time.Minute, RetainResults: time.Hour,
			Backoff: engine.Backoff{Initial: time.Second, Max: time.Minute, Multiplier: 2, Jitter: 0.1},
		},
		Counts: engine.Counts{Delayed: 1, Ready: 2, Blocked: 3, Reserved: 4, Dead: 5, Completed: 6},
	}
	raw := encode(t, wireenc.Queue(&q))
	filled(t, "queue", raw, wire.Queue{})
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	filled(t, "queue config", m["config"], wire.QueueConfig{})
	filled(t, "queue counts", m["counts"], wire.Counts{})
	var c map[string]json.RawMessage
	if err := json.Unmarshal(m["config"], &c); err != nil {
		t.Fatal(err)
	}
	filled(t, "queue backoff", c["backoff"], wire.Backoff{})
	roundTrip[client.Queue](t, "queue", raw)
}

func TestPutAnswerParity(t *testing.T) {
	raw := encode(t, wireenc.Put(engine.PutResult{ID: "01JOB", State: engine.StateDelayed, ActivateAt: t0, Duplicate: true}))
	filled(t, "put answer", raw, wire.PutAnswer{})
	roundTrip[client.PutResult](t, "put answer", raw)
}

func TestNamespaceParity(t *testing.T) {
	n := engine.NamespaceInfo{Name: "ns", Config: engine.NamespaceConfig{AutoCreateQueues: true,
		Channels: engine.ChannelHistory{Size: 10, TTL: time.Minute, Durable: true}}}
	raw := encode(t, wireenc.Namespace(n))
	filled(t, "namespace", raw, wire.Namespace{})
	roundTrip[client.Namespace](t, "namespace", raw)
}

func TestHistoryParity(t *testing.T) {
	h := pubsub.HistoryResult{
		Position:     pubsub.Position{Offset: 5, Epoch: "ep"},
		Recovered:    true,
		Publications: []*pubsub.Publication{{Offset: 5, Data: []byte(`{"x":1}`), Time: t0}},
	}
	raw := encode(t, wireenc.History(h))
	filled(t, "history", raw, wire.History{})
	var m struct {
		Publications []json.RawMessage `json:"publications"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || len(m.Publications) != 1 {
		t.Fatalf("history %s: %v", raw, err)
	}
	filled(t, "publication", m.Publications[0], wire.Publication{})
	var ch client.History
	if err := json.Unmarshal(raw, &ch); err != nil {
		t.Fatal(err)
	}
	p := ch.Publications[0]
	if ch.Offset != 5 || ch.Epoch != "ep" || !ch.Recovered || p.Offset != 5 || string(p.Data) != `{"x":1}` || !p.Time.Equal(t0) {
		t.Errorf("client history %+v", ch)
	}
	// client.History is the client's own struct (its publications carry
	// time.Time); it must name the same fields as the shape.
	if got, want := tagNames(t, client.History{}), tagNames(t, wire.History{}); !reflect.DeepEqual(got, want) {
		t.Errorf("client.History fields %v, wire.History %v", got, want)
	}
}

func TestResultParity(t *testing.T) {
	info := engine.ResultInfo{ID: "01JOB", State: engine.StateCompleted, HasResult: true, ResultJSON: true, ResultData: []byte(`{"ok":true}`)}
	// call's 200 carries the id and the result; GET .../result the state and
	// the result. Together they fill the shape.
	call := encode(t, wireenc.Call(info, true))
	filled(t, "call", call, wire.Result{}, "state", "result_base64")
	res := encode(t, wireenc.Result(info, true))
	filled(t, "result", res, wire.Result{}, "id", "result_base64")
}
