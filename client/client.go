// Package client is the Go client of chronoq's native HTTP API (docs/api.md):
// typed calls for queues, jobs, workers, results, channels and the admin
// listener, plus Consume, a worker loop that takes, runs, acks or nacks and
// keeps reservations alive.
//
//	c := client.New("http://127.0.0.1:7777")
//	res, err := c.Put(ctx, "emails", client.PutOptions{Payload: json.RawMessage(`{"to":"a@b.c"}`)})
//
// Every call returns a *Error for an answer the server refused; match it
// with errors.Is against ErrConflict, ErrNotFound and the other sentinels.
package client

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// DefaultNamespace is the namespace calls use unless WithNamespace says
// otherwise; the server always has it.
const DefaultNamespace = "default"

// DefaultAdminURL is the admin listener of a server started with defaults.
const DefaultAdminURL = "http://127.0.0.1:7778"

const (
	defaultTimeout = 30 * time.Second
	defaultRetries = 3
	defaultBackoff = 200 * time.Millisecond
	maxBackoff     = 10 * time.Second
)

// sharedTransport keeps more idle connections per host than Go's default
// of two: a worker with several handlers acks, nacks and touches in
// parallel next to its long-poll take, and would otherwise reconnect for
// most calls.
var sharedTransport = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	return t
}()

