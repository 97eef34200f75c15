package httpapi

import (
	"net/http"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/wire"
)

func (s *Server) createNamespace(w http.ResponseWriter, r *http.Request, t target) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	name, cfg, err := decodeNamespace(body)
	if err != nil {
		return err
	}
	info, created, err := s.b.CreateNamespace(r.Context(), name, cfg)
	if err != nil {
		return err
	}
	// Creating an existing namespace is not an error (scripts re-run their
	// setup); 200 instead of 201 tells the caller nothing was created.
	writeUpserted(w, created, wireenc.Namespace(info))
	return nil
}

// putNamespace creates or reconfigures a namespace; fields left out keep
// their values (as PUT queue does).
func (s *Server) putNamespace(w http.ResponseWriter, r *http.Request, t target) error {
	ns := t.ns
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	info, created, err := s.b.ConfigureNamespace(r.Context(), ns, func(cur engine.NamespaceConfig) (engine.NamespaceConfig, error) {
		return decodeNamespacePatch(body, cur)
	})
	if err != nil {
		return err
	}
	writeUpserted(w, created, wireenc.Namespace(info))
	return nil
}

func (s *Server) listNamespaces(w http.ResponseWriter, r *http.Request, t target) error {
	nss, err := s.b.ListNamespaces(r.Context())
	if err != nil {
		return err
	}
	out := make([]wire.Namespace, len(nss))
	for i, n := range nss {
		out[i] = wireenc.Namespace(n)
	}
	writeJSON(w, http.StatusOK, map[string][]wire.Namespace{"namespaces": out})
	return nil
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request, t target) error {
	ns := t.ns
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	desc, err := decodeToken(body)
	if err != nil {
		return err
	}
	tok, err := s.b.CreateToken(r.Context(), ns, desc)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, map[string]string{"token": tok})
	return nil
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request, t target) error {
	ns := t.ns
	tok := r.PathValue("token")
	// Revoking is idempotent in the broker; answering 204 for a token that
	// never existed would hide a typo, so an unknown token is 404.
	if got, ok := s.b.TokenNamespace(tok); !ok || got != ns {
		return newAPIError(http.StatusNotFound, "not_found", "namespace %q has no such token", ns)
	}
	if err := s.b.RevokeToken(r.Context(), ns, tok); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
