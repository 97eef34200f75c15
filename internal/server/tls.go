package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
)

// TLSFiles names the PEM files of one listener's TLS setup. Cert and Key
// go together; ClientCA, when set, makes the listener demand a client
// certificate signed by one of its CAs (mutual TLS).
type TLSFiles struct {
	Cert     string
	Key      string
	ClientCA string
}

func (f TLSFiles) inherit(def TLSFiles) TLSFiles {
	if f.Cert == "" && f.Key == "" {
		f.Cert, f.Key = def.Cert, def.Key
	}
	if f.ClientCA == "" {
		f.ClientCA = def.ClientCA
	}
	return f
}

// TLSConfig is the TLS setup of every listener: TLSFiles (--tls-cert,
// --tls-key, --tls-client-ca) apply to each listener unless its own
// fields override them. The HTTP listener (and with it WebSocket and SSE)
// and the admin listener use TLS as soon as they have a certificate; the
// beanstalkd listener only with Beanstalk set, since most beanstalkd
// clients speak plain TCP.
//
// Peer (--peer-tls-cert, --peer-tls-key, --peer-tls-ca) is the TLS of a
// cluster member's peer links, on as soon as it, or the shared files,
// give a certificate. Its ClientCA is the peer CA: both sides of every
// peer connection must present a certificate it signed (docs/cluster.md).
type TLSConfig struct {
	TLSFiles
	HTTP, Admin, BeanstalkFiles TLSFiles
	Beanstalk                   bool // --beanstalk-tls
	Peer                        TLSFiles
}

// peerLink names the peer links' certificate among the listeners'.
const peerLink = "peer"

// peerFiles gives the effective files of the peer links; ok is false
// when they run without TLS.
func (c TLSConfig) peerFiles() (TLSFiles, bool) {
	f := c.Peer.inherit(c.TLSFiles)
	return f, f.Cert != "" || f.Key != "" || c.Peer.ClientCA != ""
}

// validatePeer reports half-given peer TLS, and peer TLS flags without a
// cluster.
func (c TLSConfig) validatePeer(cluster bool) error {
	if !cluster {
		if c.Peer != (TLSFiles{}) {
			return errors.New("--peer-tls-cert, --peer-tls-key and --peer-tls-ca need --node-id and --peers")
		}
		return nil
	}
	f, on := c.peerFiles()
	if !on {
		return nil
	}
	switch {
	case f.Cert == "":
		return fmt.Errorf("peer TLS: --peer-tls-key %q without a certificate: give --peer-tls-cert (or --tls-cert)", f.Key)
	case f.Key == "":
		return fmt.Errorf("peer TLS: --peer-tls-cert %q without a key: give --peer-tls-key (or --tls-key)", f.Cert)
	case f.ClientCA == "":
		return fmt.Errorf("peer TLS: certificate %q without a CA to verify peers with: give --peer-tls-ca (or --tls-client-ca); "+
			"peer links use mutual TLS, so every member needs the CA that signed the others' certificates", f.Cert)
	}
	return nil
}

// files gives the effective files of a listener; ok is false when that
// listener serves plain TCP.
func (c TLSConfig) files(name string) (TLSFiles, bool) {
	var f TLSFiles
	switch name {
	case HTTP:
		f = c.HTTP.inherit(c.TLSFiles)
	case Admin:
		f = c.Admin.inherit(c.TLSFiles)
	case Beanstalk:
		if !c.Beanstalk {
			return TLSFiles{}, false
		}
		f = c.BeanstalkFiles.inherit(c.TLSFiles)
	}
	return f, f.Cert != "" || f.Key != "" || f.ClientCA != ""
}

// validate reports a half-given pair and a client CA without a certificate.
func (c TLSConfig) validate() error {
	for _, name := range []string{HTTP, Admin, Beanstalk} {
		f, on := c.files(name)
		if !on {
			continue
		}
		if f.Cert == "" || f.Key == "" {
			return fmt.Errorf("%s listener: TLS needs both --tls-cert and --tls-key (got cert %q, key %q)", name, f.Cert, f.Key)
		}
	}
	if c.Beanstalk {
		if _, on := c.files(Beanstalk); !on {
			return errors.New("--beanstalk-tls: no certificate: give --tls-cert and --tls-key (or --beanstalk-tls-cert and --beanstalk-tls-key)")
		}
	}
	return nil
}

