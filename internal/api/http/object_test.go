package httpapi

import (
	"encoding/json"
	"reflect"
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