// Client talks to one chronoq server. It is safe for concurrent use.
type Client struct {
	base    string
	admin   string
	token   string
	ns      string
	hc      *http.Client
	timeout time.Duration
	retries int
	backoff time.Duration
	optErr  error // an option that failed (WithCAFile): every call returns it
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends "Authorization: Bearer tok" on every call (a namespace
// token, or the admin token, which also works on the admin listener).
func WithToken(tok string) Option { return func(c *Client) { c.token = tok } }

// WithHTTPClient replaces the HTTP client. Its own Timeout, if any, also
// applies, so keep it above the longest wait you ask for (60s at most).
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithTimeout bounds each HTTP attempt (default 30s). Long-poll calls (take,
// result, call) get their wait added on top, so a 20s take is not cut short.
// Zero or less means no bound beyond the caller's context.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetries sets how often a retryable call is retried (n, default 3; 0
// disables) and the first backoff (default 200ms), doubled on each retry
// with jitter and capped at 10s. Retryable: network failures, 503 and 429,
// for GET, PUT and DELETE, and for puts that carry an idempotency key. A
// request that never reached the server (connection refused) is retried
// whatever its method.
func WithRetries(n int, backoff time.Duration) Option {
	return func(c *Client) {
		c.retries = max(n, 0)
		if backoff > 0 {
			c.backoff = backoff
		}
	}
}

// WithNamespace makes calls address namespace ns (default "default").
func WithNamespace(ns string) Option {
	return func(c *Client) {
		if ns != "" {
			c.ns = ns
		}
	}
}

// WithAdminURL sets the admin listener's base URL, used by the namespace
// and token calls (default http://127.0.0.1:7778).
func WithAdminURL(u string) Option {
	return func(c *Client) {
		if u != "" {
			c.admin = strings.TrimRight(u, "/")
		}
	}
}

// New returns a client for the server at baseURL (e.g.
// "http://127.0.0.1:7777"). No request is made.
func New(baseURL string, opts ...Option) *Client {
	c := &Client{
		base:    strings.TrimRight(baseURL, "/"),
		admin:   DefaultAdminURL,
		ns:      DefaultNamespace,
		hc:      &http.Client{Transport: sharedTransport},
		timeout: defaultTimeout,
		retries: defaultRetries,
		backoff: defaultBackoff,
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Namespace is the namespace this client addresses.
func (c *Client) Namespace() string { return c.ns }

// BaseURL is the main listener's URL this client talks to.
func (c *Client) BaseURL() string { return c.base }

// Ptr returns a pointer to v, for the optional fields of QueueConfig,
// PutOptions and the others (client.Ptr[uint32](0), client.Ptr(30*time.Second)).
func Ptr[T any](v T) *T { return &v }

// ---------------------------------------------------------------------------
// Requests

// request describes one API call. body is encoded once so that every retry
// sends the same bytes (and the same idempotency keys).
type request struct {
	method    string
	admin     bool
	path      string // already escaped
	query     url.Values
	body      any
	retry     bool          // safe to repeat after a failure the server may have seen
	extraTime time.Duration // long-poll wait on top of the per-attempt timeout
	// ok lists the statuses that are answers rather than errors, beyond
	// 2xx; call's 504 is one.
	ok []int
}

// response is a successful answer: its status and raw body.
type response struct {
	status int
	body   []byte
}

func (r *response) decode(v any) error {
	if v == nil || len(bytes.TrimSpace(r.body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(r.body, v); err != nil {
		return fmt.Errorf("chronoq: decoding answer (HTTP %d): %w", r.status, err)
	}
	return nil
}

// do runs req with retries and decodes a successful answer into out.
func (c *Client) do(ctx context.Context, req request, out any) (*response, error) {
	if c.optErr != nil {
		return nil, c.optErr
	}
	var body []byte
	if req.body != nil {
		var err error
		if body, err = marshalBody(req.body); err != nil {
			return nil, fmt.Errorf("chronoq: encoding request: %w", err)
		}
	}
	u := c.base
	if req.admin {
		u = c.admin
	}
	u += req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	for attempt := 0; ; attempt++ {
		resp, err := c.once(ctx, req, u, body)
		if err == nil {
			return resp, resp.decode(out)
		}
		if attempt >= c.retries || !retryable(req, err) || ctx.Err() != nil {
			return nil, err
		}
		if werr := sleep(ctx, c.retryDelay(attempt, err)); werr != nil {
			return nil, err
		}
	}
}

func (c *Client) once(ctx context.Context, req request, u string, body []byte) (*response, error) {
	if c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout+req.extraTime)
		defer cancel()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("chronoq: %w", err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	if c.token != "" {
		hr.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(hr)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, fmt.Errorf("chronoq: reading answer (HTTP %d): %w", res.StatusCode, err)
	}
	if res.StatusCode/100 == 2 || slices.Contains(req.ok, res.StatusCode) {
		return &response{status: res.StatusCode, body: raw}, nil
	}
	return nil, newError(res, raw)
}

// marshalBody is json.Marshal without HTML escaping: the server stores a
// payload as the JSON text it receives, and json.Marshal would rewrite
// "<", ">" and "&" inside a json.RawMessage payload into \u escapes.
func marshalBody(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// retryable says whether err may go away by itself and req may be sent
// again. A refused connection is safe for every method: nothing arrived.
func retryable(req request, err error) bool {
	var e *Error
	if errors.As(err, &e) {
		return req.retry && (e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests)
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	return req.retry
}

// retryDelay is exponential with ±20% jitter (so a fleet of workers does
// not retry in lockstep), and at least the server's Retry-After.
func (c *Client) retryDelay(attempt int, err error) time.Duration {
	d := c.backoff << min(attempt, 16)
	d = min(d, maxBackoff)
	d = time.Duration(float64(d) * (0.8 + 0.4*mrand.Float64()))
	var e *Error
	if errors.As(err, &e) && e.RetryAfter > d {
		d = min(e.RetryAfter, maxBackoff)
	}
	return d
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// newIdempotencyKey is random, so that only a retry of the same call ever
// repeats it.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = crand.Read(b[:])
	return "cq-" + hex.EncodeToString(b[:])
}

// ---------------------------------------------------------------------------
// Paths

func (c *Client) nsPath() string { return "/v1/ns/" + url.PathEscape(c.ns) }

func (c *Client) queuePath(q string) string {
	return c.nsPath() + "/queues/" + url.PathEscape(q)
}

func (c *Client) jobPath(q, id string) string {
	return c.queuePath(q) + "/jobs/" + url.PathEscape(id)
}

func (c *Client) checkQueue(q string) error {
	if q == "" {
		return errors.New("chronoq: queue name is empty")
	}
	return nil
}

func (c *Client) checkJob(q, id string) error {
	if err := c.checkQueue(q); err != nil {
		return err
	}
	if id == "" {
		return errors.New("chronoq: job id is empty")
	}
	return nil
}

// fmtDuration is the wire form of a duration: Go's string, which the
// server reads exactly (a float of seconds could lose nanoseconds).
func fmtDuration(d time.Duration) string { return d.String() }

func fmtTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// parseDurationString reads an answer's duration: a Go duration string,
// as the server writes them; "" is zero.
func parseDurationString(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	return time.ParseDuration(s)
}

func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}
