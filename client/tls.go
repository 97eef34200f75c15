package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
)

// TLSFiles builds the TLS setup for a server with its own CA: caFile
// (PEM) is the CA that signed the server's certificate (empty: the
// system's roots); certFile and keyFile, both or neither, are the client
// certificate a server started with --tls-client-ca asks for.
func TLSFiles(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("client: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client: CA file %s holds no PEM certificate", caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("client: a client certificate needs both the certificate and the key file (got %q and %q)", certFile, keyFile)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// WithTLS makes https:// calls use cfg (from TLSFiles, or your own): the
// CA to trust and the client certificate. It replaces the HTTP client's
// transport with one of the same settings as the default; nil changes
// nothing. An https:// URL with a publicly trusted certificate needs no
// option at all.
func WithTLS(cfg *tls.Config) Option {
	return func(c *Client) {
		if cfg == nil {
			return
		}
		t := sharedTransport.(*http.Transport).Clone()
		t.TLSClientConfig = cfg.Clone()
		c.hc = &http.Client{Transport: t}
	}
}

// WithCAFile trusts the CA in the PEM file caFile (a server with a
// certificate of its own CA). A file that cannot be read or holds no
// certificate makes every call of the client return that error.
func WithCAFile(caFile string) Option {
	return func(c *Client) {
		if caFile == "" {
			return
		}
		cfg, err := TLSFiles(caFile, "", "")
		if err != nil {
			c.optErr = err
			return
		}
		WithTLS(cfg)(c)
	}
}
