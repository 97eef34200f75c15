package beanstalk_test

import (
	"net"
	"testing"
	"time"
)

func TestReserveOrder(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		a := c.put(5, 0, 10, "a")
		b := c.put(1, 0, 10, "b")
		d := c.put(5, 0, 10, "d")
		// Most urgent first, then oldest.
		for _, want := range []uint64{b, a, d} {
			c.send("reserve\r\n")
			l := c.line()
			if l != "RESERVED "+itoa(want)+" 1\r\n" {
				t.Fatalf("%s: got %q, want job %d", s.name, l, want)
			}
			c.line()
		}
		// A released job goes back to its place: (priority, id).
		c.send("release " + itoa(a) + " 5 0\r\nrelease " + itoa(d) + " 5 0\r\nreserve\r\n")
		c.expect("RELEASED\r\nRELEASED\r\nRESERVED " + itoa(a) + " 1\r\na\r\n")
		// And with a new priority.
		c.send("release " + itoa(a) + " 9 0\r\nreserve\r\n")
		c.expect("RELEASED\r\nRESERVED " + itoa(d) + " 1\r\nd\r\n")
		if m := c.statsJob(a); m["pri"] != "9" || m["releases"] != "2" || m["reserves"] != "2" || m["state"] != "ready" {
			t.Errorf("%s: released job: %v", s.name, m)
		}
	})
}

// The most urgent job of all watched tubes goes first, whatever the tube.
func TestMultiTube(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("use abc\r\n")
		c.expect("USING abc\r\n")
		c.send("put 999999 0 0 0\r\n\r\n")
		c.expect("INSERTED 1\r\n")
		c.send("use def\r\n")
		c.expect("USING def\r\n")
		c.send("put 99 0 0 0\r\n\r\n")
		c.expect("INSERTED 2\r\n")
		c.send("watch abc\r\n")
		c.expect("WATCHING 2\r\n")
		c.send("watch def\r\n")
		c.expect("WATCHING 3\r\n")
		c.send("reserve\r\n")
		c.expect("RESERVED 2 0\r\n\r\n")
		// Tubes not watched are not served.
		c.send("delete 2\r\nignore def\r\nignore abc\r\nreserve-with-timeout 0\r\n")
		c.expect("DELETED\r\nWATCHING 2\r\nWATCHING 1\r\nTIMED_OUT\r\n")
	})
}

func TestReserveWithTimeout(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		start := time.Now()
		c.send("reserve-with-timeout 1\r\n")
		c.expect("TIMED_OUT\r\n")
		if d := time.Since(start); d < 900*time.Millisecond {
			t.Errorf("%s: timed out after %v, want about 1s", s.name, d)
		}
		c.send("reserve-with-timeout 0\r\n")
		c.expect("TIMED_OUT\r\n")
		// A negative timeout waits like reserve.
		c.send("reserve-with-timeout -1\r\n")
		c.nothing(300 * time.Millisecond)
		id := s.dial().put(0, 0, 10, "x")
		c.expect("RESERVED " + itoa(id) + " 1\r\nx\r\n")
		for _, bad := range []string{"99999999999999999999", "-99999999999999999999"} {
			c.send("reserve-with-timeout " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
	})
}

// Two connections wait on one tube; a put wakes only one.
func TestReserveTwoWaiters(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		a, b := s.dial(), s.dial()
		a.send("watch foo\r\n")
		a.expect("WATCHING 2\r\n")
		b.send("watch foo\r\n")
		b.expect("WATCHING 2\r\n")
		a.send("reserve-with-timeout 1\r\n")
		b.send("reserve-with-timeout 1\r\n")
		time.Sleep(100 * time.Millisecond)
		p := s.dial()
		p.send("use foo\r\n")
		p.expect("USING foo\r\n")
		p.put(0, 0, 10, "j")
		got := []string{a.line(), b.line()}
		reserved, timedOut := 0, 0
		for _, l := range got {
			switch l {
			case "RESERVED 1 1\r\n":
				reserved++
			case "TIMED_OUT\r\n":
				timedOut++
			}
		}
		if reserved != 1 || timedOut != 1 {
			t.Errorf("%s: answers %q, want one RESERVED and one TIMED_OUT", s.name, got)
		}
	})
}

