package ws

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// pipeBackend records the puts it is given; any other call panics (the
// embedded nil Backend).
type pipeBackend struct {
	Backend
	calls   []string
	waited  []string
	pending int // queued puts not yet waited for
}

func (f *pipeBackend) result(payload []byte) engine.PutResult {
	return engine.PutResult{ID: "job-" + strings.Trim(string(payload), `"`), State: engine.StateReady, ActivateAt: time.Unix(0, 0).UTC()}
}

func (f *pipeBackend) Put(_ context.Context, _, q string, req engine.PutRequest) (engine.PutResult, error) {
	if f.pending > 0 {
		return engine.PutResult{}, fmt.Errorf("a put ran while %d queued ones were unanswered", f.pending)
	}
	f.calls = append(f.calls, "put "+string(req.Payload))
	return f.result(req.Payload), nil
}

func (f *pipeBackend) PutQueued(_ context.Context, _, q string, req engine.PutRequest) func() (engine.PutResult, error) {
	f.calls = append(f.calls, "queued "+string(req.Payload))
	f.pending++
	payload := string(req.Payload)
	return func() (engine.PutResult, error) {
		f.pending--
		f.waited = append(f.waited, payload)
		if q == "full" {
			return engine.PutResult{}, &engine.Error{Code: engine.CodeQueueFull, Message: "full"}
		}
		return f.result([]byte(payload)), nil
	}
}

// answers decodes what c has queued to write: the answers in order, as
// "id:job id" for a put's, "id" for another result, "!id" for an error.
func answers(t *testing.T, c *conn) []string {
	t.Helper()
	var ids []string
	for _, m := range c.q {
		if m.kind != kindText && m.kind != kindFrame {
			continue // the close frame
		}
		data := m.data
		var msgs [][]byte
		if m.kind == kindFrame {
			for len(data) > 0 { // server frames: FIN+text, then a 7-bit or 16-bit length
				n, h := int(data[1]&0x7f), 2
				if n == 126 {
					n, h = int(data[2])<<8|int(data[3]), 4
				}
				msgs = append(msgs, data[h:h+n])
				data = data[h+n:]
			}
		} else {
			msgs = append(msgs, data)
		}
		for _, b := range msgs {
			var a struct {
				ID     *uint64         `json:"id"`
				Error  json.RawMessage `json:"error"`
				Result struct{ ID string }
			}
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("answer %q: %v", b, err)
			}
			if a.ID == nil {
				continue // a push ({"disconnect": ...})
			}
			id := fmt.Sprint(*a.ID)
			if a.Error != nil {
				id = "!" + id
			} else if a.Result.ID != "" {
				id += ":" + a.Result.ID
			}
			ids = append(ids, id)
		}
	}
	return ids
}

// A batch of commands read together: its puts are handed to the broker
// one after another without waiting (one loop turn, one fdatasync), and
// every command is answered in the order sent — a failed put, a bad one
// and a non-put command in between included.
func TestPipelinedPutsAnsweredInOrder(t *testing.T) {
	f := &pipeBackend{}
	s, err := New(f, nil, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{s: s, id: &identity{}, writing: true} // writing: nothing leaves c.q
	batch := []string{
		`{"id":1,"put":{"queue":"q","payload":1}}`,
		`{"id":2,"put":{"queue":"q","payload":2}}`,
		`{"id":3,"put":{"queue":"bad name!","payload":3}}`, // refused before the broker
		`{"id":4,"put":{"queue":"q","payload":4}}`,
		`{"id":5,"put":{"queue":"full","payload":5}}`, // the broker refuses it
		`{"id":6,"put":{"queue":"q","payload":6}}`,
		`{"id":7,"unsubscribe":{"channel":"news"}}`, // not a put: the puts before it answer first
		`{"id":8,"put":{"queue":"q","payload":8}}`,
		`{"id":9,"put":{"queue":"q","payload":9}}`,
	}
	for i, cmd := range batch {
		c.handle([]byte(cmd), i < len(batch)-1)
	}
	if got, want := strings.Join(answers(t, c), " "), "1:job-1 2:job-2 !3 4:job-4 !5 6:job-6 7 8:job-8 9:job-9"; got != want {
		t.Errorf("answers %s, want %s", got, want)
	}
	// the slow-consumer limit counts answers, not the writes they share
	if c.qLen != len(batch) {
		t.Errorf("%d answers counted against MaxQueue, want %d", c.qLen, len(batch))
	}
	if got, want := strings.Join(f.calls, ","), "queued 1,queued 2,queued 4,queued 5,queued 6,queued 8,queued 9"; got != want {
		t.Errorf("broker calls %s, want %s", got, want)
	}
	if got, want := strings.Join(f.waited, ","), "1,2,4,5,6,8,9"; got != want || f.pending != 0 {
		t.Errorf("waited for %s (%d left), want %s", got, f.pending, want)
	}

	// A put alone in its batch waits for its answer as before.
	c.q, f.calls = nil, nil
	c.handle([]byte(`{"id":10,"put":{"queue":"q","payload":10}}`), false)
	if got := strings.Join(f.calls, ","); got != "put 10" {
		t.Errorf("a lone put: broker calls %s, want put 10", got)
	}
	if got := strings.Join(answers(t, c), " "); got != "10:job-10" {
		t.Errorf("a lone put: answers %s", got)
	}
}

// A binary frame behind pipelined puts ends the connection, after the
// puts handed to the broker are answered: they are durable, and the
// client hears so before the error that closes it.
func TestPipelinedPutsAnsweredBeforeABinaryFrame(t *testing.T) {
	f := &pipeBackend{}
	s, err := New(f, nil, Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	c := &conn{s: s, id: &identity{}, writing: true, processing: true}
	c.inbox = [][]byte{
		[]byte(`{"id":1,"put":{"queue":"q","payload":1}}`),
		[]byte(`{"id":2,"put":{"queue":"q","payload":2}}`),
		{}, // a binary frame
		[]byte(`{"id":3,"put":{"queue":"q","payload":3}}`),
	}
	c.proc.Add(1)
	c.process()
	if got, want := strings.Join(answers(t, c), " "), "1:job-1 2:job-2 !0"; got != want {
		t.Errorf("answers %s, want %s", got, want)
	}
	if got, want := strings.Join(f.waited, ","), "1,2"; got != want || f.pending != 0 {
		t.Errorf("waited for %s (%d left), want %s", got, f.pending, want)
	}
}
