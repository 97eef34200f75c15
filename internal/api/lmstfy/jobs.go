package lmstfy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/chronoq/chronoq/internal/engine"
)

// jobBody is a job as lmstfy answers it (fields in gin.H's sorted order).
// Msg is set on consume answers only. Data is base64, as []byte encodes.
type jobBody struct {
	Attributes  map[string]string `json:"attributes"`
	Data        []byte            `json:"data"`
	ElapsedMS   int64             `json:"elapsed_ms"`
	JobID       string            `json:"job_id"`
	Msg         string            `json:"msg,omitempty"`
	Namespace   string            `json:"namespace"`
	Queue       string            `json:"queue"`
	RemainTries uint16            `json:"remain_tries"`
	TTL         uint32            `json:"ttl"`
}

func toBody(j *engine.Job, ns, queue, msg string, now time.Time) jobBody {
	return jobBody{
		Attributes:  j.Tags,
		Data:        j.Data,
		ElapsedMS:   max(now.Sub(j.CreatedAt).Milliseconds(), 0),
		JobID:       j.ID,
		Msg:         msg,
		Namespace:   ns,
		Queue:       queue,
		RemainTries: remainTries(j),
		TTL:         ttlLeft(j, now),
	}
}

// remainTries is what lmstfy calls the job's tries: deliveries left after
// the ones made so far (after this one, in a consume answer). A job with
// unlimited tries, which only chronoq's own API can make, shows the most
// lmstfy can count.
func remainTries(j *engine.Job) uint16 {
	switch {
	case j.Tries == 0:
		return math.MaxUint16
	case j.Attempt >= j.Tries:
		return 0
	default:
		return uint16(min(j.Tries-j.Attempt, math.MaxUint16))
	}
}

// ttlLeft is the job's remaining time to live in whole seconds, 0 for
// never. Redis rounds a key's TTL to the nearest second; a job still alive
// shows at least 1 so it never reads as immortal.
func ttlLeft(j *engine.Job, now time.Time) uint32 {
	if j.ExpireAt.IsZero() {
		return 0
	}
	s := (j.ExpireAt.Sub(now) + time.Second/2) / time.Second
	return uint32(min(max(s, 1), math.MaxUint32))
}

// readBody reads a request body up to limit bytes; ok is false when it was
// longer (the rest is left unread: the server closes the connection).
func readBody(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, ok bool, err error) {
	body, err = io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, false, nil
	}
	return body, true, err
}

// withNamespace runs fn and, when the namespace does not exist, creates it
// and runs fn again. lmstfy has no namespace objects: a namespace is
// whatever a token names, or anything at all in its dev mode. A namespace
// token implies its namespace exists, so this creates namespaces only in
// dev mode or for the admin token.
func (s *Server) withNamespace(ctx context.Context, ns string, fn func() error) error {
	err := fn()
	if engine.CodeOf(err) != engine.CodeNamespaceNotFound {
		return err
	}
	if _, _, err := s.b.CreateNamespace(ctx, ns, engine.NamespaceConfig{AutoCreateQueues: true}); err != nil {
		return err
	}
	return fn()
}

// readPublish reads a publish's query parameters and a body of at most
// limit bytes; ok false means the error is answered.
func readPublish(w http.ResponseWriter, r *http.Request, limit int64) (pp publishParams, body []byte, ok bool) {
	pp, msg := parsePublish(r.URL.Query())
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return pp, nil, false
	}
	body, ok, err := readBody(w, r, limit)
	if err != nil {
		writeError(w, http.StatusBadRequest, "failed to read body")
		return pp, nil, false
	}
	if !ok {
		writeError(w, http.StatusRequestEntityTooLarge, "body too large")
		return pp, nil, false
	}
	return pp, body, true
}

// PUT /api/:ns/:queue and PUT /api/:ns/:queue/job/:job_id (republish).
func (s *Server) publish(w http.ResponseWriter, r *http.Request, p params) {
	pp, body, ok := readPublish(w, r, s.opts.MaxPayload)
	if !ok {
		return
	}
	attrs, msg := collectAttributes(r.Header)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	req := putRequest(body, pp, attrs)
	ctx := r.Context()
	var id string
	// lmstfy deletes the old job before it even checks the parameters, so
	// a bad republish loses the job; chronoq checks first and swaps the two
	// jobs in one step.
	err := s.withNamespace(ctx, p.ns, func() (err error) {
		if p.id != "" {
			id, err = s.b.ReplaceJob(ctx, p.ns, p.q, p.id, req)
			return err
		}
		res, err := s.b.Put(ctx, p.ns, p.q, req)
		id = res.ID
		return err
	})
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, struct {
		JobID string `json:"job_id"`
		Msg   string `json:"msg"`
	}{id, "published"})
}