// A reserve with a reservation about to run out (within beanstalkd's one
// second margin) answers DEADLINE_SOON instead of waiting.
func TestDeadlineSoon(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 0 0 1 1\r\na\r\n")
		c.expect("INSERTED 1\r\n")
		c.send("reserve-with-timeout 1\r\n")
		c.expect("RESERVED 1 1\r\na\r\n")
		time.Sleep(200 * time.Millisecond)
		if st := c.statsJob(1)["state"]; st != "reserved" {
			t.Errorf("%s: state %q", s.name, st)
		}
		c.send("reserve-with-timeout 1\r\n")
		c.expect("DEADLINE_SOON\r\n")
		if st := c.statsJob(1)["state"]; st != "reserved" {
			t.Errorf("%s: state after DEADLINE_SOON %q", s.name, st)
		}
		c.send("release 1 0 0\r\n")
		c.expect("RELEASED\r\n")
		if st := c.statsJob(1)["state"]; st != "ready" {
			t.Errorf("%s: state after release %q", s.name, st)
		}
	})
}

// A waiting reserve is interrupted when a reservation enters the margin.
func TestDeadlineSoonWhileWaiting(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		if s.name == "beanstalkd" {
			// beanstalkd 1.12 (Debian's) sometimes keeps an expired
			// reservation of an idle connection until its coarse timer
			// fires, so the second half of this test is timing luck there.
			t.Skip("timing-dependent against the original beanstalkd 1.12; checked against chronoq")
		}
		c := s.dial()
		id := c.put(0, 0, 2, "a")
		c.send("reserve\r\n")
		c.expect("RESERVED " + itoa(id) + " 1\r\na\r\n")
		start := time.Now()
		c.send("reserve\r\n")
		c.expect("DEADLINE_SOON\r\n")
		if d := time.Since(start); d < 700*time.Millisecond || d > 1800*time.Millisecond {
			t.Errorf("%s: DEADLINE_SOON after %v, want about 1s (TTR 2s - 1s margin)", s.name, d)
		}
		// Still within the margin: at once again.
		c.send("reserve-with-timeout 3\r\n")
		c.expect("DEADLINE_SOON\r\n")
		// The job runs out and goes back; the next reserve gets it again.
		time.Sleep(time.Until(start.Add(2100 * time.Millisecond)))
		c.send("reserve-with-timeout 3\r\n")
		c.expect("RESERVED " + itoa(id) + " 1\r\na\r\n")
		if m := c.statsJob(id); m["timeouts"] != "1" || m["reserves"] != "2" {
			t.Errorf("%s: timeouts %q reserves %q", s.name, m["timeouts"], m["reserves"])
		}
		if m := c.stats(); m["job-timeouts"] != "1" {
			t.Errorf("%s: job-timeouts %q", s.name, m["job-timeouts"])
		}
	})
}

