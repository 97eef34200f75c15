package ws

import (
	"strings"
	"testing"
)

// A lone surrogate escape is valid JSON syntax but no Unicode character:
// stored as sent, it reached readers as text no UTF-8 decoder can hold.
func TestLoneSurrogateEscapesRefused(t *testing.T) {
	for _, tc := range []struct {
		frame, field string
	}{
		{`{"id":1,"publish":{"channel":"c","data":"\ud800"}}`, "data"},
		{`{"id":1,"publish":{"channel":"c","data":{"a":["x\udfff"]}}}`, "data"},
		{`{"id":1,"put":{"queue":"q","payload":1,"tags":{"k":"\uDBFFx"}}}`, "tags"},
		{`{"id":1,"put":{"queue":"q","payload":"\ud800\ud800"}}`, "payload"},
		{`{"id":1,"ack":{"queue":"q","id":"x","receipt":"r","result":"\udc00\ud800"}}`, "result"},
		{`{"id":1,"nack":{"queue":"q","id":"x","receipt":"r","error":"\ud83d"}}`, "error"},
		{`{"id":1,"connect":{"token":"\ud800"}}`, "token"},
	} {
		err := decodeAll([]byte(tc.frame))
		if err == nil {
			t.Errorf("%s: accepted", tc.frame)
			continue
		}
		if msg := errorOf(err).Message; !strings.HasPrefix(msg, tc.field+": ") || !strings.Contains(msg, "surrogate") {
			t.Errorf("%s: %q, want an error naming %s and the surrogate", tc.frame, msg, tc.field)
		}
		if cmd, _ := decodeCommand([]byte(tc.frame)); cmd.ID != 1 {
			t.Errorf("%s: id not read, so the error cannot be answered", tc.frame)
		}
	}
	// Pairs and escaped backslashes are fine.
	for _, ok := range []string{
		`{"id":1,"publish":{"channel":"c","data":"\ud83d\ude00"}}`,
		`{"id":1,"publish":{"channel":"c","data":"\\ud800"}}`,
		`{"id":1,"publish":{"channel":"c","data":"\\\ud83d\ude00\u00e9"}}`,
	} {
		if err := decodeAll([]byte(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
