package beanstalk

import (
	"bufio"
	"errors"
)

// errLineTooLong reports a command line that did not fit lineMax bytes. It
// has been skipped through its end, as beanstalkd skips it, and is answered
// BAD_FORMAT; the connection stays usable.
var errLineTooLong = errors.New("beanstalk: command line too long")

// readLine returns the next command line without its CRLF. The slice
// points into r's buffer: it is valid until the next read from r.
//
// beanstalkd reads a command into a lineMax-byte buffer. A line that does
// not end inside it is thrown away in further lineMax-byte windows until a
// window holds a line end (found by scanLine's rule, so a CRLF split across
// two windows is not seen). The windows are counted from the start of the
// line, not from how the bytes arrived, so the same stream gives the same
// answers however the network cuts it.
func readLine(r *bufio.Reader) ([]byte, error) {
	n, err := window(r)
	if err != nil {
		return nil, err
	}
	if n > 0 {
		line, _ := r.Peek(n)
		_, _ = r.Discard(n)
		return line[:n-2], nil
	}
	for {
		if _, err := r.Discard(lineMax); err != nil {
			return nil, err
		}
		n, err := window(r)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			_, _ = r.Discard(n)
			return nil, errLineTooLong
		}
	}
}

// window waits until the window at the head of r holds a line end or is
// full. It answers the line's length with CRLF, or 0 for a full window
// without one (which the caller discards).
func window(r *bufio.Reader) (int, error) {
	want := 1
	for {
		if _, err := r.Peek(want); err != nil {
			return 0, err
		}
		w, _ := r.Peek(min(r.Buffered(), lineMax))
		n, dead := scanLine(w)
		switch {
		case n > 0:
			return n, nil
		case len(w) == lineMax:
			return 0, nil
		case dead:
			want = lineMax // no line can end in this window any more
		default:
			want = len(w) + 1
		}
	}
}
