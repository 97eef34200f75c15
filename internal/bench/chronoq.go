package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// chronoqHTTP drives the native API: POST .../jobs, .../take, .../ack. Each
// connection is its own http.Transport limited to one keep-alive TCP
// connection, so --conns means sockets, as for every other target.
type chronoqHTTP struct {
	base, qpath, token string
}

func openChronoqHTTP(_ context.Context, cfg Config, addr, run string) (Target, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return &chronoqHTTP{base: strings.TrimRight(base, "/"), qpath: "/v1/ns/default/queues/" + run, token: cfg.Token}, nil
}

func (t *chronoqHTTP) Addr() string { return t.base }
func (t *chronoqHTTP) Caps() Caps   { return Caps{DelayResolution: time.Millisecond} }
func (t *chronoqHTTP) Close() error { return nil }

func (t *chronoqHTTP) Connect(ctx context.Context) (Conn, error) {
	tr := &http.Transport{
		MaxIdleConns: 1, MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1,
		DisableCompression: true, IdleConnTimeout: time.Minute,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}
	c := &chronoqConn{t: t, hc: &http.Client{Transport: tr, Timeout: 90 * time.Second}}
	// one request opens the keep-alive connection before the clock starts
	if _, err := c.do(ctx, http.MethodGet, "/healthz", nil); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return c, nil
}

func (t *chronoqHTTP) Cleanup(ctx context.Context) error {
	c, err := t.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.(*chronoqConn).do(ctx, http.MethodDelete, t.qpath, nil)
	return err
}

type chronoqConn struct {
	t   *chronoqHTTP
	hc  *http.Client
	buf bytes.Buffer
}

func (c *chronoqConn) Close() error {
	c.hc.Transport.(*http.Transport).CloseIdleConnections()
	return nil
}

// do sends one request and answers the body of a 2xx response.
func (c *chronoqConn) do(ctx context.Context, method, path string, body []byte) ([]byte, error) {
	return doHTTP(ctx, c.hc, c.t.token, method, c.t.base+path, body)
}

// doHTTP sends one request (JSON body if any, the bearer token if any)
// and answers the body of a 2xx response; anything else is an error
// naming the request and the answer.
func doHTTP(ctx context.Context, hc *http.Client, token, method, url string, body []byte) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, strings.TrimSpace(string(data)))
	}
	return data, nil
}

// Put sends the payload as a JSON string (the bench's payloads are ASCII).
func (c *chronoqConn) Put(ctx context.Context, payload []byte, delay time.Duration) error {
	c.buf.Reset()
	c.buf.WriteString(`{"payload":"`)
	c.buf.Write(payload)
	c.buf.WriteByte('"')
	if delay > 0 {
		fmt.Fprintf(&c.buf, `,"delay":%q`, delay.String())
	}
	c.buf.WriteByte('}')
	_, err := c.do(ctx, http.MethodPost, c.t.qpath+"/jobs", c.buf.Bytes())
	return err
}

type chronoqTaken struct {
	Jobs []struct {
		ID         string          `json:"id"`
		Receipt    string          `json:"receipt"`
		Payload    json.RawMessage `json:"payload"`
		ActivateAt time.Time       `json:"activate_at"`
	} `json:"jobs"`
}

// chronoqMaxWait is the server's default cap on a long-poll.
const chronoqMaxWait = 60 * time.Second

func (c *chronoqConn) Take(ctx context.Context, wait time.Duration) (Job, error) {
	deadline := time.Now().Add(wait)
	for {
		w := min(time.Until(deadline), chronoqMaxWait)
		if w < 0 {
			return Job{}, ErrEmpty
		}
		body := fmt.Sprintf(`{"max":1,"ttr":"30s","wait":%q}`, w.Round(time.Millisecond).String())
		data, err := c.do(ctx, http.MethodPost, c.t.qpath+"/take", []byte(body))
		if err != nil {
			return Job{}, err
		}
		var got chronoqTaken
		if err := json.Unmarshal(data, &got); err != nil {
			return Job{}, fmt.Errorf("take answer: %w", err)
		}
		if len(got.Jobs) == 1 {
			return chronoqJob(got), nil
		}
		if time.Now().After(deadline) {
			return Job{}, ErrEmpty
		}
	}
}

// AckTake acks j and takes the next job in the same request.
func (c *chronoqConn) AckTake(ctx context.Context, j Job, wait time.Duration) (Job, error) {
	ref := j.Ref.([2]string)
	w := min(wait, chronoqMaxWait).Round(time.Millisecond)
	body := `{"receipt":"` + ref[1] + `","take":{"max":1,"ttr":"30s","wait":"` + w.String() + `"}}`
	data, err := c.do(ctx, http.MethodPost, c.t.qpath+"/jobs/"+ref[0]+"/ack", []byte(body))
	if err != nil {
		return Job{}, err
	}
	var got chronoqTaken
	if err := json.Unmarshal(data, &got); err != nil {
		return Job{}, fmt.Errorf("ack+take answer: %w", err)
	}
	if len(got.Jobs) != 1 {
		return Job{}, ErrEmpty
	}
	return chronoqJob(got), nil
}

func chronoqJob(got chronoqTaken) Job {
	j := got.Jobs[0]
	var p []byte
	if len(j.Payload) >= 2 && j.Payload[0] == '"' {
		p = j.Payload[1 : len(j.Payload)-1]
	}
	return Job{Payload: p, Ref: [2]string{j.ID, j.Receipt}, ActivateAt: j.ActivateAt}
}

func (c *chronoqConn) Ack(ctx context.Context, j Job) error {
	ref := j.Ref.([2]string)
	_, err := c.do(ctx, http.MethodPost, c.t.qpath+"/jobs/"+ref[0]+"/ack", []byte(`{"receipt":"`+ref[1]+`"}`))
	return err
}
