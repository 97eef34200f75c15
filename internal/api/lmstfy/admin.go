package lmstfy

import (
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/chronoq/chronoq/internal/engine"
)

// hashPrefix marks a listed token: chronoq stores tokens hashed, so GET
// /token/:ns can show only "sha256:<hex>" keys, and DELETE accepts them.
const hashPrefix = "sha256:"

const minUserToken = 20 // lmstfy refuses shorter caller-chosen tokens

func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if !s.adminAllowed(r) {
		// gin's BasicAuth answer: a challenge and no body.
		w.Header().Set("WWW-Authenticate", `Basic realm="Authorization Required"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	path := r.URL.Path
	switch {
	case path == "/info" && r.Method == http.MethodGet:
		s.info(w, r)
	case path == "/pools" && r.Method == http.MethodGet:
		writeIndented(w, http.StatusOK, []string{"default"})
	case path == "/version" && r.Method == http.MethodGet:
		s.version(w)
	case strings.HasPrefix(path, "/token/"):
		seg := strings.Split(strings.TrimPrefix(path, "/token/"), "/")
		switch {
		case len(seg) == 1 && seg[0] != "" && r.Method == http.MethodGet:
			s.listTokens(w, r, seg[0])
		case len(seg) == 1 && seg[0] != "" && r.Method == http.MethodPost:
			s.newToken(w, r, seg[0])
		case len(seg) == 2 && seg[0] != "" && seg[1] != "" && r.Method == http.MethodDelete:
			s.deleteToken(w, r, seg[0], seg[1])
		default:
			notFoundPage(w)
		}
	default:
		notFoundPage(w)
	}
}

// notFoundPage is gin's default 404: lmstfy's admin server sets no JSON one.
func notFoundPage(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte("404 page not found"))
}

// adminAllowed checks the admin token when one is configured. lmstfy's
// admin server uses HTTP basic auth, so the token is accepted as the basic
// auth password (any user name), as a bearer token, or in X-Token; never in
// ?token=, which POST /token uses for the new token's value.
func (s *Server) adminAllowed(r *http.Request) bool {
	a := s.opts.AdminToken
	if a == "" {
		return true
	}
	var cands []string
	if _, pw, ok := r.BasicAuth(); ok {
		cands = append(cands, pw)
	}
	if scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " "); ok && strings.EqualFold(scheme, "Bearer") {
		cands = append(cands, strings.TrimSpace(tok))
	}
	if tok := r.Header.Get("X-Token"); tok != "" {
		cands = append(cands, tok)
	}
	for _, c := range cands {
		if subtle.ConstantTimeCompare([]byte(c), []byte(a)) == 1 {
			return true
		}
	}
	return false
}

// POST /token/:ns?description=…[&token=…]: creates the namespace when it
// does not exist yet, then a token for it.
func (s *Server) newToken(w http.ResponseWriter, r *http.Request, ns string) {
	_ = r.ParseForm() // description and token may come in the query or a form body
	desc := r.Form.Get("description")
	userToken := r.Form.Get("token")
	switch {
	case desc == "":
		writeError(w, http.StatusBadRequest, "invalid description")
		return
	case userToken != "" && len(userToken) < minUserToken:
		writeError(w, http.StatusBadRequest, "the user token was too short")
		return
	case len(ns) > engine.MaxNSLen:
		// lmstfy allows 255 bytes; chronoq namespaces have at most 64.
		writeError(w, http.StatusBadRequest, "the namespace name was too long")
		return
	case !validName(ns):
		writeError(w, http.StatusBadRequest, "namespace name contains forbidden characters")
		return
	}
	pool := r.URL.Query().Get("pool")
	raw := userToken
	if fields := strings.Split(userToken, ":"); len(fields) == 2 {
		pool, raw = fields[0], fields[1]
	}
	ctx := r.Context()
	if _, _, err := s.b.CreateNamespace(ctx, ns, engine.NamespaceConfig{AutoCreateQueues: true}); err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	var err error
	if raw == "" {
		raw, err = s.b.CreateToken(ctx, ns, desc)
	} else {
		err = s.b.CreateTokenWithValue(ctx, ns, raw, desc)
	}
	if engine.CodeOf(err) == engine.CodeConflict {
		writeError(w, http.StatusBadRequest, "token already exists")
		return
	}
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	// lmstfy names a token of a pool "pool:token"; chronoq has one pool and
	// ignores the prefix when the token comes back, so it can hand it out.
	if pool != "" {
		raw = pool + ":" + raw
	}
	writeIndented(w, http.StatusCreated, struct {
		Token string `json:"token"`
	}{raw})
}

// GET /token/:ns → {"tokens": {"sha256:<hex>": description}}. lmstfy lists
// the tokens themselves; chronoq keeps only their hashes.
func (s *Server) listTokens(w http.ResponseWriter, r *http.Request, ns string) {
	hashes, err := s.b.TokenHashes(r.Context(), ns)
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	out := make(map[string]string, len(hashes))
	for h, d := range hashes {
		out[hashPrefix+h] = d
	}
	writeIndented(w, http.StatusOK, struct {
		Tokens map[string]string `json:"tokens"`
	}{out})
}

// DELETE /token/:ns/:token → 204, whether or not the token existed. The
// token may be given as listed ("sha256:<hex>"). Revocation is immediate:
// the broker updates its token table before it answers.
func (s *Server) deleteToken(w http.ResponseWriter, r *http.Request, ns, tok string) {
	var err error
	if h, ok := strings.CutPrefix(tok, hashPrefix); ok && isHexHash(h) {
		err = s.b.RevokeTokenHash(r.Context(), ns, h)
	} else {
		err = s.b.RevokeToken(r.Context(), ns, stripPool(tok))
	}
	if err != nil && !isGone(err) {
		s.writeEngineError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func isHexHash(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 32
}

// GET /info: every namespace with its queues, as lmstfy's meta dump.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	nss, err := s.b.ListNamespaces(ctx)
	if err != nil {
		s.writeEngineError(w, r, err)
		return
	}
	out := make(map[string][]string, len(nss))
	for _, ns := range nss {
		qs, err := s.b.ListQueues(ctx, ns.Name)
		if isGone(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			s.writeEngineError(w, r, err)
			return
		}
		names := make([]string, 0, len(qs))
		for _, q := range qs {
			names = append(names, q.Name)
		}
		slices.Sort(names)
		out[ns.Name] = names
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "    ")
	_ = enc.Encode(out)
}

// GET /version, from the binary's build information.
func (s *Server) version(w http.ResponseWriter) {
	v := struct {
		BuildCommit string `json:"build_commit"`
		BuildDate   string `json:"build_date"`
		Version     string `json:"version"`
	}{Version: "unknown"}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v.Version = bi.Main.Version
		}
		for _, st := range bi.Settings {
			switch st.Key {
			case "vcs.revision":
				v.BuildCommit = st.Value
			case "vcs.time":
				v.BuildDate = st.Value
			}
		}
	}
	writeIndented(w, http.StatusOK, v)
}
