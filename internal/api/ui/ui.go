// Package ui is the web dashboard of the admin listener (docs/dashboard.md):
// static files embedded in the binary under /ui/, the /v1 API re-mounted
// under /ui/api/v1/ so that the pages stay same-origin with the admin
// listener, and the two things the API lacked: a stats snapshot with a
// 15-minute rate history (GET /admin/stats) and its live stream over SSE
// (GET /admin/stats/stream), both documented in docs/api.md.
package ui

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chronoq/chronoq/internal/api/httpkit"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
	"github.com/chronoq/chronoq/internal/stats"
)

//go:embed static
var staticFS embed.FS

// Source is what the dashboard reads from the broker.
type Source interface {
	Stats(ctx context.Context) (engine.Stats, error)
	AllQueues(ctx context.Context) ([]engine.QueueInfo, error)
	QueuePage(ctx context.Context, ns string, req engine.QueueListRequest) (engine.QueueList, error)
}

// Options configure the dashboard.
type Options struct {
	// API is the native API's main handler (/v1); the dashboard serves it
	// again under /ui/api with the same auth and validation.
	API http.Handler
	// Auth decides the calls of the stats routes (admin need).
	Auth    httpkit.Auth
	Source  Source
	History *stats.History
	// Channels lists a namespace's live channels (nil: none).
	Channels func(ns, after string, limit int) ([]pubsub.ChannelInfo, bool)
	// Connections answers open connections by protocol.
	Connections func() map[string]int64
	// Cluster answers this member's view of its raft cluster; nil (or
	// false) on a single node.
	Cluster func() (ClusterInfo, bool)
	// DataDir is where the log and snapshots live (their size on disk).
	DataDir string
	// Interval between samples and stream events; default 1 s (the
	// dashboard never updates faster).
	Interval time.Duration
	// MaxStreams caps simultaneous stats streams; default 64.
	MaxStreams int
	Logger     *slog.Logger
}

// UI is the dashboard. New starts its sampler; Close stops it and ends
// every open stream.
type UI struct {
	o       Options
	started time.Time
	version string

	streams chan struct{} // a slot per open stream
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	mu      sync.Mutex
	cached  *Overview
	cacheAt time.Time
	disk    diskUsage
	diskAt  time.Time
}

// New makes the dashboard and starts sampling the engine's counters.
func New(o Options) *UI {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 64
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.History == nil {
		o.History = stats.New(0)
	}
	u := &UI{o: o, started: time.Now(), version: buildVersion(),
		streams: make(chan struct{}, o.MaxStreams), stop: make(chan struct{}), done: make(chan struct{})}
	go u.sample()
	return u
}

// Close stops the sampler and ends the open streams. Safe to call twice.
func (u *UI) Close() {
	u.once.Do(func() { close(u.stop) })
	<-u.done
}

func (u *UI) sample() {
	defer close(u.done)
	tick := time.NewTicker(u.o.Interval)
	defer tick.Stop()
	record := func() {
		ctx, cancel := context.WithTimeout(context.Background(), u.o.Interval)
		defer cancel()
		if s, err := u.o.Source.Stats(ctx); err == nil {
			u.o.History.Record(time.Now(), s)
		}
	}
	record()
	for {
		select {
		case <-u.stop:
			return
		case <-tick.C:
			record()
		}
	}
}

// Handler serves /ui/, /ui/api/v1/ and /admin/stats[/stream]; mount it
// on the admin listener for those patterns.
func (u *UI) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(staticFS, "static")
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	// "/ui/" without a method: with one it would conflict with the API
	// pattern below in http.ServeMux's precedence rules.
	mux.Handle("/ui/", securityHeaders(getOnly(files)))
	mux.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	// Only /v1's namespace routes: the page needs nothing else of /v1.
	mux.Handle("/ui/api/v1/ns/", noStore(http.StripPrefix("/ui/api", u.o.API)))
	mux.HandleFunc("GET /ui/api/v1/ns/{ns}/channels", u.channels)
	mux.HandleFunc("GET /ui/api/v1/ns/{ns}/queue-stats", u.queueStats)
	mux.HandleFunc("GET /admin/stats", u.stats)
	mux.HandleFunc("GET /admin/stats/stream", u.stream)
	return mux
}

// securityHeaders: the pages load nothing from elsewhere and run no inline
// script, so a payload that slipped into the markup could not run either;
// no other site may frame them (clickjacking of the action buttons).
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

func getOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "method "+r.Method+" not allowed on "+r.URL.Path+" (allowed: GET, HEAD)")
			return
		}
		h.ServeHTTP(w, r)
	})
}

func noStore(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// authorize answers the stats routes' refusals in the API's error shape.
func (u *UI) authorize(w http.ResponseWriter, r *http.Request, need httpkit.Need, ns string) bool {
	tok := ""
	if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		tok = strings.TrimSpace(t)
	}
	v := u.o.Auth.Decide(r, need, ns, tok)
	switch v.Reason {
	case httpkit.Allowed:
		return true
	case httpkit.Missing:
		w.Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "missing bearer token (Authorization: Bearer <token>)")
	case httpkit.Unknown:
		w.Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "unknown token")
	case httpkit.NotAdmin:
		writeError(w, http.StatusForbidden, "forbidden", "admin calls need the admin token, not a namespace token")
	case httpkit.WrongNamespace:
		writeError(w, http.StatusForbidden, "forbidden", "this token cannot be used on namespace "+strconv.Quote(ns))
	case httpkit.Throttled:
		w.Header().Set("Retry-After", strconv.Itoa(v.RetryAfterSeconds()))
		writeError(w, http.StatusTooManyRequests, "rate_limited", v.Message)
	default:
		writeError(w, http.StatusForbidden, "forbidden", v.Message)
	}
	return false
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// Overview is the answer of GET /admin/stats and each stream event.
type Overview struct {
	Time          time.Time        `json:"time"`
	Version       string           `json:"version"`
	StartedAt     time.Time        `json:"started_at"`
	UptimeSeconds float64          `json:"uptime_seconds"`
	Queues        int              `json:"queues"`
	Jobs          map[string]int64 `json:"jobs"` // by state, every queue
	Totals        map[string]int64 `json:"totals"`
	Connections   map[string]int64 `json:"connections"`
	WAL           walInfo          `json:"wal"`
	Snapshot      snapInfo         `json:"snapshot"`
	Samples       []stats.Sample   `json:"samples"`
	Cluster       *ClusterInfo     `json:"cluster,omitempty"` // absent on a single node
	// Unavailable says why the numbers are missing (a cluster member
	// without a leader); only the cluster view is then filled in.
	Unavailable string `json:"unavailable,omitempty"`
}

func (u *UI) clusterInfo() (ClusterInfo, bool) {
	if u.o.Cluster == nil {
		return ClusterInfo{}, false
	}
	return u.o.Cluster()
}

// ClusterInfo is a member's view of its cluster (docs/cluster.md).
type ClusterInfo struct {
	ID      uint64 `json:"id"`
	Role    string `json:"role"`
	Term    uint64 `json:"term"`
	Leader  uint64 `json:"leader"` // 0: none known
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	// Lag is, on the leader, how many committed entries each member's log
	// is behind (by member id); empty on a follower, which cannot know.
	Lag map[string]uint64 `json:"lag,omitempty"`
}

type walInfo struct {
	Bytes         int64 `json:"bytes"` // on disk now
	Segments      int   `json:"segments"`
	AppendedBytes int64 `json:"appended_bytes"` // by this process
}

type snapInfo struct {
	Bytes    int64      `json:"bytes"`
	At       *time.Time `json:"at,omitempty"` // the newest snapshot file's time
	Duration string     `json:"last_duration,omitempty"`
}

type diskUsage struct {
	walBytes, snapBytes int64
	segments            int
	snapAt              time.Time
}

