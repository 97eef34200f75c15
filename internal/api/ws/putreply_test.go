package ws

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
)

// The put answer is written by hand; it must stay byte for byte what
// reply (encoding/json) wrote for it.
func TestPutReplyMatchesEncodingJSON(t *testing.T) {
	for _, c := range []struct {
		id uint64
		r  engine.PutResult
	}{
		{1, engine.PutResult{ID: "01JDABCDEFGHJKMNPQRSTVWXYZ", State: engine.StateReady, ActivateAt: time.Date(2026, 11, 25, 15, 4, 5, 123456789, time.UTC)}},
		{1 << 53, engine.PutResult{ID: "01JDABCDEFGHJKMNPQRSTVWXYZ", State: engine.StateDelayed, ActivateAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Duplicate: true}},
		{math.MaxUint32, engine.PutResult{ID: `odd"<id>&\`, State: engine.StateReady, ActivateAt: time.Unix(0, 0).UTC()}},
	} {
		want := marshal(struct {
			ID     uint64 `json:"id"`
			Result any    `json:"result"`
		}{c.id, wireenc.Put(c.r)})
		got := appendPutReply(nil, c.id, c.r)
		if !bytes.Equal(got, want) {
			t.Errorf("id %d:\n got %s\nwant %s", c.id, got, want)
		}
		frame := frameAround(appendPutReply(make([]byte, maxFrameHeader), c.id, c.r), maxFrameHeader)
		if wantFrame := appendFrame(nil, websocket.TextMessage, want); !bytes.Equal(frame, wantFrame) {
			t.Errorf("id %d: frame\n got %q\nwant %q", c.id, frame, wantFrame)
		}
		if !json.Valid(got) {
			t.Errorf("id %d: not JSON: %s", c.id, got)
		}
	}
}

// frameAround frames a message in place exactly as appendFrame does, at
// every header size.
func TestFrameAroundMatchesAppendFrame(t *testing.T) {
	for _, n := range []int{0, 1, 125, 126, 127, 0xffff, 0x10000} {
		msg := bytes.Repeat([]byte("x"), n)
		got := frameAround(append(make([]byte, maxFrameHeader), msg...), maxFrameHeader)
		if want := appendFrame(nil, websocket.TextMessage, msg); !bytes.Equal(got, want) {
			t.Errorf("%d bytes: header %x, want %x", n, got[:min(len(got), 10)], want[:min(len(want), 10)])
		}
	}
}
