package ws

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/chronoq/chronoq/internal/pubsub"
)

// JWTOptions enable JSON Web Tokens. Tokens signed with HS256 are checked
// against HMACSecret, RS256 and ES256 against PublicKeys; an algorithm
// without a key is refused, which is what stops the "alg: none" and
// HMAC-with-the-public-key tricks.
type JWTOptions struct {
	HMACSecret []byte
	// PublicKeys are *rsa.PublicKey (RS256) or *ecdsa.PublicKey on P-256
	// (ES256). ParsePublicKeysPEM reads them from PEM.
	PublicKeys []crypto.PublicKey
	// Issuer and Audience, when set, must match iss and aud.
	Issuer   string
	Audience string
}

func (o JWTOptions) enabled() bool { return len(o.HMACSecret) > 0 || len(o.PublicKeys) > 0 }

// ParsePublicKeysPEM reads every public key (PKIX "PUBLIC KEY" or
// certificate) from PEM data, for JWTOptions.PublicKeys.
func ParsePublicKeysPEM(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		switch blk.Type {
		case "PUBLIC KEY":
			k, err := x509.ParsePKIXPublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("jwt key: %w", err)
			}
			keys = append(keys, k)
		case "RSA PUBLIC KEY":
			k, err := x509.ParsePKCS1PublicKey(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("jwt key: %w", err)
			}
			keys = append(keys, k)
		case "CERTIFICATE":
			cert, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				return nil, fmt.Errorf("jwt key: %w", err)
			}
			keys = append(keys, cert.PublicKey)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("jwt key: no PUBLIC KEY or CERTIFICATE block in the PEM data")
	}
	return keys, nil
}

type jwtVerifier struct {
	opts    JWTOptions
	parser  *jwt.Parser
	rsaKeys jwt.VerificationKeySet
	ecKeys  jwt.VerificationKeySet
}

func newJWTVerifier(o JWTOptions, clock func() time.Time) (*jwtVerifier, error) {
	if !o.enabled() {
		return nil, nil
	}
	v := &jwtVerifier{opts: o}
	var methods []string
	if len(o.HMACSecret) > 0 {
		methods = append(methods, "HS256")
	}
	for _, k := range o.PublicKeys {
		switch k := k.(type) {
		case *rsa.PublicKey:
			v.rsaKeys.Keys = append(v.rsaKeys.Keys, k)
		case *ecdsa.PublicKey:
			if k.Curve != elliptic.P256() {
				return nil, errors.New("jwt: ES256 needs a P-256 key")
			}
			v.ecKeys.Keys = append(v.ecKeys.Keys, k)
		default:
			return nil, fmt.Errorf("jwt: unsupported public key type %T (want RSA or ECDSA P-256)", k)
		}
	}
	if len(v.rsaKeys.Keys) > 0 {
		methods = append(methods, "RS256")
	}
	if len(v.ecKeys.Keys) > 0 {
		methods = append(methods, "ES256")
	}
	popts := []jwt.ParserOption{jwt.WithValidMethods(methods), jwt.WithExpirationRequired(), jwt.WithTimeFunc(clock)}
	if o.Issuer != "" {
		popts = append(popts, jwt.WithIssuer(o.Issuer))
	}
	if o.Audience != "" {
		popts = append(popts, jwt.WithAudience(o.Audience))
	}
	v.parser = jwt.NewParser(popts...)
	return v, nil
}

// claims are chronoq's JWT claims: sub (user), exp, ns, channels
// (patterns the user may subscribe to) and publish (true: may publish
// where it may subscribe; or a list of patterns).
type claims struct {
	jwt.RegisteredClaims
	NS       string          `json:"ns"`
	Channels []string        `json:"channels"`
	Publish  json.RawMessage `json:"publish"`
}

func (v *jwtVerifier) verify(tok string) (*identity, error) {
	var cl claims
	_, err := v.parser.ParseWithClaims(tok, &cl, func(t *jwt.Token) (any, error) {
		switch t.Method.Alg() {
		case "HS256":
			return v.opts.HMACSecret, nil
		case "RS256":
			return v.rsaKeys, nil
		case "ES256":
			return v.ecKeys, nil
		}
		return nil, fmt.Errorf("algorithm %s not accepted", t.Method.Alg())
	})
	if err != nil {
		if errors.Is(err, jwt.ErrTokenExpired) {
			return nil, errf("token_expired", "the token has expired: get a new one")
		}
		return nil, errf("unauthorized", "invalid token: %v", err)
	}
	if cl.Subject == "" {
		return nil, errf("unauthorized", "invalid token: sub (the user id) is missing")
	}
	if !pubsub.ValidNamespace(cl.NS) {
		return nil, errf("unauthorized", "invalid token: ns must name a namespace, got %q", cl.NS)
	}
	id := &identity{kind: authJWT, ns: cl.NS, user: cl.Subject, jti: cl.ID, channels: cl.Channels, exp: cl.ExpiresAt.Time}
	if p := trimSpace(cl.Publish); len(p) > 0 && string(p) != "null" {
		var all bool
		if err := json.Unmarshal(p, &all); err == nil {
			id.publishAll = all
		} else if err := json.Unmarshal(p, &id.publish); err != nil {
			return nil, errf("unauthorized", "invalid token: publish must be true, false or a list of channel patterns")
		}
	}
	for _, pat := range slices.Concat(id.channels, id.publish) {
		if _, err := path.Match(pat, ""); err != nil {
			return nil, errf("unauthorized", "invalid token: bad channel pattern %q", pat)
		}
	}
	return id, nil
}

