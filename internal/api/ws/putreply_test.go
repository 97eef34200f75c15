package ws

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"

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
		got := appendReply(nil, c.id, wireenc.AppendPut(nil, c.r))
		if !bytes.Equal(got, want) {
			t.Errorf("id %d:\n got %s\nwant %s", c.id, got, want)
		}
		if !json.Valid(got) {
			t.Errorf("id %d: not JSON: %s", c.id, got)
		}
	}
}
