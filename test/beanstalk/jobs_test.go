package beanstalk_test

import (
	"testing"
	"time"
)

func TestDelete(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 0 0 0 0\r\n\r\ndelete 1\r\ndelete 1\r\n")
		c.expect("INSERTED 1\r\nDELETED\r\nNOT_FOUND\r\n")
		for _, bad := range []string{"18446744073709551616", "184467440737095516160000000000000000000000000000", "foo111", "111foo", "1 2"} {
			c.send("delete " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		// Delayed and buried jobs can be deleted by anyone.
		d := c.put(0, 100, 10, "d")
		c.send("delete " + itoa(d) + "\r\n")
		c.expect("DELETED\r\n")
		b := c.put(0, 0, 10, "b")
		c.send("reserve\r\nbury " + itoa(b) + " 0\r\n")
		c.expect("RESERVED " + itoa(b) + " 1\r\nb\r\nBURIED\r\n")
		o := s.dial()
		o.send("delete " + itoa(b) + "\r\n")
		o.expect("DELETED\r\n")
		if m := o.statsTube("default"); m["cmd-delete"] != "3" {
			t.Errorf("%s: cmd-delete %q", s.name, m["cmd-delete"])
		}
	})
}

func TestDeleteReservedByOther(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 0 0 1 1\r\na\r\n")
		c.expect("INSERTED 1\r\n")
		o := s.dial()
		o.send("reserve\r\n")
		o.expect("RESERVED 1 1\r\na\r\n")
		c.send("delete 1\r\n")
		c.expect("NOT_FOUND\r\n")
		// Nor can the other connection release, bury or touch it.
		c.send("release 1 0 0\r\nbury 1 0\r\ntouch 1\r\n")
		c.expect("NOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n")
		o.send("delete 1\r\n")
		o.expect("DELETED\r\n")
	})
}

// A reservation that ran out is no longer the connection's, but the job,
// now ready, can still be deleted like any ready job.
func TestDeleteAfterTimeout(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		id := c.put(0, 0, 1, "a")
		c.send("reserve\r\n")
		c.expect("RESERVED " + itoa(id) + " 1\r\na\r\n")
		time.Sleep(1100 * time.Millisecond)
		// beanstalkd notices a run-out reservation in its event loop after
		// the deadline (1.12 can miss it until the connection acts again);
		// chronoq at the deadline. Have the connection act, and wait.
		c.send("list-tube-used\r\n")
		c.expect("USING default\r\n")
		o := s.dial()
		for deadline := time.Now().Add(3 * time.Second); o.statsJob(id)["state"] != "ready"; {
			if time.Now().After(deadline) {
				t.Fatalf("%s: reservation with TTR 1s did not run out", s.name)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.send("release " + itoa(id) + " 0 0\r\n")
		c.expect("NOT_FOUND\r\n")
		c.send("delete " + itoa(id) + "\r\n")
		c.expect("DELETED\r\n")
	})
}

func TestBury(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, bad := range []string{"111abc 2", "111", "111 222abc", "111 4294967296", "1 2 3"} {
			c.send("bury " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		c.put(0, 0, 1, "A")
		// Only a reserved job can be buried.
		c.send("bury 1 0\r\npeek-buried\r\n")
		c.expect("NOT_FOUND\r\nNOT_FOUND\r\n")
		c.send("reserve-with-timeout 0\r\n")
		c.expect("RESERVED 1 1\r\nA\r\n")
		c.send("bury 1 77\r\npeek-buried\r\n")
		c.expect("BURIED\r\nFOUND 1 1\r\nA\r\n")
		if m := c.statsJob(1); m["state"] != "buried" || m["pri"] != "77" || m["buries"] != "1" {
			t.Errorf("%s: buried job: %v", s.name, m)
		}
		c.send("kick 1\r\npeek-buried\r\npeek-ready\r\nkick 1\r\n")
		c.expect("KICKED 1\r\nNOT_FOUND\r\nFOUND 1 1\r\nA\r\nKICKED 0\r\n")
		if m := c.statsJob(1); m["state"] != "ready" || m["kicks"] != "1" || m["reserves"] != "1" {
			t.Errorf("%s: kicked job: %v", s.name, m)
		}
	})
}

// kick moves buried jobs of the used tube if it has any, else delayed.
func TestKick(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("use k\r\nwatch k\r\nignore default\r\n")
		c.expect("USING k\r\nWATCHING 2\r\nWATCHING 1\r\n")
		d1 := c.put(0, 100, 10, "d1")
		d2 := c.put(0, 50, 10, "d2")
		b1 := c.put(0, 0, 10, "b1")
		b2 := c.put(0, 0, 10, "b2")
		for _, id := range []uint64{b1, b2} {
			c.send("reserve-job " + itoa(id) + "\r\nbury " + itoa(id) + " 0\r\n")
			c.expect("RESERVED " + itoa(id) + " 2\r\nb" + itoa(id-b1+1) + "\r\nBURIED\r\n")
		}
		// Another tube in use: nothing to kick there.
		o := s.dial()
		o.send("kick 10\r\n")
		o.expect("KICKED 0\r\n")
		// Buried first, even with delayed jobs around, oldest first.
		c.send("kick 1\r\npeek-ready\r\n")
		c.expect("KICKED 1\r\nFOUND " + itoa(b1) + " 2\r\nb1\r\n")
		c.send("kick 10\r\n")
		c.expect("KICKED 1\r\n")
		// Then delayed ones, soonest first.
		c.send("peek-delayed\r\nkick 1\r\npeek-delayed\r\n")
		c.expect("FOUND " + itoa(d2) + " 2\r\nd2\r\nKICKED 1\r\nFOUND " + itoa(d1) + " 2\r\nd1\r\n")
		// A bound of 2^32-1, or -1 (strtoul wraps it), kicks everything.
		c.send("kick -1\r\nkick 4294967295\r\n")
		c.expect("KICKED 1\r\nKICKED 0\r\n")
		for _, bad := range []string{"", "x", "99999999999999999999999"} {
			c.send("kick " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		if m := c.statsTube("k"); m["current-jobs-ready"] != "4" || m["current-jobs-buried"] != "0" || m["current-jobs-delayed"] != "0" {
			t.Errorf("%s: after kicks: %v", s.name, m)
		}
	})
}