func putRequest(body []byte, pp publishParams, attrs map[string]string) engine.PutRequest {
	delay, ttl, tries := pp.delay, pp.ttl, pp.tries
	return engine.PutRequest{Payload: body, Delay: &delay, TTL: &ttl, Tries: &tries, Tags: attrs}
}

// PUT /api/:ns/:queue/bulk: a JSON array whose elements' JSON text become
// the jobs' bodies. chronoq puts them all or none (lmstfy one by one).
func (s *Server) publishBulk(w http.ResponseWriter, r *http.Request, p params) {
	pp, body, ok := readPublish(w, r, s.opts.MaxBody)
	if !ok {
		return
	}
	var jobs []json.RawMessage
	if err := json.Unmarshal(body, &jobs); err != nil {
		writeError(w, http.StatusBadRequest, "request body should be an array of objects")
		return
	}
	switch {
	case len(jobs) == 0:
		writeError(w, http.StatusBadRequest, "no jobs")
		return
	case len(jobs) > maxBulkJobs:
		writeError(w, http.StatusBadRequest, "too many jobs")
		return
	}
	for _, j := range jobs {
		if int64(len(j)) > s.opts.MaxPayload {
			writeError(w, http.StatusRequestEntityTooLarge, "job too large")
			return
		}
	}
	attrs, msg := collectAttributes(r.Header)
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	reqs := make([]engine.PutRequest, len(jobs))
	for i, j := range jobs {
		reqs[i] = putRequest(j, pp, attrs)
	}
	var res []engine.PutResult
	ctx := r.Context()
	err := s.withNamespace(ctx, p.ns, func() (err error) {
		res, err = s.b.PutBatch(ctx, p.ns, p.q, reqs)
		return err
	})
	if engine.CodeOf(err) == engine.CodePayloadTooLarge {
		writeError(w, http.StatusRequestEntityTooLarge, "job too large")
		return
	}
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	ids := make([]string, len(res))
	for i := range res {
		ids[i] = res[i].ID
	}
	writeJSON(w, http.StatusCreated, struct {
		JobIDs []string `json:"job_ids"`
		Msg    string   `json:"msg"`
	}{ids, "published"})
}

// GET /api/:ns/:q1[,:q2...]: reserve up to count jobs, the queues tried in
// their order, waiting up to timeout for the first.
func (s *Server) consume(w http.ResponseWriter, r *http.Request, p params) {
	cp, msg := parseConsume(r.URL.Query())
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	queues := queueList(p.q)
	if len(queues) == 0 {
		writeError(w, http.StatusBadRequest, "invalid queue name(s)")
		return
	}
	wait := min(cp.timeout, s.opts.MaxWait)
	if wait > 0 {
		// The listener's write timeout is sized for chronoq's own waits;
		// an lmstfy long-poll may run longer.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	}
	ctx := r.Context()
	ttr := cp.ttr
	req := engine.TakeRequest{Queues: queues, Max: cp.count, TTR: &ttr}
	var jobs []engine.Job
	err := s.withNamespace(ctx, p.ns, func() (err error) {
		jobs, err = s.b.Take(ctx, p.ns, req, wait)
		return err
	})
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	if len(jobs) == 0 {
		writeJSON(w, http.StatusNotFound, msgBody{"no job available"})
		return
	}
	now := s.opts.Clock()
	if cp.count == 1 {
		writeJSON(w, http.StatusOK, toBody(&jobs[0], p.ns, jobs[0].Queue, "new job", now))
		return
	}
	out := make([]jobBody, len(jobs))
	for i := range jobs {
		out[i] = toBody(&jobs[i], p.ns, jobs[i].Queue, "new job", now)
	}
	writeJSON(w, http.StatusOK, out)
}

// DELETE /api/:ns/:queue/job/:job_id: ack, or delete a job in any state;
// 204 also when there is no such job.
func (s *Server) ack(w http.ResponseWriter, r *http.Request, p params) {
	if err := s.b.RemoveJob(r.Context(), p.ns, p.q, p.id); err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// GET /api/:ns/:queue/peek: the job a consume would get next.
func (s *Server) peekQueue(w http.ResponseWriter, r *http.Request, p params) {
	res, err := s.b.List(r.Context(), p.ns, p.q, engine.ListRequest{Filter: engine.Filter{States: []engine.State{engine.StateReady}}, Limit: 1})
	if err != nil && !isGone(err) {
		s.writeEngineError(w, r, err)
		return
	}
	if len(res.Jobs) == 0 {
		writeError(w, http.StatusNotFound, "the queue is empty")
		return
	}
	writeJSON(w, http.StatusOK, toBody(&res.Jobs[0], p.ns, p.q, "", s.opts.Clock()))
}

// GET /api/:ns/:queue/job/:job_id. A job acked in a queue that retains
// results still exists in chronoq, but not in lmstfy's eyes.
func (s *Server) peekJob(w http.ResponseWriter, r *http.Request, p params) {
	j, err := s.b.Peek(r.Context(), p.ns, p.q, p.id)
	if err != nil && !isGone(err) && engine.CodeOf(err) != engine.CodeBadRequest {
		s.writeEngineError(w, r, err)
		return
	}
	if err != nil || j.State == engine.StateCompleted {
		writeError(w, http.StatusNotFound, "job not found")
		return
	}
	writeJSON(w, http.StatusOK, toBody(&j, p.ns, p.q, "", s.opts.Clock()))
}

type sizeBody struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	Size      uint64 `json:"size"`
}

// counts answers a queue's counts; a queue that does not exist is empty.
func (s *Server) counts(ctx context.Context, ns, q string) (engine.Counts, error) {
	info, err := s.b.GetQueue(ctx, ns, q)
	if isGone(err) {
		return engine.Counts{}, nil
	}
	return info.Counts, err
}

// GET /api/:ns/:queue/size: jobs ready to be consumed (public).
func (s *Server) size(w http.ResponseWriter, r *http.Request, p params) {
	c, err := s.counts(r.Context(), p.ns, p.q)
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sizeBody{p.ns, p.q, c.Ready})
}

