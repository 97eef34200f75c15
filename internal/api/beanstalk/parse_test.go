package beanstalk

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chronoq/chronoq/internal/engine"
)

// beanstalkdLines is a model of how beanstalkd cuts a stream into command
// lines, written the way prot.c does it — a lineMax-byte buffer filled by
// reads of arbitrary sizes, rescanned after each read, emptied when full
// — so readLine, which works on a large buffered reader instead, can be
// checked against it. Each event is "L:" and a line, or "T" for a line
// that was too long.
func beanstalkdLines(stream []byte, chunks []int) []string {
	var events []string
	var cmd []byte
	endline := false
	// lineEnd is scan_line_end: the first CR among all but the last byte,
	// and only if LF follows it.
	lineEnd := func(b []byte) int {
		if len(b) < 2 {
			return 0
		}
		i := bytes.IndexByte(b[:len(b)-1], '\r')
		if i >= 0 && b[i+1] == '\n' {
			return i + 2
		}
		return 0
	}
	for ci := 0; ; ci++ {
		for !endline {
			n := lineEnd(cmd)
			if n == 0 {
				if len(cmd) == lineMax {
					cmd, endline = cmd[:0], true
				}
				break
			}
			events = append(events, "L:"+string(cmd[:n-2]))
			cmd = cmd[n:]
		}
		if len(stream) == 0 {
			return events
		}
		k := 1
		if len(chunks) > 0 {
			k = max(chunks[ci%len(chunks)], 1)
		}
		k = min(k, lineMax-len(cmd), len(stream))
		cmd = append(cmd, stream[:k]...)
		stream = stream[k:]
		if endline {
			if n := lineEnd(cmd); n > 0 {
				events = append(events, "T")
				cmd, endline = cmd[n:], false
			} else if len(cmd) == lineMax {
				cmd = cmd[:0]
			}
		}
	}
}

// chunked reads its data in the given piece sizes, as a network might.
type chunked struct {
	data   []byte
	chunks []int
	i      int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	k := 1
	if len(c.chunks) > 0 {
		k = max(c.chunks[c.i%len(c.chunks)], 1)
	}
	c.i++
	n := copy(p[:min(k, len(p))], c.data)
	c.data = c.data[n:]
	return n, nil
}

func ourLines(stream []byte, chunks []int) []string {
	r := bufio.NewReaderSize(&chunked{data: stream, chunks: chunks}, bufSize)
	var events []string
	for {
		line, err := readLine(r)
		switch {
		case errors.Is(err, errLineTooLong):
			events = append(events, "T")
		case err != nil:
			return events
		default:
			events = append(events, "L:"+string(line))
		}
	}
}

func chunkList(b []byte) []int {
	var c []int
	for _, x := range b {
		c = append(c, int(x)%(lineMax+8)+1)
	}
	return c
}

func FuzzReadLine(f *testing.F) {
	f.Add([]byte("use a\r\nuse b\r\n"), []byte{3})
	f.Add([]byte(strings.Repeat("a", 500)+"\r\nput 0 0 1 1\r\n"), []byte{50})
	f.Add([]byte("use "+strings.Repeat("x", 219)+"\r\nuse b\r\nuse c\r\n"), []byte{7, 200})
	f.Add([]byte("x\ry\r\n"+strings.Repeat("z", 300)+"\r\nuse ok\r\n"), []byte{1})
	f.Add([]byte(strings.Repeat("\r", 230)+"\n\r\n\r\r\n"), []byte{100, 3})
	f.Add([]byte("\r\n\r\n\n\r"), []byte{})
	f.Fuzz(func(t *testing.T, stream, chunkBytes []byte) {
		chunks := chunkList(chunkBytes)
		want := beanstalkdLines(stream, chunks)
		// However the bytes arrive, readLine sees the same lines.
		for _, c := range [][]int{chunks, {1}, {lineMax}, {4096}} {
			if got := ourLines(stream, c); !slices.Equal(got, want) {
				t.Fatalf("stream %q in chunks %v:\n got %q\nwant %q", stream, c, got, want)
			}
		}
	})
}

// strtoulRef is C's strtoul, base 10, the slow way.
func strtoulRef(s string) (neg bool, mag uint64, empty, ok bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return neg, 0, true, true
	}
	v, err := strconv.ParseUint(s[:i], 10, 64)
	if err != nil {
		return neg, 0, false, false
	}
	return neg, v, false, true
}