type authKind uint8

const (
	authAnonymous authKind = iota // loopback development mode: no tokens exist
	authAdmin
	authNamespace
	authJWT
)

// identity is who a connection is and what it may do.
type identity struct {
	kind       authKind
	ns         string // the namespace it is limited to ("" for admin and anonymous)
	user       string // JWT sub
	jti        string
	tok        string    // namespace tokens: the token, to check it is still valid
	tokHash    string    // and its SHA-256 hex, the id the admin API lists it by
	exp        time.Time // JWT only
	channels   []string
	publishAll bool
	publish    []string
}

// authenticate turns a connect token into an identity. Tokens with two dots
// are JWTs when JWT is configured; anything else is the admin token or a
// namespace token.
func (s *Server) authenticate(tok string) (*identity, error) {
	if tok == "" {
		if s.authRequired() {
			return nil, errf("unauthorized", "token: missing (a namespace token or a JWT)")
		}
		return &identity{kind: authAnonymous}, nil
	}
	if s.jwt != nil && strings.Count(tok, ".") == 2 {
		return s.jwt.verify(tok)
	}
	if s.isAdminToken(tok) {
		return &identity{kind: authAdmin}, nil
	}
	if ns, ok := s.b.TokenNamespace(tok); ok {
		return &identity{kind: authNamespace, ns: ns, tok: tok, tokHash: tokenHash(tok)}, nil
	}
	return nil, errf("unauthorized", "unknown token")
}

// authRequired mirrors the HTTP API: with nothing configured on a loopback
// server nothing is asked; the moment any credential exists, every
// connection must present one.
func (s *Server) authRequired() bool {
	return s.opts.RequireAuth || s.opts.AdminToken != "" || s.jwt != nil || s.b.HasTokens()
}

// defaultNS is the namespace of names given without one.
func (id *identity) defaultNS() string {
	if id.ns != "" {
		return id.ns
	}
	return "default"
}

func (id *identity) namespaceOK(ns string) bool {
	return id.ns == "" || id.ns == ns
}

func matchAny(patterns []string, ch string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, ch); ok {
			return true
		}
	}
	return false
}

// userOK enforces "ns/user#42 is only for user 42". Services (namespace
// and admin tokens) publish to users' channels, so only JWT connections
// are held to it.
func (id *identity) userOK(ch string) bool {
	users, limited := pubsub.ChannelUsers(ch)
	if !limited || id.kind != authJWT {
		return true
	}
	return slices.Contains(users, id.user)
}

func (id *identity) canSubscribe(ns, ch string) error {
	if !id.namespaceOK(ns) {
		return errf("forbidden", "this connection's token is for namespace %q, not %q", id.ns, ns)
	}
	if id.kind == authJWT && !matchAny(id.channels, ch) {
		return errf("forbidden", "the token does not allow channel %q", ch)
	}
	if !id.userOK(ch) {
		return errf("forbidden", "channel %q is limited to other users", ch)
	}
	return nil
}

func (id *identity) canPublish(ns, ch string) error {
	if id.kind != authJWT {
		return id.canSubscribe(ns, ch)
	}
	if !id.namespaceOK(ns) {
		return errf("forbidden", "this connection's token is for namespace %q, not %q", id.ns, ns)
	}
	ok := id.publishAll && matchAny(id.channels, ch) || matchAny(id.publish, ch)
	if !ok || !id.userOK(ch) {
		return errf("forbidden", "the token does not allow publishing to %q", ch)
	}
	return nil
}

// canQueues: JWTs describe channel rights only, so queue work (consume,
// put, ack) needs a namespace or admin token.
func (id *identity) canQueues(ns string) error {
	if id.kind == authJWT {
		return errf("forbidden", "queue commands need a namespace token, not a JWT")
	}
	if !id.namespaceOK(ns) {
		return errf("forbidden", "this connection's token is for namespace %q, not %q", id.ns, ns)
	}
	return nil
}

// splitChannel reads "ns/ch", or "ch" in the connection's namespace.
func splitChannel(id *identity, full string) (ns, ch string, err error) {
	ns, ch, ok := strings.Cut(full, "/")
	if !ok {
		ns, ch = id.defaultNS(), full
	}
	if !pubsub.ValidNamespace(ns) {
		return "", "", badRequest("channel: invalid namespace in %q", full)
	}
	if !pubsub.ValidChannel(ch) {
		return "", "", badRequest("channel: invalid channel name %q (want ns/name, name [A-Za-z0-9_.-]{1,200}, optionally #user[,user...])", full)
	}
	return ns, ch, nil
}

// tokenHash is how a namespace token is named without showing it: SHA-256
// in hex, as the broker stores it and the admin API lists it.
func tokenHash(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}
