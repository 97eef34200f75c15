package wireenc

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
)

// splitMatches checks SplitObject against json.Unmarshal on one object:
// when it takes the object apart, the members are exactly json.Unmarshal's.
func splitMatches(t *testing.T, raw []byte) {
	t.Helper()
	got, ok := SplitObject(raw)
	var want map[string]json.RawMessage
	err := json.Unmarshal(raw, &want)
	if !ok {
		return // json.Unmarshal decides
	}
	if err != nil {
		t.Fatalf("%q: split, but json.Unmarshal fails: %v", raw, err)
	}
	if len(got) != len(want) {
		t.Fatalf("%q: %d members, want %d", raw, len(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Fatalf("%q: member %q is %q, want %q", raw, k, g, v)
		}
	}
}

var splitValues = []string{
	`1`, `-2.5e+3`, `true`, `false`, `null`, `""`, `"a b"`, `"\"}"`, `"\\"`, `"é"`, `"\u00e9,}"`,
	`[]`, `[1, "]" ,{"a":[2]}]`, `{}`, `{ "x" : { "y" : "}" } }`, `[[[]]]`, `"\ud83d\ude00"`,
}

var splitKeys = []string{`"a"`, `"payload"`, `""`, `"a b"`, `"é"`, `"a\"b"`, `"\u0061"`, `"x"`, `"a"`}

func TestSplitObjectMatchesUnmarshal(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	ws := []string{"", " ", "\t", "\n ", "\r\n"}
	w := func() string { return ws[r.IntN(len(ws))] }
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		b.WriteString("{" + w())
		for n := r.IntN(5); n > 0; n-- {
			b.WriteString(splitKeys[r.IntN(len(splitKeys))] + w() + ":" + w() + splitValues[r.IntN(len(splitValues))] + w())
			if n > 1 {
				b.WriteString("," + w())
			}
		}
		b.WriteString("}")
		raw := []byte(b.String())
		if !json.Valid(raw) {
			t.Fatalf("generated invalid JSON %q", raw)
		}
		splitMatches(t, raw)
	}
	// the plain bodies the hot routes get are split, not handed over
	for _, body := range []string{`{"payload":"xxxx"}`, `{"max":1,"ttr":"30s","wait":"5s"}`, `{"receipt":"R","take":{"max":1}}`, `{}`, `{ }`} {
		if _, ok := SplitObject([]byte(body)); !ok {
			t.Errorf("%s: not split", body)
		}
	}
	// cut short or malformed: never split, never a panic
	for _, bad := range []string{`{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":"x}`, `{"a":[1}`, `{"a":{"b":1}`, `{"a" 1}`, `{"a":1 "b":2}`, `{"a":1}x`, `{,}`, `{"a":}`} {
		if _, ok := SplitObject([]byte(bad)); ok {
			t.Errorf("%q: split", bad)
		}
	}
}

func FuzzSplitObject(f *testing.F) {
	for _, v := range splitValues {
		f.Add([]byte(`{"a":` + v + `,"b" : ` + v + `}`))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		SplitObject(raw) // must not panic on anything
		if json.Valid(raw) {
			splitMatches(t, raw)
		}
	})
}
