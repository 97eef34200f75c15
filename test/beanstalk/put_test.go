package beanstalk_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/api/beanstalk"
)

func itoa(v uint64) string { return strconv.FormatUint(v, 10) }

func TestPutAndPeek(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 0 0 1 1\r\na\r\n")
		c.expect("INSERTED 1\r\n")
		c.send("peek 1\r\n")
		c.expect("FOUND 1 1\r\na\r\n")
		c.send("peek 2\r\n")
		c.expect("NOT_FOUND\r\n")
		c.send("peek 18446744073709551615\r\n")
		c.expect("NOT_FOUND\r\n")
		for _, bad := range []string{"18446744073709551616", "184467440737095516160000000000000000000000000000", "foo111", "111foo", "", "1 ", "-1"} {
			c.send("peek " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		// Numbers may follow any number of spaces.
		c.send("peek    1\r\n")
		c.expect("FOUND 1 1\r\na\r\n")
		// Bodies are bytes: CR, LF and NUL pass untouched.
		body := "x\r\ny\x00z\n"
		c.send("put 0 0 1 " + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n")
		c.expect("INSERTED 2\r\n")
		c.send("peek 2\r\n")
		c.expect("FOUND 2 " + strconv.Itoa(len(body)) + "\r\n" + body + "\r\n")
		// An empty body.
		c.send("put 0 0 0 0\r\n\r\n")
		c.expect("INSERTED 3\r\n")
		c.send("peek 3\r\n")
		c.expect("FOUND 3 0\r\n\r\n")
	})
}

func TestPutArguments(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 4294967295 0 100 1\r\na\r\n")
		c.expect("INSERTED 1\r\n")
		c.send("put  7   0  100   1\r\nb\r\n")
		c.expect("INSERTED 2\r\n")
		// A malformed put line leaves the body unread: it comes next, as
		// a command.
		for _, l := range []string{
			"put 4294967296 0 100 1", "put -1 0 100 1", "put -1kkdj9djjkd9 0 100 1", "put 512 -1 100 1",
			"put 0 0 100", "put 0 0 4294967296 1", "put 0 0 0 4294967296", "put 0 0 0 1x", "put 0 0 0 1 x", "put 0 0 0 1 ",
		} {
			c.send(l + "\r\nuse body\r\n")
			c.expect("BAD_FORMAT\r\nUSING body\r\n")
		}
		c.send("stats-job 2\r\n")
		if m := parseYAML(c.data()); m["pri"] != "7" {
			t.Errorf("%s: pri of job 2: %q", s.name, m["pri"])
		}
	})
}

func TestExpectedCRLF(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		// Three bytes are read for a one-byte body; the last two must be
		// CRLF. What follows ("\r\n") is an empty command line.
		c.send("put 0 0 0 1\r\nabc\r\n")
		c.expect("EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\n")
		// The answer does not wait for what follows the bad body.
		c.send("put 0 0 0 2\r\nab\n\r")
		c.expect("EXPECTED_CRLF\r\n")
		// A stray LF then starts the next line, and the next put's body
		// is a line of its own.
		c.send("put 0 0 0 2\r\nab\n\r\nput 0 0 0 1\r\nx\r\n")
		c.expect("EXPECTED_CRLF\r\nUNKNOWN_COMMAND\r\nUNKNOWN_COMMAND\r\n")
		// beanstalkd numbers a job before checking its CRLF, so its three
		// rejected puts used up ids 1 to 3; chronoq numbers only the
		// jobs it keeps (ids stay unique and increasing either way).
		want := "INSERTED 1\r\n"
		if !s.chronoq() {
			want = "INSERTED 4\r\n"
		}
		c.send("put 0 0 0 1\r\nx\r\n")
		c.expect(want)
	})
}

func TestJobTooBig(t *testing.T) {
	eachWith(t, serverOpts{maxJob: 10}, func(t *testing.T, s *target) {
		c := s.dial()
		// The 11-byte body (plus CRLF) is skipped, whatever it holds.
		c.send("put 0 0 0 11\r\n")
		c.send("delete 9999\r\n")
		c.send("put 0 0 0 1\r\n")
		c.send("x\r\n")
		c.expect("JOB_TOO_BIG\r\n")
		c.expect("INSERTED 1\r\n")
		// The size is checked before trailing garbage.
		c.send("put 0 0 0 12 junk\r\n" + strings.Repeat("y", 14) + "use z\r\n")
		c.expect("JOB_TOO_BIG\r\nUSING z\r\n")
		c.send("put 0 0 0 10\r\n0123456789\r\n")
		c.expect("INSERTED 2\r\n")
		c.send("stats\r\n")
		if m := parseYAML(c.data()); m["max-job-size"] != "10" || m["cmd-put"] != "4" {
			t.Errorf("%s: max-job-size %q cmd-put %q", s.name, m["max-job-size"], m["cmd-put"])
		}
	})
}