// GET /api/:ns/:queue/deadletter/size (public).
func (s *Server) deadLetterSize(w http.ResponseWriter, r *http.Request, p params) {
	c, err := s.counts(r.Context(), p.ns, p.q)
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sizeBody{p.ns, p.q, c.Dead})
}

// DELETE /api/:ns/:queue: the queue and all its jobs go.
func (s *Server) destroy(w http.ResponseWriter, r *http.Request, p params) {
	if err := s.b.DeleteQueue(r.Context(), p.ns, p.q); err != nil && !isGone(err) {
		s.writeEngineError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// GET /api/:ns/:queue/deadletter: its size and the id of its oldest job.
func (s *Server) peekDeadLetter(w http.ResponseWriter, r *http.Request, p params) {
	ctx := r.Context()
	c, err := s.counts(ctx, p.ns, p.q)
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	head := ""
	if c.Dead > 0 {
		res, err := s.b.List(ctx, p.ns, p.q, engine.ListRequest{Filter: engine.Filter{States: []engine.State{engine.StateDead}}, Limit: 1})
		if err != nil && !isGone(err) {
			s.writeEngineError(w, r, err)
			return
		}
		if len(res.Jobs) > 0 {
			head = res.Jobs[0].ID
		}
	}
	writeJSON(w, http.StatusOK, struct {
		DeadletterHead string `json:"deadletter_head"`
		DeadletterSize uint64 `json:"deadletter_size"`
		Namespace      string `json:"namespace"`
		Queue          string `json:"queue"`
	}{head, c.Dead, p.ns, p.q})
}

// PUT /api/:ns/:queue/deadletter?limit=&ttl=: the oldest limit dead jobs
// become ready again. lmstfy gives a respawned job one try and the ttl
// given; chronoq's respawn restores the job's tries and drops its TTL (a
// job brought back on purpose does not silently expire), so ttl is checked
// and otherwise unused.
func (s *Server) respawnDeadLetter(w http.ResponseWriter, r *http.Request, p params) {
	v := r.URL.Query()
	limit, msg := parseLimit(v)
	if msg == "" {
		msg = parseRespawnTTL(v)
	}
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	n, err := s.b.Respawn(r.Context(), p.ns, p.q, engine.RespawnRequest{Limit: int(min(limit, math.MaxInt32))})
	if err != nil && !isGone(err) {
		s.writeEngineError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Count int    `json:"count"`
		Msg   string `json:"msg"`
	}{n, "respawned"})
}

// DELETE /api/:ns/:queue/deadletter?limit=: the oldest limit dead jobs go.
func (s *Server) deleteDeadLetter(w http.ResponseWriter, r *http.Request, p params) {
	limit, msg := parseLimit(r.URL.Query())
	if msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	ctx := r.Context()
	c, err := s.counts(ctx, p.ns, p.q)
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	if uint64(limit) >= c.Dead {
		// Everything goes: one pass, however many there are.
		_, err = s.b.PurgeDead(ctx, p.ns, p.q)
	} else {
		// Pages bound each loop turn; each deletes the oldest of the rest.
		for left := int(limit); left > 0 && err == nil; {
			var n int
			n, err = s.b.PurgeDeadOldest(ctx, p.ns, p.q, min(left, engine.MaxListLimit))
			if n == 0 {
				break
			}
			left -= n
		}
	}
	if err != nil && !isGone(err) {
		s.writeEngineError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func isGone(err error) bool {
	switch engine.CodeOf(err) {
	case engine.CodeJobNotFound, engine.CodeQueueNotFound, engine.CodeNamespaceNotFound:
		return true
	}
	return false
}
