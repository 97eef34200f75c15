package beanstalk

import "testing"

func TestHTTPLine(t *testing.T) {
	for line, want := range map[string]bool{
		"GET / HTTP/1.1":             true,
		"POST /api HTTP/1.1":         true,
		"PUT /x HTTP/1.1":            true,
		"OPTIONS * HTTP/1.1":         true,
		"DELETE /a":                  true,
		"Host: localhost:11300":      true,
		"host:x":                     true,
		"BREW /coffee HTTP/1.1":      true,
		"PROPFIND / HTTP/1.0":        true,
		"GET  HTTP/1.1":              true,  // empty target: three fields still
		"BREW  / HTTP/1.1":           false, // four fields
		"BREW / HTTP/1.1 x":          false,
		"Brew / HTTP/1.1":            false,
		"BREW /":                     false,
		"put 0 0 10 5":               false,
		"use GET":                    false,
		"watch host":                 false,
		"stats-tube Host":            false,
		"reserve-with-timeout 1":     false,
		"GET":                        false, // UNKNOWN_COMMAND, as in beanstalkd
		"list-tubes":                 false,
		"use HTTP/1.1":               false,
		"pause-tube a HTTP/1.1":      false,
		"kick 1":                     false,
		"peek-ready":                 false,
		"":                           false,
		"hos":                        false,
		"Host":                       false,
		"stats-job 1 HTTP/1.1x":      false,
		"delete 1":                   false,
		"bury 1 0":                   false,
		"touch 1":                    false,
		"quit":                       false,
		"release 1 0 0":              false,
		"ignore default":             false,
		"reserve":                    false,
		"peek 1":                     false,
		"kick-job 1":                 false,
		"list-tube-used":             false,
		"list-tubes-watched":         false,
		"stats":                      false,
		"reserve-job 1":              false,
		"peek-delayed":               false,
		"peek-buried":                false,
		"use tube-with-HTTP/1.1-ish": false,
	} {
		if got := httpLine([]byte(line)); got != want {
			t.Errorf("httpLine(%q) = %v, want %v", line, got, want)
		}
	}
	// every command line goes through it
	if n := testing.AllocsPerRun(100, func() { httpLine([]byte("put 0 0 10 100")) }); n != 0 {
		t.Errorf("httpLine allocates %.0f times a command", n)
	}
}