// overview builds the current numbers; the per-queue sums are cached for
// one interval so that any number of viewers costs one walk of the queues
// per interval.
func (u *UI) overview(ctx context.Context) (*Overview, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := time.Now()
	if u.cached != nil && now.Sub(u.cacheAt) < u.o.Interval*9/10 {
		return u.cached, nil
	}
	qs, err := u.o.Source.AllQueues(ctx)
	var st engine.Stats
	if err == nil {
		st, err = u.o.Source.Stats(ctx)
	}
	if err != nil {
		// A cluster member that cannot read (no leader, no quorum) still
		// shows its view of the cluster: that is when an operator looks.
		if ci, ok := u.clusterInfo(); ok {
			return &Overview{Time: now, Version: u.version, StartedAt: u.started, UptimeSeconds: now.Sub(u.started).Seconds(),
				Jobs: map[string]int64{}, Totals: map[string]int64{}, Connections: map[string]int64{},
				Cluster: &ci, Unavailable: err.Error(), Samples: []stats.Sample{}}, nil
		}
		return nil, err
	}
	ov := &Overview{Time: now, Version: u.version, StartedAt: u.started, UptimeSeconds: now.Sub(u.started).Seconds(),
		Queues: len(qs), Jobs: map[string]int64{}, Connections: map[string]int64{},
		Totals: map[string]int64{"put": int64(st.Put), "taken": int64(st.Taken), "acked": int64(st.Acked),
			"nacked": int64(st.Nacked), "dead": int64(st.Dead), "expired": int64(st.Expired), "cancelled": int64(st.Cancelled)}}
	for _, s := range []string{"delayed", "ready", "blocked", "reserved", "dead", "completed"} {
		ov.Jobs[s] = 0
	}
	for _, q := range qs {
		c := q.Counts
		ov.Jobs["delayed"] += int64(c.Delayed)
		ov.Jobs["ready"] += int64(c.Ready)
		ov.Jobs["blocked"] += int64(c.Blocked)
		ov.Jobs["reserved"] += int64(c.Reserved)
		ov.Jobs["dead"] += int64(c.Dead)
		ov.Jobs["completed"] += int64(c.Completed)
	}
	if u.o.Connections != nil {
		ov.Connections = u.o.Connections()
	}
	if ci, ok := u.clusterInfo(); ok {
		ov.Cluster = &ci
	}
	// The directory walk is cheap but needless every second.
	if now.Sub(u.diskAt) >= 5*time.Second {
		u.disk, u.diskAt = scanDisk(u.o.DataDir), now
	}
	ov.WAL = walInfo{Bytes: u.disk.walBytes, Segments: u.disk.segments, AppendedBytes: u.o.History.WALBytes()}
	ov.Snapshot.Bytes = u.disk.snapBytes
	if !u.disk.snapAt.IsZero() {
		at := u.disk.snapAt
		ov.Snapshot.At = &at
	}
	if at, d := u.o.History.LastSnapshot(); !at.IsZero() {
		ov.Snapshot.At = &at
		ov.Snapshot.Duration = d.String()
	}
	u.cached, u.cacheAt = ov, now
	return ov, nil
}

func scanDisk(dir string) diskUsage {
	var du diskUsage
	if dir == "" {
		return du
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "wal")); err == nil {
		for _, e := range ents {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() {
				du.walBytes += fi.Size()
				du.segments++
			}
		}
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "snap")); err == nil {
		for _, e := range ents {
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".snap") {
				continue
			}
			du.snapBytes += fi.Size()
			if fi.ModTime().After(du.snapAt) {
				du.snapAt = fi.ModTime()
			}
		}
	}
	return du
}

func buildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " (" + s.Value[:12] + ")"
		}
	}
	if v == "" {
		v = "devel"
	}
	return v + " " + bi.GoVersion
}

// stats: GET /admin/stats[?window=15m] — the current numbers and the
// samples of the window (default and at most the whole history).
func (u *UI) stats(w http.ResponseWriter, r *http.Request) {
	if !u.authorize(w, r, httpkit.NeedAdmin, "") {
		return
	}
	window := stats.DefaultSize * time.Second
	if s := r.URL.Query().Get("window"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			writeError(w, http.StatusBadRequest, "bad_request", "window: want a positive duration such as 15m, got "+strconv.Quote(s))
			return
		}
		window = min(d, window)
	}
	ov, err := u.overview(r.Context())
	if err != nil {
		u.unavailable(w, err)
		return
	}
	out := *ov
	out.Samples = u.o.History.Samples(time.Now().Add(-window))
	writeJSON(w, http.StatusOK, out)
}

func (u *UI) unavailable(w http.ResponseWriter, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	u.o.Logger.Warn("dashboard stats", "err", err)
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusServiceUnavailable, "unavailable", "server busy or stopping; retry")
}

