package beanstalk_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Command lines: length limits, dispatch by prefix, malformed input.

var name200 = strings.Repeat("0123456789", 20)

func TestUnknownCommand(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, l := range []string{
			"nont10knowncommand", "", "kick", "kick-job", "peek", "peekx 1", "use", "watch",
			"Put 0 0 0 1", "put\t0 0 0 1", "quiet", "touch", "pause",
		} {
			c.send(l + "\r\n")
			c.expect("UNKNOWN_COMMAND\r\n")
		}
		// An upper-case PUT is unknown to beanstalkd too; chronoq takes it
		// for HTTP and closes the connection (TestCrossProtocolHTTP).
		c.send("PUT 0 0 0 1\r\n")
		if s.chronoq() {
			c.closed()
		} else {
			c.expect("UNKNOWN_COMMAND\r\n")
		}
	})
}

// beanstalkd picks the command by the first prefix that matches and then
// checks the rest, so a known name with junk after it is BAD_FORMAT, and
// some are not checked at all.
func TestPrefixDispatch(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		for _, l := range []string{
			"statsx", "stats-jobx", "stats-job", "stats-tube", "reservex", "reserve-with-timeout",
			"reserve-job", "peek-readyx", "peek-delayed ", "peek-buried 1", "list-tubesx",
			"list-tubes-watchedx", "list-tube-usedx", "stats ", "reserve ",
		} {
			c.send(l + "\r\n")
			c.expect("BAD_FORMAT\r\n")
		}
		// kick's bound is read by strtoul: junk after it is ignored.
		c.send("kick 1x\r\n")
		c.expect("KICKED 0\r\n")
		// reserve-with-timeout's by strtol: no digits is 0.
		c.send("reserve-with-timeout x\r\n")
		c.expect("TIMED_OUT\r\n")
		// pause-tube's name needs no space before it.
		c.send("pause-tubedefault 0\r\n")
		c.expect("PAUSED\r\n")
		c.send("pause-tubex 1\r\n")
		c.expect("NOT_FOUND\r\n")
		c.send("quitx\r\n")
		c.closed()
	})
}

func TestLongestCommand(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		// use + 200-byte name; pause-tube with it is exactly 224 bytes.
		c.send("use " + name200 + "\r\n")
		c.expect("USING " + name200 + "\r\n")
		c.send("pause-tube " + name200 + " 4294967295\r\n")
		c.expect("PAUSED\r\n")
		c.send("use " + name200 + "Z\r\n")
		c.expect("BAD_FORMAT\r\n")
		// 224 bytes that are no command: unknown, not too long.
		c.send(strings.Repeat("a", 222) + "\r\n")
		c.expect("UNKNOWN_COMMAND\r\n")
	})
}

func TestTooLongLine(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		// 500 bytes then CRLF: BAD_FORMAT, and the connection is fine.
		c.send(strings.Repeat("a", 500) + "\r\n")
		c.expect("BAD_FORMAT\r\n")
		c.send("put 0 0 1 1\r\nA\r\n")
		c.expect("INSERTED 1\r\n")

		// 225 bytes: the CR is the 224th byte and its LF falls in the
		// next window, so beanstalkd only sees the line end after the
		// following line ("use b") and swallows that line too.
		c.send("use " + strings.Repeat("x", 219) + "\r\nuse b\r\nuse c\r\n")
		c.expect("BAD_FORMAT\r\nUSING c\r\n")

		// Pieces of a long line arriving apart change nothing.
		c.send(strings.Repeat("b", 300))
		time.Sleep(20 * time.Millisecond)
		c.send(strings.Repeat("b", 300) + "\r\nuse d\r\n")
		c.expect("BAD_FORMAT\r\nUSING d\r\n")
	})
}

// Only the first CR of a line counts: if no LF follows it, the line is
// not over until lineMax bytes have arrived, and is then skipped.
func TestStrayCR(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("x\ry\r\nlist-tube-used\r\n")
		c.nothing(200 * time.Millisecond)
		c.send(strings.Repeat("z", 300) + "\r\nuse ok\r\n")
		c.expect("BAD_FORMAT\r\nUSING ok\r\n")
	})
}

func TestNUL(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("stats\x00\r\n")
		c.expect("BAD_FORMAT\r\n")
		// The put line is rejected; its body is read as a command.
		c.send("put 0 0 1 1\x00\r\nx\r\n")
		c.expect("BAD_FORMAT\r\nUNKNOWN_COMMAND\r\n")
	})
}

// Commands in one write are answered in order, one answer each.
func TestPipelining(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("use a\r\nuse b\r\n")
		c.expect("USING a\r\nUSING b\r\n")
		c.send("put 5 0 10 3\r\none\r\nput 1 0 10 3\r\ntwo\r\nwatch b\r\nreserve\r\ndelete 2\r\n" +
			"peek-ready\r\nstats-job 9\r\nbogus\r\nput 0 0 10 1 x\r\nlist-tube-used\r\nreserve-with-timeout 0\r\n")
		c.expect("INSERTED 1\r\nINSERTED 2\r\nWATCHING 2\r\nRESERVED 2 3\r\ntwo\r\nDELETED\r\n" +
			"FOUND 1 3\r\none\r\nNOT_FOUND\r\nUNKNOWN_COMMAND\r\nBAD_FORMAT\r\nUSING b\r\nRESERVED 1 3\r\none\r\n")
		// A reserve that waits holds back the commands after it.
		o := s.dial()
		c.send("reserve\r\nlist-tube-used\r\n")
		c.nothing(100 * time.Millisecond)
		o.send("use b\r\n")
		o.expect("USING b\r\n")
		id := o.put(0, 0, 10, "late")
		c.expect("RESERVED " + itoa(id) + " 4\r\nlate\r\nUSING b\r\n")
	})
}

func TestQuit(t *testing.T) {
	each(t, func(t *testing.T, s *target) {
		c := s.dial()
		c.send("use a\r\nquit\r\nuse b\r\n")
		c.expect("USING a\r\n")
		c.closed()
	})
}

// Pipelined puts are answered in order, numbered in the order sent, and
// interleave correctly with the commands between them (a tube switch, bad
// puts, a reserve); the jobs come back in the order they were put.
func TestPipelinedPuts(t *testing.T) {
	eachWith(t, serverOpts{durable: true, maxJob: 100}, func(t *testing.T, s *target) {
		c := s.dial()
		var req, want strings.Builder
		for i := 0; i < 30; i++ {
			switch i {
			case 10:
				req.WriteString("use other\r\n")
				want.WriteString("USING other\r\n")
			case 15:
				req.WriteString("put 0 0 10 3 x\r\n")
				want.WriteString("BAD_FORMAT\r\n")
			case 20:
				req.WriteString("put 0 0 10 200\r\n" + strings.Repeat("z", 200) + "\r\n")
				want.WriteString("JOB_TOO_BIG\r\n")
			}
			body := fmt.Sprint("job", i)
			fmt.Fprintf(&req, "put 0 0 10 %d\r\n%s\r\n", len(body), body)
			fmt.Fprintf(&want, "INSERTED %d\r\n", i+1)
		}
		req.WriteString("watch other\r\nignore default\r\nreserve-with-timeout 0\r\n")
		want.WriteString("WATCHING 2\r\nWATCHING 1\r\nRESERVED 11 5\r\njob10\r\n")
		c.send(req.String())
		c.expect(want.String())
	})
}
