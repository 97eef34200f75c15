package httpapi

import (
	"net/http"
	"time"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/wire"
)

// callRetention is how long a call's own job keeps its result after
// completion even in a non-retaining queue (docs/api.md, call), so a caller
// whose wait ran out can still fetch it with GET .../result.
const callRetention = time.Minute

func (s *Server) put(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodePut(body, s.lim)
	if err != nil {
		return err
	}
	res, err := s.b.Put(r.Context(), ns, q, req)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if res.Duplicate {
		status = http.StatusOK
	}
	writeEncoded(w, status, func(b []byte) []byte { return wireenc.AppendPut(b, res) })
	return nil
}

func (s *Server) putBatch(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	reqs, err := decodeBatch(body, s.lim)
	if err != nil {
		return err
	}
	res, err := s.b.PutBatch(r.Context(), ns, q, reqs)
	if err != nil {
		return err
	}
	out := make([]wire.PutAnswer, len(res))
	for i, pr := range res {
		out[i] = wireenc.Put(pr)
	}
	writeJSON(w, http.StatusCreated, map[string][]wire.PutAnswer{"jobs": out})
	return nil
}

// take serves both take routes; q is "" for the namespace-wide one, whose
// queues come from the body.
func (s *Server) take(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, wait, err := decodeTake(body, q == "", s.lim)
	if err != nil {
		return err
	}
	if q != "" {
		req.Queues = []string{q}
	}
	jobs, err := s.b.Take(r.Context(), ns, req, wait)
	if err != nil {
		return err
	}
	writeEncoded(w, http.StatusOK, func(b []byte) []byte { return wireenc.AppendJobPage(b, jobs) })
	return nil
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, take, err := decodeAckTake(body, q, s.lim)
	if err != nil {
		return err
	}
	if take != nil {
		res, jobs, err := s.b.AckAndTake(r.Context(), ns, q, id, req, take.req, take.wait)
		if err != nil {
			return err
		}
		writeEncoded(w, http.StatusOK, func(b []byte) []byte { return wireenc.AppendAck(b, res, true, jobs) })
		return nil
	}
	res, err := s.b.Ack(r.Context(), ns, q, id, req)
	if err != nil {
		return err
	}
	writeEncoded(w, http.StatusOK, func(b []byte) []byte { return wireenc.AppendAck(b, res, false, nil) })
	return nil
}

// ackBatch acknowledges many reservations of one queue, all or none.
func (s *Server) ackBatch(w http.ResponseWriter, r *http.Request, t target) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	items, err := decodeAckBatch(body)
	if err != nil {
		return err
	}
	res, err := s.b.AckBatch(r.Context(), t.ns, t.q, items)
	if err != nil {
		return err
	}
	out := make([]wire.AckAnswer, len(res))
	for i, a := range res {
		out[i] = wire.AckAnswer{ID: a.ID, State: a.State}
	}
	writeJSON(w, http.StatusOK, wire.AckBatchAnswer{Acks: out})
	return nil
}

func (s *Server) nack(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeNack(body)
	if err != nil {
		return err
	}
	st, err := s.b.Nack(r.Context(), ns, q, id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": st.String()})
	return nil
}

func (s *Server) touch(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeTouch(body)
	if err != nil {
		return err
	}
	until, err := s.b.Touch(r.Context(), ns, q, id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"reserved_until": wireenc.Time(until)})
	return nil
}

func (s *Server) bury(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeBury(body)
	if err != nil {
		return err
	}
	if err := s.b.Bury(r.Context(), ns, q, id, req); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"state": engine.StateDead.String()})
	return nil
}

func (s *Server) peek(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	job, err := s.b.Peek(r.Context(), ns, q, id)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireenc.Job(&job))
	return nil
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	v := r.URL.Query()
	f, _, err := parseFilter(v)
	if err != nil {
		return err
	}
	limit, err := queryLimit(v, engine.DefaultListLimit)
	if err != nil {
		return err
	}
	res, err := s.b.List(r.Context(), ns, q, engine.ListRequest{Filter: f, Limit: limit, Cursor: v.Get("cursor")})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.JobPage{Jobs: wireenc.Jobs(res.Jobs), NextCursor: res.NextCursor})
	return nil
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeUpdate(body, s.lim)
	if err != nil {
		return err
	}
	job, err := s.b.Update(r.Context(), ns, q, id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireenc.Job(&job))
	return nil
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	if err := s.b.Cancel(r.Context(), ns, q, id, r.URL.Query().Get("receipt")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// cancelByFilter serves a queue's jobs and (q "") the namespace's. It
// insists on a filter: a bare DELETE on a collection must never mean
// "everything" (purge exists for that).
func (s *Server) cancelByFilter(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	f, given, err := parseFilter(r.URL.Query())
	if err != nil {
		return err
	}
	if !given {
		return badField("filter", "give at least one filter: state, key or tag.NAME=VALUE")
	}
	n, err := s.b.CancelByFilter(r.Context(), ns, q, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

func (s *Server) respawn(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, err := decodeRespawn(body)
	if err != nil {
		return err
	}
	n, err := s.b.Respawn(r.Context(), ns, q, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"respawned": n})
	return nil
}

func (s *Server) purgeDead(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	n, err := s.b.PurgeDead(r.Context(), ns, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

func (s *Server) result(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q, id := t.ns, t.q, t.id
	wait, err := queryWait(r.URL.Query(), s.opts.MaxWait)
	if err != nil {
		return err
	}
	info, done, err := s.b.Result(r.Context(), ns, q, id, wait)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if !done {
		status = http.StatusAccepted
	}
	writeJSON(w, status, wireenc.Result(info, done))
	return nil
}

func (s *Server) call(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	req, wait, err := decodeCall(body, s.lim)
	if err != nil {
		return err
	}
	req.RetainResult = max(req.RetainResult, callRetention)
	info, done, err := s.b.Call(r.Context(), ns, q, req, wait)
	if err != nil {
		return err
	}
	if !done {
		writeJSON(w, http.StatusGatewayTimeout, wireenc.Call(info, done))
		return nil
	}
	writeJSON(w, http.StatusOK, wireenc.Call(info, done))
	return nil
}