func TestDrainMode(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		id := c.put(0, 0, 10, "before")
		s.drain()
		c.send("put 0 0 1 1\r\nx\r\n")
		c.expect("DRAINING\r\n")
		c.send("reserve-with-timeout 0\r\n")
		c.expect("RESERVED " + itoa(id) + " 6\r\nbefore\r\n")
		c.send("stats\r\n")
		if m := parseYAML(c.data()); m["draining"] != "true" {
			t.Errorf("%s: draining: %q", s.name, m["draining"])
		}
	})
}

func TestTTR(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		// TTR 0 is raised to 1 second.
		id := c.put(0, 0, 0, "a")
		if got := c.statsJob(id)["ttr"]; got != "1" {
			t.Errorf("%s: ttr 0 became %q, want 1", s.name, got)
		}
		for _, ttr := range []int{120, 4294, 4295, 4296, 4297, 5000, 21600} {
			id := c.put(0, 0, ttr, "a")
			if got := c.statsJob(id)["ttr"]; got != strconv.Itoa(ttr) {
				t.Errorf("%s: ttr %d reported as %q", s.name, ttr, got)
			}
		}
	})
}

// Durable servers keep jobs across a restart, ids included.
func TestRestart(t *testing.T) {
	eachWith(t, serverOpts{durable: true}, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("use test\r\n")
		c.expect("USING test\r\n")
		a := c.put(0, 0, 120, "test")
		b := c.put(0, 0, 120, "tes1")
		c.send("watch test\r\nreserve\r\n")
		c.expect("WATCHING 2\r\nRESERVED " + itoa(a) + " 4\r\ntest\r\n")
		c.send("release " + itoa(a) + " 1 1\r\nreserve\r\n")
		c.expect("RELEASED\r\nRESERVED " + itoa(b) + " 4\r\ntes1\r\n")
		c.send("delete " + itoa(b) + "\r\n")
		c.expect("DELETED\r\n")
		c.close()
		s.restart()
		c = s.dial()
		c.send("watch test\r\nreserve\r\n")
		c.expect("WATCHING 2\r\nRESERVED " + itoa(a) + " 4\r\ntest\r\n")
		c.send("delete " + itoa(a) + "\r\ndelete " + itoa(b) + "\r\n")
		c.expect("DELETED\r\nNOT_FOUND\r\n")
		// Ids go on from where they were.
		if id := c.put(0, 0, 1, "x"); id <= b {
			t.Errorf("%s: id after restart %d, want > %d", s.name, id, b)
		}
	})
}

// A -z above 1 MiB (chronoq's default payload limit for a queue) lets
// every tube take jobs of that size, as in beanstalkd.
func TestLargeMaxJobSize(t *testing.T) {
	eachWith(t, serverOpts{maxJob: 3_000_000}, func(t *testing.T, s *target) {
		c := s.dial()
		big := strings.Repeat("j", 2_000_000)
		id := c.put(0, 0, 10, big)
		c.send("use other\r\n")
		c.expect("USING other\r\n")
		c.put(0, 0, 10, big)
		c.send("peek " + itoa(id) + "\r\n")
		c.expect("FOUND " + itoa(id) + " 2000000\r\n" + big + "\r\n")
		c.send("put 0 0 10 3000001\r\n" + big + big[:1000001] + "\r\n")
		c.expect("JOB_TOO_BIG\r\n")
	})
}

// beanstalkd cuts a -z above its 1 GiB maximum with a warning; chronoq
// cuts one above its own 64 MiB maximum, and reports the real limit.
func TestMaxJobSizeCut(t *testing.T) {
	eachWith(t, serverOpts{maxJob: 1 << 30}, func(t *testing.T, s *target) {
		want := "1073741824"
		if s.chronoq() {
			want = strconv.Itoa(beanstalk.MaxJobSizeLimit)
		}
		if got := s.dial().stats()["max-job-size"]; got != want {
			t.Errorf("%s: max-job-size %s with -z %d, want %s", s.name, got, 1<<30, want)
		}
	})
}
