package ws

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// fastMatches: whenever the fast path takes a put body, the result is the
// one encoding/json's strict decoding gives, without error.
func fastMatches(t *testing.T, raw []byte) bool {
	t.Helper()
	var fast putBody
	if !fastPutBody(raw, &fast) {
		return false
	}
	var want putBody
	if err := decodeBody(raw, &want); err != nil {
		t.Fatalf("%s: the fast path took a body the strict decoder refuses: %v", raw, err)
	}
	if !reflect.DeepEqual(fast, want) {
		t.Fatalf("%s:\n fast %+v\n want %+v", raw, fast, want)
	}
	return true
}

func TestFastPutBodyMatchesDecodeBody(t *testing.T) {
	keys := []string{"queue", "namespace", "payload", "id", "key", "reply_to", "idempotency_key", "notify", "priority", "tags", "zap", "Queue"}
	vals := []string{`"q"`, `""`, `"a b"`, `"a\"b"`, `"é"`, `"\u0041"`, `null`, `5`, `{"x":1}`, `[1, 2]`, ` "pad" `, `"x\ty"`}
	r := rand.New(rand.NewPCG(9, 10))
	took := 0
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		b.WriteString("{")
		for n := r.IntN(4); n > 0; n-- {
			b.WriteString(`"` + keys[r.IntN(len(keys))] + `":` + vals[r.IntN(len(vals))])
			if n > 1 {
				b.WriteString(",")
			}
		}
		b.WriteString("}")
		if raw := []byte(b.String()); json.Valid(raw) && fastMatches(t, raw) {
			took++
		}
	}
	if took < 1000 {
		t.Fatalf("the fast path took only %d generated bodies", took)
	}
	for _, body := range []string{`{"queue":"q","payload":"xxxx"}`, `{"namespace":"default","queue":"q","payload":{"a":[1]}}`} {
		if !fastMatches(t, []byte(body)) {
			t.Errorf("%s: not taken by the fast path", body)
		}
	}
	// left to the strict decoder: its answer, errors included
	for _, body := range []string{`{"queue":5}`, `{"queue":"q","queue":5}`, `{"zap":1}`, `{"payload":null}`, `{"tags":{"a":"b"}}`} {
		var b putBody
		if fastPutBody([]byte(body), &b) {
			t.Errorf("%s: taken by the fast path", body)
		}
	}
}

func FuzzFastPutBody(f *testing.F) {
	f.Add([]byte(`{"queue":"q","payload":"x"}`))
	f.Add([]byte(`{"queue":"q","id":"a","key":"k","payload":[1,{"b":null}]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if json.Valid(raw) {
			fastMatches(t, raw)
		}
	})
}

// compactJSON gives json.Compact's bytes and limits for every valid value,
// with or without whitespace.
func TestCompactJSONMatchesCompact(t *testing.T) {
	for _, v := range []string{`"x"`, `"a b"`, `{"a":[1,2,{"b":null}]}`, `{ "a" : [ 1 , 2 ] }`, `1e+3`, `-0.5`, `true`, `null`, "[\n1,\t\"\\n\"\r]", `"\u00e9<&>"`} {
		var want bytes.Buffer
		if err := json.Compact(&want, []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := compactJSON("payload", []byte(v), 1<<10)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%q: %q, %v; want %q", v, got, err, want.Bytes())
		}
		if _, err := compactJSON("payload", []byte(v), int64(want.Len()-1)); err == nil || errorOf(err).Code != "payload_too_large" {
			t.Errorf("%q over the limit: %v", v, err)
		}
	}
}