func FuzzNumbers(f *testing.F) {
	for _, s := range []string{"0", "18446744073709551615", "18446744073709551616", " 12x", "-1", "+7", "\t9", "", "  ", "4294967296", "007"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// readUint: spaces only, then a digit, value within max.
		trimmed := strings.TrimLeft(s, " ")
		i := 0
		for i < len(trimmed) && trimmed[i] >= '0' && trimmed[i] <= '9' {
			i++
		}
		ref, err := strconv.ParseUint(trimmed[:i], 10, 64)
		wantOK := i > 0 && err == nil
		v, rest, ok := readUint(s, math.MaxUint64)
		if ok != wantOK || ok && (v != ref || rest != trimmed[i:]) {
			t.Fatalf("readUint(%q) = %d %q %v, want %d %q %v", s, v, rest, ok, ref, trimmed[i:], wantOK)
		}
		v32, _, ok32 := readU32(s)
		if ok32 != (wantOK && ref <= math.MaxUint32) || ok32 && uint64(v32) != ref {
			t.Fatalf("readU32(%q) = %d %v", s, v32, ok32)
		}
		neg, mag, empty, ok := strtoInt(s)
		rn, rm, re, rok := strtoulRef(s)
		if ok != rok || ok && (neg != rn || mag != rm || empty != re) {
			t.Fatalf("strtoInt(%q) = %v %d %v %v, want %v %d %v %v", s, neg, mag, empty, ok, rn, rm, re, rok)
		}
		if b, ok := kickBound(s); ok && !rn && uint64(b) != rm&math.MaxUint32 {
			t.Fatalf("kickBound(%q) = %d", s, b)
		}
		// which: the first matching prefix, the rest as its argument.
		o, arg := which(s)
		for _, p := range prefixes {
			if strings.HasPrefix(s, p.p) {
				if o != p.op || arg != s[len(p.p):] {
					t.Fatalf("which(%q) = %d %q, want %d", s, o, arg, p.op)
				}
				return
			}
		}
		if o != opUnknown {
			t.Fatalf("which(%q) = %d, want unknown", s, o)
		}
	})
}

func TestReserveTimeout(t *testing.T) {
	for in, want := range map[string]int32{"": 0, "x": 0, "5": 5, " -1": -1, "+3": 3, "4294967297": 1, "1x": 1} {
		if got, ok := reserveTimeout(in); !ok || got != want {
			t.Errorf("reserveTimeout(%q) = %d %v, want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"9223372036854775808", "-9223372036854775809", "99999999999999999999"} {
		if _, ok := reserveTimeout(in); ok {
			t.Errorf("reserveTimeout(%q) accepted an overflow", in)
		}
	}
	if v, ok := reserveTimeout("-9223372036854775808"); !ok || v != 0 {
		t.Errorf("reserveTimeout(min int64) = %d %v", v, ok)
	}
}

func FuzzTubeNames(f *testing.F) {
	for _, s := range []string{"default", "a+b", "a..b", "...", ".", "x.y", "a..2Bb", "$()", "a/b;c", strings.Repeat("+", 200), "-x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		// Any queue a tube name reaches is reached by that name only.
		if tube, ok := tubeOf(name); ok {
			if q, ok := queueOf(tube); !ok || q != name {
				t.Fatalf("tubeOf(%q) = %q, whose queue is %q", name, tube, q)
			}
		}
		q, ok := queueOf(name)
		if !validTube(name) {
			return
		}
		if !ok {
			if len(name) <= maxTubeName/4 {
				t.Fatalf("queueOf(%q) refused a short name", name)
			}
			return
		}
		if !engine.ValidQueueName(q) {
			t.Fatalf("queueOf(%q) = %q, not a queue name", name, q)
		}
		back, ok := tubeOf(q)
		if !ok || back != name {
			t.Fatalf("tubeOf(queueOf(%q) = %q) = %q %v", name, q, back, ok)
		}
		// Names queue names already allow, without dot runs, map to
		// themselves (the same queue over HTTP).
		if engine.ValidQueueName(name) && !strings.Contains(name, "..") && q != name {
			t.Fatalf("queueOf(%q) = %q, want it unchanged", name, q)
		}
	})
}