// stream: GET /admin/stats/stream — an SSE stream, one "stats" event per
// interval with the overview and the samples since the previous event.
func (u *UI) stream(w http.ResponseWriter, r *http.Request) {
	if !u.authorize(w, r, httpkit.NeedAdmin, "") {
		return
	}
	select {
	case u.streams <- struct{}{}:
		defer func() { <-u.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "too_many_streams", "at most "+strconv.Itoa(u.o.MaxStreams)+" stats streams at once; retry later")
		return
	}
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	last := time.Now()
	tick := time.NewTicker(u.o.Interval)
	defer tick.Stop()
	send := func() bool {
		ov, err := u.overview(r.Context())
		if err != nil {
			return errors.Is(err, context.DeadlineExceeded) // busy: skip one event
		}
		out := *ov
		out.Samples = u.o.History.Samples(last)
		if n := len(out.Samples); n > 0 {
			last = out.Samples[n-1].Time
		}
		b, err := json.Marshal(out)
		if err != nil {
			return false
		}
		// Each write gets its own deadline: the listener's WriteTimeout
		// would otherwise cut every stream after 90 s.
		_ = rc.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := w.Write(append(append([]byte("event: stats\ndata: "), b...), '\n', '\n')); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// the stream starts with the retry hint and a first event at once
	_, _ = w.Write([]byte("retry: 2000\n\n"))
	if !send() {
		return
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case <-u.stop:
			return
		case <-tick.C:
			if !send() {
				return
			}
		}
	}
}

// channels: GET /ui/api/v1/ns/{ns}/channels?limit&cursor — the live
// channels of a namespace, which /v1 does not list. Namespace need: the
// same tokens as the channel routes of /v1.
func (u *UI) channels(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	if !u.authorize(w, r, httpkit.NeedNamespace, ns) {
		return
	}
	limit := 100
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "bad_request", "limit: want 1..1000, got "+strconv.Quote(s))
			return
		}
		limit = n
	}
	type item struct {
		Channel     string `json:"channel"`
		Offset      uint64 `json:"offset"`
		Epoch       string `json:"epoch"`
		Subscribers int    `json:"subscribers"`
		History     int    `json:"history"`
	}
	out := struct {
		Channels   []item `json:"channels"`
		NextCursor string `json:"next_cursor,omitempty"`
	}{Channels: []item{}}
	if u.o.Channels != nil {
		list, more := u.o.Channels(ns, r.URL.Query().Get("cursor"), limit)
		for _, c := range list {
			out.Channels = append(out.Channels, item{c.Channel, c.Offset, c.Epoch, c.Subscribers, c.History})
		}
		if more && len(list) > 0 {
			out.NextCursor = list[len(list)-1].Channel
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// queueStats: GET /ui/api/v1/ns/{ns}/queue-stats?limit&cursor — the
// counters of a page of queues (same paging as GET /v1/ns/{ns}/queues),
// which the queue object leaves out; the page turns their differences
// between two events into per-queue rates.
func (u *UI) queueStats(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	if !u.authorize(w, r, httpkit.NeedNamespace, ns) {
		return
	}
	req := engine.QueueListRequest{Cursor: r.URL.Query().Get("cursor")}
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 1000 {
			writeError(w, http.StatusBadRequest, "bad_request", "limit: want 1..1000, got "+strconv.Quote(s))
			return
		}
		req.Limit = n
	}
	page, err := u.o.Source.QueuePage(r.Context(), ns, req)
	if err != nil {
		var ee *engine.Error
		if errors.As(err, &ee) && ee.Code == engine.CodeBadRequest {
			writeError(w, http.StatusBadRequest, "bad_request", ee.Error())
			return
		}
		if errors.As(err, &ee) && ee.Code == engine.CodeNamespaceNotFound {
			writeError(w, http.StatusNotFound, string(ee.Code), ee.Error())
			return
		}
		u.unavailable(w, err)
		return
	}
	type itemJSON struct {
		Name      string `json:"name"`
		Put       uint64 `json:"put"`
		Taken     uint64 `json:"taken"`
		Acked     uint64 `json:"acked"`
		Nacked    uint64 `json:"nacked"`
		Dead      uint64 `json:"dead"`
		Expired   uint64 `json:"expired"`
		Cancelled uint64 `json:"cancelled"`
	}
	out := struct {
		Time       time.Time  `json:"time"`
		Queues     []itemJSON `json:"queues"`
		NextCursor string     `json:"next_cursor,omitempty"`
	}{Time: time.Now(), Queues: []itemJSON{}, NextCursor: page.NextCursor}
	for _, q := range page.Queues {
		st := q.Stats
		out.Queues = append(out.Queues, itemJSON{q.Name, st.Put, st.Taken, st.Acked, st.Nacked, st.Dead, st.Expired, st.Cancelled})
	}
	writeJSON(w, http.StatusOK, out)
}