func TestKickJob(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, bad := range []string{"a111", "111a", "!@#!@#"} {
			c.send("kick-job " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		c.put(0, 0, 1, "A")
		c.send("reserve\r\nbury 1 0\r\n")
		c.expect("RESERVED 1 1\r\nA\r\nBURIED\r\n")
		c.send("kick-job 100\r\nkick-job 1\r\nkick-job 1\r\n")
		c.expect("NOT_FOUND\r\nKICKED\r\nNOT_FOUND\r\n")
		c.put(0, 10, 1, "B")
		// Ready jobs cannot be kicked; delayed ones can, in any tube.
		o := s.dial()
		o.send("use elsewhere\r\nkick-job 1\r\nkick-job 2\r\nkick-job 2\r\n")
		o.expect("USING elsewhere\r\nNOT_FOUND\r\nKICKED\r\nNOT_FOUND\r\n")
	})
}

// peek-ready, peek-delayed and peek-buried look at the used tube.
func TestPeekStates(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("peek-delayed\r\npeek-ready\r\npeek-buried\r\n")
		c.expect("NOT_FOUND\r\nNOT_FOUND\r\nNOT_FOUND\r\n")
		c.put(0, 0, 1, "A")
		c.put(0, 99, 1, "B")
		c.put(0, 1, 1, "C")
		c.send("peek-delayed\r\n")
		c.expect("FOUND 3 1\r\nC\r\n")
		c.send("delete 3\r\npeek-delayed\r\n")
		c.expect("DELETED\r\nFOUND 2 1\r\nB\r\n")
		c.send("delete 2\r\npeek-delayed\r\n")
		c.expect("DELETED\r\nNOT_FOUND\r\n")
		c.put(3, 0, 1, "D")
		c.put(1, 0, 1, "E")
		c.send("peek-ready\r\ndelete 1\r\npeek-ready\r\n")
		c.expect("FOUND 1 1\r\nA\r\nDELETED\r\nFOUND 5 1\r\nE\r\n")
		// Watching does not matter, using does.
		c.send("use other\r\npeek-ready\r\nwatch other\r\nuse default\r\npeek-ready\r\n")
		c.expect("USING other\r\nNOT_FOUND\r\nWATCHING 2\r\nUSING default\r\nFOUND 5 1\r\nE\r\n")
	})
}

func TestDelayedToReady(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("put 0 1 1 0\r\n\r\n")
		c.expect("INSERTED 1\r\n")
		m := c.statsTube("default")
		if m["current-jobs-ready"] != "0" || m["current-jobs-delayed"] != "1" || m["total-jobs"] != "1" {
			t.Errorf("%s: before: %v", s.name, m)
		}
		if m := c.statsJob(1); m["delay"] != "1" || m["state"] != "delayed" {
			t.Errorf("%s: delayed job: %v", s.name, m)
		}
		time.Sleep(1010 * time.Millisecond)
		// beanstalkd moves delayed jobs on its own tick, which a loaded
		// machine may run late: allow it a while, never less than the delay.
		for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			m = c.statsTube("default")
			if m["current-jobs-ready"] == "1" || time.Now().After(deadline) {
				break
			}
		}
		if m["current-jobs-ready"] != "1" || m["current-jobs-delayed"] != "0" || m["total-jobs"] != "1" {
			t.Errorf("%s: after: %v", s.name, m)
		}
	})
}

func TestReleaseArguments(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, bad := range []string{
			"18446744073709551616 1 1", "184467440737095516160000000000000000000000000000 1 1",
			"foo111", "111foo", "18446744073709551615 abc 1", "18446744073709551615 1 abc", "1 1", "1 1 1 1",
		} {
			c.send("release " + bad + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		c.send("release 1 1 1\r\n")
		c.expect("NOT_FOUND\r\n")
		// A release with a delay makes the job delayed.
		id := c.put(0, 0, 10, "r")
		c.send("reserve\r\nrelease " + itoa(id) + " 3 100\r\n")
		c.expect("RESERVED " + itoa(id) + " 1\r\nr\r\nRELEASED\r\n")
		if m := c.statsJob(id); m["state"] != "delayed" || m["pri"] != "3" || m["releases"] != "1" || m["time-left"] != "99" && m["time-left"] != "100" {
			t.Errorf("%s: released with delay: %v", s.name, m)
		}
	})
}
