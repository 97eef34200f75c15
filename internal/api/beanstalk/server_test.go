package beanstalk

import (
	"bytes"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// A -z above what chronoq stores is cut to it, with beanstalkd's warning,
// so stats reports the limit puts really have.
func TestMaxJobSizeCut(t *testing.T) {
	var log bytes.Buffer
	s := New(nil, Options{MaxJobSize: 1 << 30, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if s.opts.MaxJobSize != MaxJobSizeLimit {
		t.Errorf("MaxJobSize %d, want %d", s.opts.MaxJobSize, MaxJobSizeLimit)
	}
	if !strings.Contains(log.String(), "maximum job size was set to 67108864") {
		t.Errorf("no warning logged: %q", log.String())
	}
	log.Reset()
	if s := New(nil, Options{MaxJobSize: MaxJobSizeLimit, Logger: slog.New(slog.NewTextHandler(&log, nil))}); s.opts.MaxJobSize != MaxJobSizeLimit || log.Len() != 0 {
		t.Errorf("at the limit: MaxJobSize %d, log %q", s.opts.MaxJobSize, log.String())
	}
}

func TestExposed(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want bool
	}{
		{&net.TCPAddr{IP: net.IPv4zero, Port: 11300}, true},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 11300}, true},
		{&net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 11300}, true},
		{&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 11300}, false},
		{&net.TCPAddr{IP: net.ParseIP("::1"), Port: 11300}, false},
		{&net.UnixAddr{Name: "/run/beanstalkd.sock", Net: "unix"}, false},
	} {
		if got := exposed(c.addr); got != c.want {
			t.Errorf("exposed(%v) = %v, want %v", c.addr, got, c.want)
		}
	}
}
