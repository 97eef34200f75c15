package httpapi

import (
	"net/http"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/wire"
)

func (s *Server) listQueues(w http.ResponseWriter, r *http.Request, t target) error {
	ns := t.ns
	v := r.URL.Query()
	limit, err := queryLimit(v, engine.DefaultQueueListLimit)
	if err != nil {
		return err
	}
	page, err := s.b.QueuePage(r.Context(), ns, engine.QueueListRequest{Limit: limit, Cursor: v.Get("cursor")})
	if err != nil {
		return err
	}
	qs := page.Queues
	out := wire.QueuePage{Queues: make([]wire.Queue, len(qs)), NextCursor: page.NextCursor}
	for i := range qs {
		out.Queues[i] = wireenc.Queue(&qs[i])
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) putQueue(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	patch, err := decodeQueuePatch(body, s.lim)
	if err != nil {
		return err
	}
	info, created, err := s.b.PutQueue(r.Context(), ns, q, patch)
	if err != nil {
		return err
	}
	writeUpserted(w, created, wireenc.Queue(&info))
	return nil
}

// writeUpserted answers a create-or-update: 201 when it created, else 200.
func writeUpserted(w http.ResponseWriter, created bool, v any) {
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, v)
}

func (s *Server) getQueue(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	info, err := s.b.GetQueue(r.Context(), ns, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireenc.Queue(&info))
	return nil
}

func (s *Server) deleteQueue(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	if err := s.b.DeleteQueue(r.Context(), ns, q); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) pauseQueue(w http.ResponseWriter, r *http.Request, t target) error {
	return s.setPaused(w, r, t, true)
}

func (s *Server) resumeQueue(w http.ResponseWriter, r *http.Request, t target) error {
	return s.setPaused(w, r, t, false)
}

func (s *Server) setPaused(w http.ResponseWriter, r *http.Request, t target, paused bool) error {
	ns, q := t.ns, t.q
	if err := s.emptyBody(w, r); err != nil {
		return err
	}
	info, err := s.b.SetPaused(r.Context(), ns, q, paused)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireenc.Queue(&info))
	return nil
}

func (s *Server) purgeQueue(w http.ResponseWriter, r *http.Request, t target) error {
	ns, q := t.ns, t.q
	if err := s.emptyBody(w, r); err != nil {
		return err
	}
	n, err := s.b.PurgeQueue(r.Context(), ns, q)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
	return nil
}

// emptyBody accepts no body, {} or whitespace on routes without fields.
func (s *Server) emptyBody(w http.ResponseWriter, r *http.Request) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	return decodeEmpty(body)
}
