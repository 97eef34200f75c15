package beanstalk

import (
	"bytes"
	"math"
	"strings"
)

// Parsing follows prot.c's helpers rather than a grammar, because clients
// (and beanstalkd's own tests) depend on what it accepts and rejects:
// numbers after any number of spaces, trailing garbage rejected or not
// depending on the helper, kick and reserve-with-timeout read by C's
// strtoul and strtol, and commands chosen by the first matching prefix.

// lineMax is beanstalkd's LINE_BUF_SIZE: the longest command line, CRLF
// included ("pause-tube", a 200-byte name and the largest delay).
const lineMax = 224

// scanLine finds the end of a command line in a window of buffered input
// the way beanstalkd does: only the first CR counts, and only if an LF
// follows it. n is the line length with its CRLF; dead reports a first CR
// followed by something else, after which this window can hold no line.
func scanLine(w []byte) (n int, dead bool) {
	if len(w) < 2 {
		return 0, false
	}
	i := bytes.IndexByte(w[:len(w)-1], '\r')
	if i < 0 {
		return 0, false
	}
	if w[i+1] == '\n' {
		return i + 2, false
	}
	return 0, true
}

type op uint8

const (
	opUnknown op = iota
	opPut
	opPeekJob
	opPeekReady
	opPeekDelayed
	opPeekBuried
	opReserveTimeout
	opReserveJob
	opReserve
	opDelete
	opRelease
	opBury
	opKick
	opKickJob
	opTouch
	opStatsJob
	opStatsTube
	opStats
	opUse
	opWatch
	opIgnore
	opListTubesWatched
	opListTubeUsed
	opListTubes
	opQuit
	opPauseTube
	numOps
)

// prefixes in beanstalkd's matching order: a longer command must come
// before the shorter one it starts with ("stats-job " before "stats").
var prefixes = [...]struct {
	p  string
	op op
}{
	{"put ", opPut},
	{"peek ", opPeekJob},
	{"peek-ready", opPeekReady},
	{"peek-delayed", opPeekDelayed},
	{"peek-buried", opPeekBuried},
	{"reserve-with-timeout ", opReserveTimeout},
	{"reserve-job ", opReserveJob},
	{"reserve", opReserve},
	{"delete ", opDelete},
	{"release ", opRelease},
	{"bury ", opBury},
	{"kick ", opKick},
	{"kick-job ", opKickJob},
	{"touch ", opTouch},
	{"stats-job ", opStatsJob},
	{"stats-tube ", opStatsTube},
	{"stats", opStats},
	{"use ", opUse},
	{"watch ", opWatch},
	{"ignore ", opIgnore},
	{"list-tubes-watched", opListTubesWatched},
	{"list-tube-used", opListTubeUsed},
	{"list-tubes", opListTubes},
	{"quit", opQuit},
	{"pause-tube", opPauseTube},
}

// which picks the command by prefix and returns what follows the prefix.
func which(line string) (op, string) {
	for _, p := range prefixes {
		if strings.HasPrefix(line, p.p) {
			return p.op, line[len(p.p):]
		}
	}
	return opUnknown, ""
}

// exact reports the commands that take no argument and reject anything
// after their name (beanstalkd checks the line length).
func exact(o op) bool {
	switch o {
	case opPeekReady, opPeekDelayed, opPeekBuried, opReserve, opStats,
		opListTubes, opListTubeUsed, opListTubesWatched:
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// readUint reads an unsigned decimal after any number of spaces, as
// read_u64/read_u32 do: a digit must come first, the value must fit max,
// and the rest of the string is returned unparsed.
func readUint(s string, max uint64) (v uint64, rest string, ok bool) {
	s = strings.TrimLeft(s, " ")
	if s == "" || !isDigit(s[0]) {
		return 0, s, false
	}
	i := 0
	for ; i < len(s) && isDigit(s[i]); i++ {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, s, false
		}
		v = v*10 + d
	}
	if v > max {
		return 0, s, false
	}
	return v, s[i:], true
}

// readU64 reads a whole argument: nothing may follow the number.
func readU64(s string) (uint64, bool) {
	v, rest, ok := readUint(s, math.MaxUint64)
	return v, ok && rest == ""
}

func readU32(s string) (uint32, string, bool) {
	v, rest, ok := readUint(s, math.MaxUint32)
	return uint32(v), rest, ok
}

// cSpace is C's isspace in the C locale.
func cSpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// strtoInt reads like C's strtol/strtoul in base 10: leading white space,
// an optional sign, digits. ok is false only when the magnitude overflows
// 64 bits (errno ERANGE); empty reports that no digit was read (the end
// pointer did not move).
func strtoInt(s string) (neg bool, mag uint64, empty, ok bool) {
	i := 0
	for i < len(s) && cSpace(s[i]) {
		i++
	}
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	start := i
	for ; i < len(s) && isDigit(s[i]); i++ {
		d := uint64(s[i] - '0')
		if mag > (math.MaxUint64-d)/10 {
			return neg, 0, false, false
		}
		mag = mag*10 + d
	}
	return neg, mag, i == start, true
}

// kickBound reads kick's bound as strtoul into an unsigned int does:
// trailing garbage is ignored, a minus sign wraps, and the value is cut to
// 32 bits.
func kickBound(s string) (uint32, bool) {
	neg, mag, empty, ok := strtoInt(s)
	if !ok || empty {
		return 0, false
	}
	if neg {
		mag = -mag
	}
	return uint32(mag), true
}

// reserveTimeout reads reserve-with-timeout's seconds as strtol into an
// int does: no digits read as 0, garbage after the number is ignored, the
// value is cut to 32 bits, and a negative timeout waits forever.
func reserveTimeout(s string) (int32, bool) {
	neg, mag, _, ok := strtoInt(s)
	if !ok || !neg && mag > math.MaxInt64 || neg && mag > 1<<63 {
		return 0, false
	}
	v := int64(mag)
	if neg {
		v = -v
	}
	return int32(v), true
}

// readTubeArg splits pause-tube's arguments as read_tube_name does: the
// name is the run of name characters after any spaces.
func readTubeArg(s string) (name, rest string, ok bool) {
	s = strings.TrimLeft(s, " ")
	i := 0
	for i < len(s) && tubeChar(s[i]) {
		i++
	}
	return s[:i], s[i:], i > 0
}