func TestReserveJob(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.put(0, 0, 1, "A")
		c.put(0, 0, 1, "B")
		c.send("reserve-job 2\r\n")
		c.expect("RESERVED 2 1\r\nB\r\n")
		c.send("reserve-job 2\r\n")
		c.expect("NOT_FOUND\r\n")
		c.send("reserve-job 3\r\n")
		c.expect("NOT_FOUND\r\n")
		c.send("release 1 1 0\r\n")
		c.expect("NOT_FOUND\r\n")
		c.send("release 2 1 0\r\n")
		c.expect("RELEASED\r\n")
		for _, bad := range []string{"x", "1x", "", "18446744073709551616"} {
			c.send("reserve-job " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		// Delayed and buried jobs can be reserved by id; release makes
		// them ready.
		d := c.put(0, 100, 1, "C")
		c.send("reserve-job " + itoa(d) + "\r\n")
		c.expect("RESERVED " + itoa(d) + " 1\r\nC\r\n")
		c.send("bury " + itoa(d) + " 1\r\nreserve-job " + itoa(d) + "\r\n")
		c.expect("BURIED\r\nRESERVED " + itoa(d) + " 1\r\nC\r\n")
		c.send("release " + itoa(d) + " 1 0\r\n")
		c.expect("RELEASED\r\n")
		if st := c.statsJob(d)["state"]; st != "ready" {
			t.Errorf("%s: state %q", s.name, st)
		}
		// A reservation by id gets DEADLINE_SOON like any other (when no
		// watched tube has a ready job to hand out instead).
		o := s.dial()
		o.send("use dl\r\nwatch dl\r\nignore default\r\n")
		o.expect("USING dl\r\nWATCHING 2\r\nWATCHING 1\r\n")
		e := o.put(0, 5, 1, "E")
		o.send("reserve-job " + itoa(e) + "\r\nreserve-with-timeout 1\r\n")
		o.expect("RESERVED " + itoa(e) + " 1\r\nE\r\nDEADLINE_SOON\r\n")
	})
}

// Closing a connection (or quit) gives its reservations back at once.
func TestCloseReleasesJob(t *testing.T) {
	for _, how := range []string{"close", "quit"} {
		t.Run(how, func(t *testing.T) {
			each(t, func(t *testing.T, s *target) {
				cons, prod := s.dial(), s.dial()
				cons.send("reserve-with-timeout 1\r\n")
				prod.send("put 0 0 100 1\r\na\r\n")
				prod.expect("INSERTED 1\r\n")
				cons.expect("RESERVED 1 1\r\na\r\n")
				if st := prod.statsJob(1)["state"]; st != "reserved" {
					t.Errorf("%s: state %q", s.name, st)
				}
				if how == "quit" {
					cons.send("quit\r\n")
				} else {
					cons.close()
				}
				prod.send("reserve-with-timeout 1\r\n")
				prod.expect("RESERVED 1 1\r\na\r\n")
				// Not counted as a release, nor as a timeout.
				if m := prod.statsJob(1); m["releases"] != "0" || m["timeouts"] != "0" || m["reserves"] != "2" {
					t.Errorf("%s: counters after close: %v", s.name, m)
				}
			})
		})
	}
}

// A client that half-closes while its reserve waits gets TIMED_OUT.
func TestHalfCloseWhileWaiting(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("reserve\r\n")
		time.Sleep(100 * time.Millisecond)
		c.c.(*net.TCPConn).CloseWrite()
		c.expect("TIMED_OUT\r\n")
		c.closed()
		if m := s.dial().stats(); m["current-waiting"] != "0" {
			t.Errorf("%s: current-waiting %q after the waiter left", s.name, m["current-waiting"])
		}
	})
}

func TestTouch(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, bad := range []string{"a111", "111a", "!@#!@#"} {
			c.send("touch " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		c.send("touch 1\r\ntouch 100000000000000\r\n")
		c.expect("NOT_FOUND\r\nNOT_FOUND\r\n")
		id := c.put(0, 0, 2, "t")
		c.send("touch " + itoa(id) + "\r\n")
		c.expect("NOT_FOUND\r\n") // not reserved
		c.send("reserve\r\n")
		c.expect("RESERVED " + itoa(id) + " 1\r\nt\r\n")
		time.Sleep(1100 * time.Millisecond)
		// Another connection cannot touch it.
		o := s.dial()
		o.send("touch " + itoa(id) + "\r\n")
		o.expect("NOT_FOUND\r\n")
		c.send("touch " + itoa(id) + "\r\n")
		c.expect("TOUCHED\r\n")
		if m := c.statsJob(id); m["time-left"] != "1" && m["time-left"] != "2" {
			t.Errorf("%s: time-left after touch %q, want the full TTR again", s.name, m["time-left"])
		}
		time.Sleep(1100 * time.Millisecond)
		// Still ours thanks to the touch (TTR 2s from the touch).
		c.send("delete " + itoa(id) + "\r\n")
		c.expect("DELETED\r\n")
	})
}
