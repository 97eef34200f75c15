package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// An object read from its members (wireenc.AppendMembers, the hot path)
// decodes exactly as one read from a map (bodies AppendMembers refuses):
// the same request, the same first error.
func TestObjectMembersMatchMap(t *testing.T) {
	lim := limits{maxPayload: 1 << 20, maxWait: 60e9}
	for _, body := range []string{
		`{"payload":"x"}`,
		`{"payload":{"a":[1, 2]},"id":"J1","priority":3,"ttr":"30s","tags":{"b":"2","a":"1"}}`,
		`{"payload_base64":"eHg=","key":"k","reply_to":"r","notify":"ch","idempotency_key":"i"}`,
		`{"payload":"x","zz":1,"aa":2}`,
		`{"payload":"x","payload_base64":"eA=="}`,
		`{"payload":"x","priority":"high"}`,
		`{"payload":"x","tags":{"a":1}}`,
		`{"payload":"x","delay":"1s","at":"2030-01-01T00:00:00Z"}`,
		`{}`,
		// more members than the object holds inline
		`{"payload":"x","id":"J2","priority":1,"ttr":"1s","tries":2,"key":"k","delay":"1s","ttl":"1h","reply_to":"r","notify":"n"}`,
	} {
		o, err := newObject([]byte(body), "")
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if o.m != nil {
			t.Fatalf("%s: not read from its members", body)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &m); err != nil {
			t.Fatal(err)
		}
		om := &object{m: m}
		got, want := readPut(o, lim), readPut(om, lim)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(o.err, om.err) {
			t.Errorf("%s:\n members %+v %v\n map     %+v %v", body, got, o.err, want, om.err)
		}
	}
}

// rawString reads plain strings without a decoder; every string, plain or
// not, must come out as json.Unmarshal has it.
func TestRawStringMatchesUnmarshal(t *testing.T) {
	for _, raw := range []string{
		`""`, `"30s"`, `"a b~"`, `"\u0041"`, `"a\"b"`, `"tab\t"`, `"é"`, "\"\xff\"",
		"\"a\x01\"", `"` + strings.Repeat("z", 300) + `"`, `"unterminated`, `"`, `"a"b"`,
	} {
		got, ok := rawString([]byte(raw))
		var want string
		wantOK := json.Unmarshal([]byte(raw), &want) == nil
		if ok != wantOK || got != want {
			t.Errorf("rawString(%q) = %q, %v; json.Unmarshal: %q, %v", raw, got, ok, want, wantOK)
		}
	}
}

// A put's body is decoded without putting its object on the heap: what is
// left is the payload's copy.
func TestDecodePutAllocations(t *testing.T) {
	body := []byte(`{"payload":{"n":1},"ttr":"30s","priority":3}`)
	lim := limits{maxPayload: 1 << 20, maxWait: 60e9}
	if n := testing.AllocsPerRun(100, func() {
		if _, err := decodePut(body, lim); err != nil {
			t.Fatal(err)
		}
	}); n > 4 {
		t.Errorf("decoding a put allocates %v times, want at most 4 (the payload, the ttr's text, the ttr and the priority)", n)
	}
}
