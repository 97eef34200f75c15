package main

import (
	"context"
	"flag"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/chronoq/chronoq/internal/server"
)

// tlsFlags registers the TLS flags of serve: the shared --tls-* files and
// each listener's overrides (internal/server/tls.go).
func tlsFlags(fs *flag.FlagSet, t *server.TLSConfig) {
	fs.StringVar(&t.Cert, "tls-cert", "", "PEM certificate (chain) for every listener; with --tls-key turns on TLS for HTTP and admin (reloaded on SIGHUP)")
	fs.StringVar(&t.Key, "tls-key", "", "PEM private key of --tls-cert")
	fs.StringVar(&t.ClientCA, "tls-client-ca", "", "PEM CA bundle: clients must present a certificate it signed (mutual TLS)")
	for _, l := range []struct {
		prefix, what string
		f            *server.TLSFiles
	}{{"http", "the HTTP listener (also WebSocket/SSE)", &t.HTTP}, {"admin", "the admin listener", &t.Admin}, {"beanstalk", "the beanstalkd listener", &t.BeanstalkFiles}} {
		fs.StringVar(&l.f.Cert, l.prefix+"-tls-cert", "", "certificate for "+l.what+" (overrides --tls-cert)")
		fs.StringVar(&l.f.Key, l.prefix+"-tls-key", "", "private key for "+l.what+" (overrides --tls-key)")
		fs.StringVar(&l.f.ClientCA, l.prefix+"-tls-client-ca", "", "client CA for "+l.what+" (overrides --tls-client-ca)")
	}
	fs.StringVar(&t.Peer.Cert, "peer-tls-cert", "", "certificate of this cluster member on its peer links, for both accepting and dialling (overrides --tls-cert; with a cluster, TLS on peer links needs --peer-tls-ca too)")
	fs.StringVar(&t.Peer.Key, "peer-tls-key", "", "private key for the peer links (overrides --tls-key)")
	fs.StringVar(&t.Peer.ClientCA, "peer-tls-ca", "", "PEM CA bundle that signed every member's peer certificate: both sides of a peer link must present one (overrides --tls-client-ca)")
	fs.BoolVar(&t.Beanstalk, "beanstalk-tls", false, "serve the beanstalkd protocol over TLS (off: plain TCP, what most beanstalkd clients speak)")
}

// reloadOnHUP re-reads the TLS files on every SIGHUP until ctx ends.
// Connections already open are not touched.
func reloadOnHUP(ctx context.Context, s *server.Server, lg *slog.Logger) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if err := s.ReloadTLS(); err != nil {
					lg.Error("SIGHUP: TLS reload failed, keeping the previous certificates", "err", err)
				}
			}
		}
	}()
}
