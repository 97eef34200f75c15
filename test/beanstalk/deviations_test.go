package beanstalk_test

import (
	"testing"
	"time"
)

// Where chronoq knowingly answers differently from beanstalkd, the test
// pins both answers, so a change on either side shows up here.

// beanstalkd serves ready jobs by (priority, id): a job that was delayed
// jumps ahead of younger jobs of its priority once its delay is over.
// chronoq serves by (priority, time it became ready, id), so it waits its
// turn behind jobs that were ready before it. (Released jobs are not
// affected: a release without delay puts the job back in its id place on
// both.)
func TestDeviationDelayedOrder(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		a := c.put(0, 1, 10, "a") // delayed 1s
		b := c.put(0, 0, 10, "b")
		time.Sleep(1100 * time.Millisecond)
		want := a
		if s.chronoq() {
			want = b
		}
		c.send("reserve\r\n")
		c.expect("RESERVED " + itoa(want) + " 1\r\n")
	})
}

// beanstalkd keeps buried jobs in the order they were buried; chronoq in
// id order. peek-buried and kick follow that order.
func TestDeviationBuriedOrder(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		a := c.put(0, 0, 10, "a")
		b := c.put(0, 0, 10, "b")
		c.send("reserve\r\nreserve\r\nbury " + itoa(b) + " 0\r\nbury " + itoa(a) + " 0\r\n")
		c.expect("RESERVED " + itoa(a) + " 1\r\na\r\nRESERVED " + itoa(b) + " 1\r\nb\r\nBURIED\r\nBURIED\r\n")
		want := b
		if s.chronoq() {
			want = a
		}
		c.send("peek-buried\r\n")
		c.expect("FOUND " + itoa(want) + " 1\r\n")
		c.line()
		c.send("kick 1\r\npeek-ready\r\n")
		c.expect("KICKED 1\r\nFOUND " + itoa(want) + " 1\r\n")
	})
}