// certSource serves one listener's certificate and client CAs and
// re-reads them on Reload, so a renewed certificate takes effect without a
// restart: connections already open keep the session they negotiated, new
// handshakes get the new files (tls.Config.GetConfigForClient).
type certSource struct {
	files TLSFiles
	cur   atomic.Pointer[tls.Config]
}

func newCertSource(f TLSFiles) (*certSource, error) {
	s := &certSource{files: f}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the files again. On error the previous certificate stays
// in use.
func (s *certSource) Reload() error {
	cfg, err := loadTLS(s.files)
	if err != nil {
		return err
	}
	s.cur.Store(cfg)
	return nil
}

// Config is what a listener hands to tls.NewListener.
func (s *certSource) Config() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return s.cur.Load(), nil
		},
	}
}

// Certificate is the certificate currently served (tests compare it).
func (s *certSource) Certificate() *tls.Certificate {
	return &s.cur.Load().Certificates[0]
}

// modernSuites are the TLS 1.2 suites offered: forward-secret key exchange
// and AEAD ciphers only. TLS 1.3 suites are not configurable and are all
// modern.
var modernSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

func loadTLS(f TLSFiles) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.Cert, f.Key)
	if err != nil {
		return nil, fmt.Errorf("TLS certificate %s / key %s: %w", f.Cert, f.Key, err)
	}
	cfg := &tls.Config{
		MinVersion:   tls.VersionTLS12,
		CipherSuites: modernSuites,
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"http/1.1"},
	}
	if f.ClientCA != "" {
		pem, err := os.ReadFile(f.ClientCA)
		if err != nil {
			return nil, fmt.Errorf("TLS client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS client CA %s: no PEM certificate in it", f.ClientCA)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ReloadTLS re-reads every listener's certificate, key and client CA (the
// serve command calls it on SIGHUP). Open connections are not touched. A
// listener whose files fail to load keeps its previous ones; the errors
// are joined.
func (s *Server) ReloadTLS() error {
	var errs []error
	for _, name := range []string{HTTP, Admin, Beanstalk, peerLink} {
		if src := s.certs[name]; src != nil {
			if err := src.Reload(); err != nil {
				errs = append(errs, fmt.Errorf("%s listener: %w", name, err))
				continue
			}
			s.lg.Info("TLS certificate reloaded", "listener", name, "cert", src.files.Cert, "ca", src.files.ClientCA)
		}
	}
	return errors.Join(errs...)
}

// TLSEnabled says whether a listener serves TLS ("peer": whether the
// cluster's peer links do).
func (s *Server) TLSEnabled(name string) bool { return s.certs[name] != nil }

// setupTLS loads the certificates of every TLS listener; listen wraps the
// listeners with them.
func (s *Server) setupTLS() error {
	if err := s.cfg.TLS.validate(); err != nil {
		return err
	}
	if err := s.cfg.TLS.validatePeer(s.cfg.Cluster != nil); err != nil {
		return err
	}
	s.certs = map[string]*certSource{}
	for _, name := range []string{HTTP, Admin, Beanstalk} {
		f, on := s.cfg.TLS.files(name)
		if !on {
			continue
		}
		src, err := newCertSource(f)
		if err != nil {
			return fmt.Errorf("%s listener: %w", name, err)
		}
		s.certs[name] = src
	}
	if f, on := s.cfg.TLS.peerFiles(); on && s.cfg.Cluster != nil {
		src, err := newCertSource(f)
		if err != nil {
			return fmt.Errorf("peer TLS: %w", err)
		}
		s.certs[peerLink] = src
	}
	return nil
}

// wrapTLS puts ln behind TLS when the listener has a certificate.
func (s *Server) wrapTLS(name string, ln net.Listener) net.Listener {
	if src := s.certs[name]; src != nil {
		return tls.NewListener(ln, src.Config())
	}
	return ln
}
