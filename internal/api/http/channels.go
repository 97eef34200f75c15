package httpapi

import (
	"net/http"
	"strconv"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/wire"
)

func (s *Server) publish(w http.ResponseWriter, r *http.Request, t target) error {
	ns, ch := t.ns, t.ch
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	data, err := decodePublish(body, s.lim)
	if err != nil {
		return err
	}
	offset, epoch, err := s.b.Publish(r.Context(), ns, ch, data)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wire.PublishAnswer{Offset: offset, Epoch: epoch})
	return nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, t target) error {
	ns, ch := t.ns, t.ch
	v := r.URL.Query()
	var since uint64
	if sv := v.Get("since"); sv != "" {
		var err error
		if since, err = strconv.ParseUint(sv, 10, 64); err != nil {
			return badField("since", "must be a whole number (an offset), got %q", sv)
		}
	}
	limit, err := queryLimit(v, engine.DefaultListLimit)
	if err != nil {
		return err
	}
	wait, err := queryWait(v, s.opts.MaxWait)
	if err != nil {
		return err
	}
	h, err := s.b.History(r.Context(), ns, ch, since, v.Get("epoch"), limit, wait)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, wireenc.History(h))
	return nil
}
