package httpapi

import (
	"fmt"
	"net/http"
)

// healthz says the process serves; readyz says it can also take writes
// (recovery done, log writable), which is what a load balancer should route on.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, t target) error {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request, t target) error {
	if err := s.b.Ready(); err != nil {
		return fmt.Errorf("%w: not ready: %v", ErrUnavailable, err)
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	return nil
}
