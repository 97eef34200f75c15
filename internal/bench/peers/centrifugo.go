package peers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/chronoq/chronoq/internal/bench"
)

// centrifugoTarget runs the fanout scenario against Centrifugo: the
// subscribers speak its bidirectional JSON protocol over WebSocket
// (/connection/websocket) through gorilla/websocket, the same library and
// the same JSON decoding the chronoq-ws target's subscribers use, so both
// servers face the same load tool; the publisher uses its HTTP API
// (POST /api/publish, X-API-Key from --token). The server must let
// anonymous clients connect and subscribe (client.insecure, as
// bench/peers.sh configures it). Centrifugo has no queues: the queue
// scenarios are not supported.
type centrifugoTarget struct {
	addr, channel, key string
	http               *http.Client
}

func openCentrifugo(_ context.Context, cfg bench.Config, addr, run string) (bench.Target, error) {
	return &centrifugoTarget{addr: addr, channel: run, key: cfg.Token,
		http: &http.Client{Timeout: bench.OpTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}, nil
}

func (t *centrifugoTarget) Addr() string { return t.addr }
func (t *centrifugoTarget) Caps() bench.Caps {
	return bench.Caps{NoDelayReason: "Centrifugo is a real-time messaging server without queues"}
}

func (t *centrifugoTarget) Connect(context.Context) (bench.Conn, error) {
	return nil, fmt.Errorf("centrifugo has no queues, only the fanout scenario: %w", bench.ErrUnsupported)
}

func (t *centrifugoTarget) Cleanup(context.Context) error { return nil }
func (t *centrifugoTarget) Close() error {
	t.http.CloseIdleConnections()
	return nil
}

// centrifugoReply is one message of a server frame: a reply (id with a
// result under the command's name, or error), a push, or an empty object
// (the server's ping, answered with an empty object).
type centrifugoReply struct {
	ID    uint32 `json:"id"`
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Push *struct {
		Channel string `json:"channel"`
		Pub     *struct {
			Data json.RawMessage `json:"data"`
		} `json:"pub"`
		Disconnect *struct {
			Code   int    `json:"code"`
			Reason string `json:"reason"`
		} `json:"disconnect"`
	} `json:"push"`
	Connect   json.RawMessage `json:"connect"`
	Subscribe json.RawMessage `json:"subscribe"`
}

type centrifugoSub struct {
	c       *websocket.Conn
	answers chan centrifugoReply
	done    chan struct{}
	readErr error
	onPub   func([]byte)
	wmu     sync.Mutex // the reader answers pings while call writes
}

func (t *centrifugoTarget) Subscribe(ctx context.Context, onPub func([]byte)) (bench.Subscriber, error) {
	u := "ws://" + t.addr + "/connection/websocket"
	c, resp, err := websocket.DefaultDialer.DialContext(ctx, u, nil)
	if err != nil {
		if resp != nil {
			err = fmt.Errorf("%w (HTTP %s)", err, resp.Status)
		}
		return nil, err
	}
	s := &centrifugoSub{c: c, answers: make(chan centrifugoReply, 1), done: make(chan struct{}), onPub: onPub}
	go s.read()
	if err := s.call(ctx, 1, `{"id":1,"connect":{}}`); err != nil {
		s.Close()
		return nil, fmt.Errorf("connect: %w", err)
	}
	if err := s.call(ctx, 2, fmt.Sprintf(`{"id":2,"subscribe":{"channel":%q}}`, t.channel)); err != nil {
		s.Close()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return s, nil
}

// read decodes frames; Centrifugo's JSON protocol may pack several
// messages into one frame, one per line.
func (s *centrifugoSub) read() {
	defer close(s.done)
	for {
		_, data, err := s.c.ReadMessage()
		if err != nil {
			s.readErr = err
			return
		}
		for len(data) > 0 {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			var r centrifugoReply
			if err := json.Unmarshal(line, &r); err != nil {
				s.readErr = fmt.Errorf("bad frame: %w", err)
				return
			}
			switch {
			case r.Push != nil && r.Push.Pub != nil:
				if s.onPub != nil {
					s.onPub(unquoteJSON(r.Push.Pub.Data))
				}
			case r.Push != nil && r.Push.Disconnect != nil:
				s.readErr = fmt.Errorf("server disconnect %d: %s", r.Push.Disconnect.Code, r.Push.Disconnect.Reason)
				return
			case r.Push != nil:
			case r.ID != 0:
				s.answers <- r
			default: // ping: answer with pong
				s.wmu.Lock()
				err := s.c.WriteMessage(websocket.TextMessage, []byte("{}"))
				s.wmu.Unlock()
				if err != nil {
					s.readErr = err
					return
				}
			}
		}
	}
}

func (s *centrifugoSub) call(ctx context.Context, id uint32, cmd string) error {
	s.wmu.Lock()
	err := s.c.WriteMessage(websocket.TextMessage, []byte(cmd))
	s.wmu.Unlock()
	if err != nil {
		return err
	}
	timer := time.NewTimer(bench.OpTimeout)
	defer timer.Stop()
	select {
	case r := <-s.answers:
		if r.ID != id {
			return fmt.Errorf("answer for id %d, want %d", r.ID, id)
		}
		if r.Error != nil {
			return fmt.Errorf("error %d: %s", r.Error.Code, r.Error.Message)
		}
		return nil
	case <-s.done:
		return fmt.Errorf("connection closed: %v", s.readErr)
	case <-timer.C:
		return fmt.Errorf("no answer within %s", bench.OpTimeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *centrifugoSub) Err() error {
	select {
	case <-s.done:
		if s.readErr == nil {
			return errors.New("connection closed")
		}
		return s.readErr
	default:
		return nil
	}
}

func (s *centrifugoSub) Close() error {
	err := s.c.Close()
	<-s.done
	return err
}

// centrifugoPub publishes through the HTTP API, one request per
// publication, answered once the publication is in the channel.
type centrifugoPub struct{ t *centrifugoTarget }

func (t *centrifugoTarget) Publisher(context.Context) (bench.Publisher, error) {
	return centrifugoPub{t}, nil
}

func (p centrifugoPub) Publish(ctx context.Context, payload []byte) error {
	body := fmt.Sprintf(`{"channel":%q,"data":"%s"}`, p.t.channel, payload)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.t.addr+"/api/publish", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if p.t.key != "" {
		req.Header.Set("X-API-Key", p.t.key)
	}
	resp, err := p.t.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("publish: HTTP %s: %s", resp.Status, b)
	}
	// The API answers 200 with {"error":{...}} for refused publications.
	var r struct {
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("publish: bad answer %q: %w", b, err)
	}
	if r.Error != nil {
		return fmt.Errorf("publish: error %d: %s", r.Error.Code, r.Error.Message)
	}
	return nil
}

func (centrifugoPub) Close() error { return nil }

// unquoteJSON strips the quotes of a JSON string of the bench's ASCII
// payload, as the chronoq-ws target does.
func unquoteJSON(raw json.RawMessage) []byte {
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' {
		return raw[1 : len(raw)-1]
	}
	return raw
}
