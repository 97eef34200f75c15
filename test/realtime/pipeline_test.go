package realtime

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/chronoq/chronoq/internal/api/ws"
	"github.com/chronoq/chronoq/internal/engine"
)

// maskedFrame is a client text frame (RFC 6455 §5.2) with a zero mask.
func maskedFrame(msg string) []byte {
	b := []byte{0x81}
	if len(msg) < 126 {
		b = append(b, 0x80|byte(len(msg)))
	} else {
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(len(msg)))
	}
	return append(append(b, 0, 0, 0, 0), msg...)
}

// Puts a client pipelines — here 300 in one TCP write — are answered in the
// order sent, each with its own job, and the jobs are queued in that order
// (docs/realtime.md: a client may pipeline a sequence of puts and rely on
// the order). A put the server refuses in the middle does not disturb the
// others.
func TestPipelinedPutsKeepTheirOrder(t *testing.T) {
	e := newEnv(t, ws.Options{})
	c := e.connect("")
	const n = 300
	var raw []byte
	for i := 1; i <= n; i++ {
		q := "pipe"
		if i == 150 {
			q = "no such name!"
		}
		raw = append(raw, maskedFrame(fmt.Sprintf(`{"id":%d,"put":{"queue":%q,"payload":%d}}`, i, q, i))...)
	}
	if _, err := c.c.UnderlyingConn().Write(raw); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	for i := 1; i <= n; i++ {
		m := c.read()
		if got := m.num("id"); got != int64(i) {
			t.Fatalf("answer %d has id %d: %v", i, got, m)
		}
		if i == 150 {
			if m.obj("error").str("code") != "bad_request" {
				t.Fatalf("the bad put's answer: %v", m)
			}
			continue
		}
		id := m.obj("result").str("id")
		if id == "" || ids[id] != 0 {
			t.Fatalf("answer %d: job id %q (seen: %d)", i, id, ids[id])
		}
		ids[id] = i
	}
	jobs, err := e.b.Take(context.Background(), "default", engine.TakeRequest{Queues: []string{"pipe"}, Max: 1000}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != n-1 {
		t.Fatalf("%d jobs queued, want %d", len(jobs), n-1)
	}
	prev := 0
	for _, j := range jobs {
		i := ids[j.ID]
		if i <= prev {
			t.Fatalf("job of put %d served after put %d's", i, prev)
		}
		prev = i
	}
}
