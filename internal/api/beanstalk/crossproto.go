package beanstalk

import (
	"bytes"
	"net"
	"time"
)

// httpLine reports a command line that is part of an HTTP request: a
// request line or a Host header. No beanstalkd command looks like either
// (commands are lower case and take no colon), and a web page can make a
// browser send one to any port it names — a fetch POST whose body holds
// "put ...\r\n" would otherwise insert a job. Such a connection is closed
// without an answer, as Redis does for the same attack.
func httpLine(line []byte) bool {
	for _, m := range httpMethods {
		if bytes.HasPrefix(line, m) {
			return true
		}
	}
	if len(line) >= len("host:") && bytes.EqualFold(line[:len("host:")], []byte("host:")) {
		return true
	}
	return requestLine(line)
}

// requestLine reports "METHOD target HTTP/1.x" with a method of capital
// letters (beanstalkd's commands are lower case; a tube may be named
// "HTTP/1.1", so the version alone is not enough).
func requestLine(line []byte) bool {
	// Cut, not Split: this runs on every command line, and a split
	// allocated for each (one allocation a put).
	if len(line) == 0 || line[0] < 'A' || line[0] > 'Z' {
		return false
	}
	method, rest, ok := bytes.Cut(line, []byte(" "))
	if !ok {
		return false
	}
	_, version, ok := bytes.Cut(rest, []byte(" "))
	if !ok || bytes.IndexByte(version, ' ') >= 0 || !bytes.HasPrefix(version, []byte("HTTP/1.")) {
		return false
	}
	for _, b := range method {
		if b < 'A' || b > 'Z' {
			return false
		}
	}
	return true
}

var httpMethods = [][]byte{
	[]byte("GET "), []byte("POST "), []byte("PUT "), []byte("DELETE "), []byte("HEAD "),
	[]byte("OPTIONS "), []byte("PATCH "), []byte("CONNECT "), []byte("TRACE "),
}

// crossProtocolLogEvery spaces out the warnings for HTTP sent to the
// port: one page looping over fetch must not flood the log. The ones in
// between are logged at debug level.
const crossProtocolLogEvery = time.Minute

// noteCrossProtocol logs a connection closed for sending HTTP.
func (s *Server) noteCrossProtocol(remote net.Addr) {
	now := time.Now().UnixNano()
	last := s.lastHTTPWarn.Load()
	msg := "beanstalk: closed a connection that sent an HTTP request (possibly a web page attacking the port across protocols)"
	if now-last >= int64(crossProtocolLogEvery) && s.lastHTTPWarn.CompareAndSwap(last, now) {
		s.lg.Warn(msg, "remote", remote.String(), "next_warning_in", crossProtocolLogEvery.String())
		return
	}
	s.lg.Debug(msg, "remote", remote.String())
}
