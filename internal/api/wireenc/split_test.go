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
	membersMatch(t, raw)
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

// membersMatch checks AppendMembers against SplitObject: the same members
// in the object's order, taken whenever SplitObject takes the object (and
// it has at most maxMembers members), refused otherwise.
func membersMatch(t *testing.T, raw []byte) {
	t.Helper()
	var arr [4]Member
	ms, ok := AppendMembers(arr[:0], raw)
	m, mok := SplitObject(raw)
	if ok != (mok && len(m) <= maxMembers) {
		t.Fatalf("%q: AppendMembers took it: %v, SplitObject: %v (%d members)", raw, ok, mok, len(m))
	}
	if !ok {
		return
	}
	if len(ms) != len(m) {
		t.Fatalf("%q: %d members, SplitObject %d", raw, len(ms), len(m))
	}
	at := 0
	for _, x := range ms {
		if v, found := m[string(x.Name)]; !found || !bytes.Equal(v, x.Value) {
			t.Fatalf("%q: member %q is %q, SplitObject %q", raw, x.Name, x.Value, v)
		}
		i := bytes.Index(raw[at:], x.Value)
		if i < 0 {
			t.Fatalf("%q: member %q out of order", raw, x.Name)
		}
		at += i + len(x.Value)
	}
}

func TestAppendMembersBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range maxMembers + 1 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
	}
	b.WriteString("}")
	if _, ok := AppendMembers(nil, []byte(b.String())); ok {
		t.Errorf("%d members taken", maxMembers+1)
	}
	dst := []Member{{Name: []byte("before")}}
	dst, ok := AppendMembers(dst, []byte(`{"before":1,"after":2}`))
	if !ok || len(dst) != 3 || string(dst[2].Name) != "after" {
		t.Errorf("appending after a member: %q, %v", dst, ok)
	}
	cmd := []byte(`{"id":1,"put":{"queue":"q","payload":"x"}}`)
	if allocs := testing.AllocsPerRun(100, func() {
		var arr [8]Member
		AppendMembers(arr[:0], cmd)
	}); allocs != 0 {
		t.Errorf("%v allocations per object", allocs)
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
		AppendMembers(nil, raw)
		if json.Valid(raw) {
			splitMatches(t, raw)
		}
	})
}
