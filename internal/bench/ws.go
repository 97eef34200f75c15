package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
)

// wsTarget drives chronoq's WebSocket API (GET /v1/ws): put with the put
// command, take by a consume with prefetch 1 (pushed jobs), ack with the
// ack command; and the fanout scenario over a channel (subscribe/publish).
// Queue cleanup goes through the HTTP API on the same listener.
type wsTarget struct {
	*chronoqHTTP
	url, queue, channel string
}

func openChronoqWS(ctx context.Context, cfg Config, addr, run string) (Target, error) {
	h, err := openChronoqHTTP(ctx, cfg, addr, run)
	if err != nil {
		return nil, err
	}
	ht := h.(*chronoqHTTP)
	u := strings.Replace(strings.Replace(ht.base, "https://", "wss://", 1), "http://", "ws://", 1) + "/v1/ws"
	return &wsTarget{chronoqHTTP: ht, url: u, queue: run, channel: run}, nil
}

func (t *wsTarget) Addr() string { return t.url }

// wsFrame is any server frame: an answer (id with result or error) or a push.
type wsFrame struct {
	ID     uint64          `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Job *struct {
		ID         string          `json:"id"`
		Queue      string          `json:"queue"`
		Receipt    string          `json:"receipt"`
		Payload    json.RawMessage `json:"payload"`
		ActivateAt time.Time       `json:"activate_at"`
	} `json:"job"`
	Pub *struct {
		Data json.RawMessage `json:"data"`
	} `json:"pub"`
	Disconnect json.RawMessage `json:"disconnect"`
}

// wsConn is one socket. A reader goroutine hands answers and pushed jobs
// to the caller; pub pushes go to onPub (run on the reader goroutine).
type wsConn struct {
	t       *wsTarget
	c       *websocket.Conn
	nextID  uint64
	answers chan wsFrame
	jobs    chan wsFrame
	done    chan struct{} // closed when the reader ends
	readErr error
	onPub   func(data []byte)
	buf     bytes.Buffer
	consume bool
}

func (t *wsTarget) dial(ctx context.Context, onPub func([]byte)) (*wsConn, error) {
	h := http.Header{}
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, t.url, h)
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (HTTP %s)", err, resp.Status)
		}
		return nil, err
	}
	w := &wsConn{t: t, c: c, answers: make(chan wsFrame, 1), jobs: make(chan wsFrame, 1024),
		done: make(chan struct{}), onPub: onPub}
	go w.read()
	body := "{}"
	if t.token != "" {
		body = fmt.Sprintf(`{"token":%q}`, t.token)
	}
	if _, err := w.call(ctx, "connect", []byte(body)); err != nil {
		c.Close()
		return nil, err
	}
	return w, nil
}

func (w *wsConn) read() {
	defer close(w.done)
	for {
		_, data, err := w.c.ReadMessage()
		if err != nil {
			w.readErr = err
			return
		}
		var f wsFrame
		if err := json.Unmarshal(data, &f); err != nil {
			w.readErr = fmt.Errorf("bad frame: %w", err)
			return
		}
		switch {
		case f.Pub != nil:
			if w.onPub != nil {
				w.onPub(unquote(f.Pub.Data))
			}
		case f.Job != nil:
			w.jobs <- f
		case f.Disconnect != nil:
			w.readErr = fmt.Errorf("server disconnect: %s", f.Disconnect)
			return
		default:
			w.answers <- f
		}
	}
}

func (w *wsConn) Close() error {
	err := w.c.Close()
	<-w.done
	return err
}

// call sends one command and waits for its answer.
func (w *wsConn) call(ctx context.Context, op string, body []byte) (json.RawMessage, error) {
	w.nextID++
	w.buf.Reset()
	fmt.Fprintf(&w.buf, `{"id":%d,%q:`, w.nextID, op)
	w.buf.Write(body)
	w.buf.WriteByte('}')
	if err := w.c.WriteMessage(websocket.TextMessage, w.buf.Bytes()); err != nil {
		return nil, err
	}
	timer := time.NewTimer(OpTimeout)
	defer timer.Stop()
	select {
	case f := <-w.answers:
		if f.ID != w.nextID {
			return nil, fmt.Errorf("%s: answer for id %d, want %d", op, f.ID, w.nextID)
		}
		if f.Error != nil {
			return nil, fmt.Errorf("%s: %s: %s", op, f.Error.Code, f.Error.Message)
		}
		return f.Result, nil
	case <-w.done:
		return nil, fmt.Errorf("%s: connection closed: %v", op, w.readErr)
	case <-timer.C:
		return nil, fmt.Errorf("%s: no answer within %s", op, OpTimeout)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (t *wsTarget) Connect(ctx context.Context) (Conn, error) { return t.dial(ctx, nil) }

func (w *wsConn) Put(ctx context.Context, payload []byte, delay time.Duration) error {
	body := fmt.Sprintf(`{"queue":%q,"payload":"%s"`, w.t.queue, payload)
	if delay > 0 {
		body += fmt.Sprintf(`,"delay":%q`, delay.String())
	}
	_, err := w.call(ctx, "put", []byte(body+"}"))
	return err
}

func (w *wsConn) PutPipelined(ctx context.Context, payload []byte, lat []time.Duration) error {
	first := w.nextID + 1
	sent := make([]time.Time, len(lat))
	for i := range lat {
		w.nextID++
		w.buf.Reset()
		fmt.Fprintf(&w.buf, `{"id":%d,"put":{"queue":%q,"payload":"%s"}}`, w.nextID, w.t.queue, payload)
		sent[i] = time.Now()
		if err := w.c.WriteMessage(websocket.TextMessage, w.buf.Bytes()); err != nil {
			return err
		}
	}
	timer := time.NewTimer(OpTimeout)
	defer timer.Stop()
	// Every answer is read, a refused put's too, so the next round starts
	// with its own answers.
	var refused error
	for i := range lat {
		select {
		case f := <-w.answers:
			if f.ID != first+uint64(i) {
				return fmt.Errorf("put: answer for id %d, want %d", f.ID, first+uint64(i))
			}
			if f.Error != nil && refused == nil {
				refused = fmt.Errorf("put: %s: %s", f.Error.Code, f.Error.Message)
			}
			lat[i] = time.Since(sent[i])
		case <-w.done:
			return fmt.Errorf("put: connection closed: %v", w.readErr)
		case <-timer.C:
			return fmt.Errorf("put: no answer within %s", OpTimeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return refused
}

func (w *wsConn) Take(ctx context.Context, wait time.Duration) (Job, error) {
	if !w.consume {
		if _, err := w.call(ctx, "consume", []byte(fmt.Sprintf(`{"queues":[%q],"prefetch":1,"ttr":"30s"}`, w.t.queue))); err != nil {
			return Job{}, err
		}
		w.consume = true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case f := <-w.jobs:
		return Job{Payload: unquote(f.Job.Payload), Ref: [3]string{f.Job.Queue, f.Job.ID, f.Job.Receipt}, ActivateAt: f.Job.ActivateAt}, nil
	case <-w.done:
		return Job{}, fmt.Errorf("connection closed: %v", w.readErr)
	case <-timer.C:
		return Job{}, ErrEmpty
	case <-ctx.Done():
		return Job{}, ctx.Err()
	}
}

func (w *wsConn) Ack(ctx context.Context, j Job) error {
	ref := j.Ref.([3]string)
	_, err := w.call(ctx, "ack", []byte(fmt.Sprintf(`{"queue":%q,"id":%q,"receipt":%q}`, ref[0], ref[1], ref[2])))
	return err
}

// Publish publishes the payload as a JSON string to the run's channel.
func (w *wsConn) Publish(ctx context.Context, payload []byte) error {
	_, err := w.call(ctx, "publish", []byte(fmt.Sprintf(`{"channel":%q,"data":"%s"}`, w.t.channel, payload)))
	return err
}

func (t *wsTarget) Subscribe(ctx context.Context, onPub func([]byte)) (Subscriber, error) {
	w, err := t.dial(ctx, onPub)
	if err != nil {
		return nil, err
	}
	if _, err := w.call(ctx, "subscribe", []byte(fmt.Sprintf(`{"channel":%q}`, t.channel))); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (t *wsTarget) Publisher(ctx context.Context) (Publisher, error) { return t.dial(ctx, nil) }

// Err reports why a subscriber's socket ended, if it did.
func (w *wsConn) Err() error {
	select {
	case <-w.done:
		if w.readErr == nil {
			return errors.New("connection closed")
		}
		return w.readErr
	default:
		return nil
	}
}

// unquote strips the quotes of a JSON string of the bench's ASCII payload.
func unquote(raw json.RawMessage) []byte {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		return raw[1 : len(raw)-1]
	}
	return raw
}
