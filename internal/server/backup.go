package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/api/httpkit"
	"github.com/chronoq/chronoq/internal/engine"
)

// backupHandler serves POST /admin/backup (docs/api.md, "Backup"): it takes
// an online backup (internal/broker/backup.go) and streams it as a tar
// archive, the manifest last. A failure after the first byte aborts the
// connection, so the client sees an archive without a manifest and
// refuses it.
func (s *Server) backupHandler() http.Handler {
	auth := &httpkit.Auth{AdminToken: s.cfg.AdminToken, HasTokens: s.b.HasTokens, TokenNamespace: s.b.TokenNamespace, Failures: s.api.Failures()}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tok string
		if scheme, t, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
			tok = strings.TrimSpace(t)
		}
		switch v := auth.Decide(r, httpkit.NeedAdmin, "", tok); v.Reason {
		case httpkit.Allowed:
		case httpkit.Missing, httpkit.Unknown:
			w.Header().Set("WWW-Authenticate", `Bearer realm="chronoq"`)
			backupError(w, http.StatusUnauthorized, "unauthorized", "the admin token is required (Authorization: Bearer <token>)")
			return
		case httpkit.Throttled:
			w.Header().Set("Retry-After", strconv.Itoa(v.RetryAfterSeconds()))
			backupError(w, http.StatusTooManyRequests, "too_many_requests", v.Message)
			return
		default:
			msg := v.Message
			if msg == "" {
				msg = "the admin token is required; a namespace token is not enough"
			}
			backupError(w, http.StatusForbidden, "forbidden", msg)
			return
		}
		// A large backup outlives the listener's write timeout.
		rc := http.NewResponseController(w)
		_ = rc.SetWriteDeadline(time.Time{})
		set, err := s.b.Backup(r.Context())
		if err != nil {
			var ee *engine.Error
			if errors.As(err, &ee) && ee.Code == engine.CodeUnavailable {
				w.Header().Set("Retry-After", "1")
				backupError(w, http.StatusServiceUnavailable, string(ee.Code), ee.Error())
				return
			}
			s.lg.Error("backup failed", "err", err)
			backupError(w, http.StatusInternalServerError, "internal", "backup failed: see the server log")
			return
		}
		defer set.Release()
		w.Header().Set("Content-Type", "application/x-tar")
		w.Header().Set("X-Chronoq-Backup-Start", set.Start.String())
		w.Header().Set("X-Chronoq-Backup-Cut", set.Cut.String())
		w.Header().Set("X-Chronoq-Backup-Jobs", strconv.Itoa(set.Jobs))
		w.WriteHeader(http.StatusOK)
		start := time.Now()
		n, err := set.WriteTo(w)
		if err != nil {
			s.lg.Error("backup: streaming failed, connection aborted", "err", err, "bytes", n)
			panic(http.ErrAbortHandler)
		}
		s.lg.Info("backup streamed", "start", set.Start.String(), "cut", set.Cut.String(), "jobs", set.Jobs,
			"bytes", n, "snapshot_took", set.Took.Round(time.Millisecond).String(), "stream_took", time.Since(start).Round(time.Millisecond).String())
	})
}

func backupError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
