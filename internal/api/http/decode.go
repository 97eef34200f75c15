package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
)

// The decoder reads request bodies one field at a time from raw JSON rather
// than unmarshalling into tagged structs. That is what lets every error name
// the offending field as a full path (next.delay, jobs[3].ttl), accept two
// shapes for one field (durations as strings or numbers), and tell "absent"
// from "null" where the API cares (payload: null is a value).

// object is one JSON object of a request body. Its error is sticky: getters
// after the first failure return zero values, so a decoder can read all its
// fields and check o.err once at the end; the error reported is the first
// one in reading order, which keeps messages deterministic.
type object struct {
	path string
	// The members: in arr[:n] (up to 8) or ms (up to 16) when
	// wireenc.AppendMembers took the object, which every hot route's body
	// is — no map to build, no hashing per field read; else in m. arr is
	// counted, not sliced into ms: a pointer from o into itself would make
	// every object escape to the heap.
	m   map[string]json.RawMessage
	ms  []wireenc.Member
	arr [8]wireenc.Member
	n   int
	err error
}

// members are those AppendMembers took.
func (o *object) members() []wireenc.Member {
	if o.ms != nil {
		return o.ms
	}
	return o.arr[:o.n]
}

// member is the raw value of the member name.
func (o *object) member(name string) (json.RawMessage, bool) {
	if o.m != nil {
		v, ok := o.m[name]
		return v, ok
	}
	for _, m := range o.members() {
		if string(m.Name) == name {
			return m.Value, true
		}
	}
	return nil, false
}

// names are the members' names, in no particular order.
func (o *object) names() []string {
	if o.m != nil {
		names := make([]string, 0, len(o.m))
		for k := range o.m {
			names = append(names, k)
		}
		return names
	}
	names := make([]string, len(o.members()))
	for i, m := range o.members() {
		names[i] = string(m.Name)
	}
	return names
}

// isJSONSpace is JSON's own whitespace set; bytes.TrimSpace would also eat
// \v, \f and Unicode spaces and so accept bodies that are not JSON.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && isJSONSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isJSONSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

// parseBody reads a whole request body as an object. An empty body is an
// empty object, so routes whose fields are all optional need no body.
func (o *object) parseBody(body []byte) error {
	body = trimJSONSpace(body)
	if len(body) == 0 {
		o.m = map[string]json.RawMessage{}
		return nil
	}
	if !json.Valid(body) {
		var v any
		err := json.Unmarshal(body, &v)
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return badField("", "invalid JSON at byte %d: %s", se.Offset, se.Error())
		}
		return badField("", "invalid JSON")
	}
	if body[0] != '{' {
		return badField("", "request body must be a JSON object")
	}
	return o.init(body, "")
}

// newObject wraps raw JSON that is already known to be valid.
func newObject(raw json.RawMessage, path string) (*object, error) {
	o := new(object)
	if err := o.init(raw, path); err != nil {
		return nil, err
	}
	return o, nil
}

// init reads raw into o, which its caller may keep on its stack: a body's
// object is most of what decoding a put would allocate.
func (o *object) init(raw json.RawMessage, path string) error {
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return badField(path, "must be a JSON object")
	}
	o.path = path
	if ms, ok := wireenc.AppendMembers(o.arr[:0], raw); ok {
		if len(ms) <= len(o.arr) {
			o.n = len(ms)
		} else {
			o.ms, _ = wireenc.AppendMembers(make([]wireenc.Member, 0, len(ms)), raw)
		}
		return nil
	}
	if m, ok := wireenc.SplitObject(raw); ok {
		o.m = m
		return nil
	}
	var m map[string]json.RawMessage // not &o.m: o would escape
	if err := json.Unmarshal(raw, &m); err != nil {
		return badField(path, "invalid JSON object: %v", err)
	}
	o.m = m
	return nil
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func indexPath(parent string, i int) string {
	return fmt.Sprintf("%s[%d]", parent, i)
}

func (o *object) field(name string) string { return joinPath(o.path, name) }

func (o *object) fail(name, format string, args ...any) {
	if o.err == nil {
		o.err = badField(o.field(name), format, args...)
	}
}

func (o *object) setErr(err error) {
	if o.err == nil && err != nil {
		o.err = err
	}
}

// allow rejects the first unknown field (in sorted order, for stable
// messages). Call it first: a typo in a field name is the likeliest cause of
// any later error.
func (o *object) allow(names ...string) {
	if o.err != nil {
		return
	}
	var unknown []string
	known := func(k string) bool {
		for _, n := range names {
			if n == k {
				return true
			}
		}
		return false
	}
	if o.m != nil {
		for k := range o.m {
			if !known(k) {
				unknown = append(unknown, k)
			}
		}
	}
	for _, m := range o.members() {
		if !known(string(m.Name)) {
			unknown = append(unknown, string(m.Name))
		}
	}
	if len(unknown) > 0 {
		slices.Sort(unknown)
		o.err = &engine.Error{Code: engine.CodeBadRequest, Message: fmt.Sprintf("unknown field %q", o.field(unknown[0]))}
	}
}

func isNull(raw json.RawMessage) bool { return string(raw) == "null" }

// get returns a present, non-null field. Null means "not given" for every
// optional field; the fields where null is a value read o.member.
func (o *object) get(name string) (json.RawMessage, bool) {
	if o.err != nil {
		return nil, false
	}
	raw, ok := o.member(name)
	if !ok || isNull(raw) {
		return nil, false
	}
	return raw, true
}

// text is get for fields whose strings are kept (badText).
func (o *object) text(name string) (json.RawMessage, bool) {
	raw, ok := o.get(name)
	if ok {
		if msg := badText(raw); msg != "" {
			o.fail(name, "%s", msg)
			return nil, false
		}
	}
	return raw, ok
}

// badText finds text that valid JSON syntax lets through but that cannot be
// stored and sent back as valid JSON: bytes that are not UTF-8, and
// surrogate escapes that do not form a pair ("\ud800"), which
// encoding/json would silently turn into U+FFFD. Binary data has its own
// base64 fields. raw must be valid JSON; the answer is "" or the problem.
func badText(raw []byte) string {
	if !utf8.Valid(raw) {
		return "contains bytes that are not valid UTF-8 (send binary data base64-encoded)"
	}
	// In valid JSON a backslash occurs only inside strings and starts an
	// escape, so a plain scan from escape to escape never misreads.
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if raw[i+1] != 'u' {
			i++ // a one-character escape, possibly an escaped backslash
			continue
		}
		r := hex4(raw[i+2 : i+6])
		switch {
		case r >= 0xd800 && r <= 0xdbff:
			if i+12 <= len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
				if lo := hex4(raw[i+8 : i+12]); lo >= 0xdc00 && lo <= 0xdfff {
					i += 11
					continue
				}
			}
			return fmt.Sprintf("contains an unpaired surrogate escape %s (not valid Unicode text)", raw[i:i+6])
		case r >= 0xdc00 && r <= 0xdfff:
			return fmt.Sprintf("contains an unpaired surrogate escape %s (not valid Unicode text)", raw[i:i+6])
		}
		i += 5
	}
	return ""
}

// hex4 reads the four hex digits of a \u escape (valid JSON guarantees them).
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		}
	}
	return r
}

func (o *object) str(name string) string {
	raw, ok := o.text(name)
	if !ok {
		return ""
	}
	s, ok := rawString(raw)
	if !ok {
		o.fail(name, "must be a string")
	}
	return s
}

func rawString(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	if plainASCII(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// plainASCII reports whether raw is a JSON string of printable ASCII
// without escapes: its text between the quotes is its value, as
// json.Unmarshal would decode it, without a decoder (ttr "30s").
func plainASCII(raw []byte) bool {
	if len(raw) < 2 || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

func isNumber(raw json.RawMessage) bool {
	return len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// uintField reads a whole number in [0, max]. Integral floats (10.0, 1e3)
// are accepted because many JSON encoders write every number as a float.
func (o *object) uintField(name string, max uint64) (uint64, bool) {
	raw, ok := o.get(name)
	if !ok {
		return 0, false
	}
	u, err := parseUint(raw, max)
	if err != nil {
		o.fail(name, "%s", err.Error())
		return 0, false
	}
	return u, true
}

func parseUint(raw json.RawMessage, max uint64) (uint64, error) {
	if !isNumber(raw) {
		return 0, fmt.Errorf("must be a number")
	}
	outOfRange := func() error { return fmt.Errorf("must be a whole number between 0 and %d", max) }
	u, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(string(raw), 64)
		if ferr != nil || f != math.Trunc(f) || f < 0 || f >= float64(max)+1 {
			return 0, outOfRange()
		}
		u = uint64(f)
	}
	if u > max {
		return 0, outOfRange()
	}
	return u, nil
}

func (o *object) optUint32(name string) *uint32 {
	u, ok := o.uintField(name, math.MaxUint32)
	if !ok {
		return nil
	}
	v := uint32(u)
	return &v
}

func (o *object) optUint64(name string) *uint64 {
	u, ok := o.uintField(name, math.MaxUint64)
	if !ok {
		return nil
	}
	return &u
}

// intRange reads an integer in [lo, hi]; absent gives def.
func (o *object) intRange(name string, lo, hi, def int) int {
	raw, ok := o.get(name)
	if !ok {
		return def
	}
	u, err := parseUint(raw, uint64(hi))
	if err != nil || int(u) < lo {
		if isNumber(raw) {
			o.fail(name, "must be a whole number between %d and %d", lo, hi)
		} else {
			o.fail(name, "must be a number")
		}
		return def
	}
	return int(u)
}

func (o *object) optFloat(name string) *float64 {
	raw, ok := o.get(name)
	if !ok {
		return nil
	}
	if !isNumber(raw) {
		o.fail(name, "must be a number")
		return nil
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		o.fail(name, "number out of range")
		return nil
	}
	return &f
}

func (o *object) optBool(name string) *bool {
	raw, ok := o.get(name)
	if !ok {
		return nil
	}
	var b bool
	switch string(raw) {
	case "true":
		b = true
	case "false":
	default:
		o.fail(name, "must be true or false")
		return nil
	}
	return &b
}

// maxDurationSeconds keeps seconds × 1e9 inside int64 (≈292 years).
const maxDurationSeconds = 9e9

func (o *object) optDuration(name string) *time.Duration {
	raw, ok := o.get(name)
	if !ok {
		return nil
	}
	d, err := parseDurationJSON(raw)
	if err != nil {
		o.fail(name, "%s", err.Error())
		return nil
	}
	return &d
}

// parseDurationJSON accepts a Go duration string or a number of seconds.
func parseDurationJSON(raw json.RawMessage) (time.Duration, error) {
	if isNumber(raw) {
		return secondsToDuration(string(raw))
	}
	s, ok := rawString(raw)
	if !ok {
		return 0, fmt.Errorf("must be a duration string (\"30s\") or a number of seconds")
	}
	return parseDurationString(s)
}

func parseDurationString(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("invalid duration %q (want e.g. \"30s\", \"1h30m\" or a number of seconds)", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	return d, nil
}

func secondsToDuration(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, fmt.Errorf("invalid number of seconds %q", s)
	}
	if f < 0 {
		return 0, fmt.Errorf("must not be negative")
	}
	if err != nil || f > maxDurationSeconds {
		return 0, fmt.Errorf("duration out of range")
	}
	return time.Duration(math.Round(f * 1e9)), nil
}

// queryDuration reads a duration from a query string: "30s" or "1.5".
func queryDuration(s string) (time.Duration, error) {
	if s != "" && (s[0] == '-' || s[0] == '.' || (s[0] >= '0' && s[0] <= '9')) {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return secondsToDuration(s)
		}
	}
	return parseDurationString(s)
}

func (o *object) optTime(name string) *time.Time {
	raw, ok := o.get(name)
	if !ok {
		return nil
	}
	s, ok := rawString(raw)
	if !ok {
		o.fail(name, "must be an RFC 3339 time string")
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		o.fail(name, "invalid time %q (want RFC 3339, e.g. \"2027-01-01T00:00:00Z\")", s)
		return nil
	}
	return &t
}

// strMap reads an object of strings; present is true even for an empty
// object so callers can tell "clear the tags" from "leave them".
func (o *object) strMap(name string) (m map[string]string, present bool) {
	raw, ok := o.text(name)
	if !ok {
		return nil, false
	}
	child, err := newObject(raw, o.field(name))
	if err != nil {
		o.setErr(err)
		return nil, false
	}
	keys := child.names()
	slices.Sort(keys)
	m = make(map[string]string, len(keys))
	for _, k := range keys {
		raw, _ := child.member(k)
		v, ok := rawString(raw)
		if !ok {
			o.setErr(badField(child.field(k), "must be a string"))
			return nil, false
		}
		m[k] = v
	}
	return m, true
}

// list reads an array field as its raw elements.
func (o *object) list(name string) ([]json.RawMessage, bool) {
	raw, ok := o.get(name)
	if !ok {
		return nil, false
	}
	if raw[0] != '[' {
		o.fail(name, "must be an array")
		return nil, false
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		o.fail(name, "invalid array: %v", err)
		return nil, false
	}
	return items, true
}

func (o *object) strList(name string) ([]string, bool) {
	if _, ok := o.text(name); !ok {
		return nil, false
	}
	items, ok := o.list(name)
	if !ok {
		return nil, false
	}
	out := make([]string, len(items))
	for i, raw := range items {
		s, ok := rawString(raw)
		if !ok {
			o.setErr(badField(indexPath(o.field(name), i), "must be a string"))
			return nil, false
		}
		out[i] = s
	}
	return out, true
}

// child reads a nested object into c, which the caller may keep on its
// stack; false when absent or on error.
func (o *object) child(name string, c *object) bool {
	raw, ok := o.get(name)
	if !ok {
		return false
	}
	if err := c.init(raw, o.field(name)); err != nil {
		o.setErr(err)
		return false
	}
	return true
}

// anyJSON reads a field whose value may be any JSON, null included, and
// returns it compacted: insignificant whitespace goes, everything else
// (number spelling, key order, escapes) stays as the client wrote it.
func (o *object) anyJSON(name string) (data []byte, present bool) {
	if o.err != nil {
		return nil, false
	}
	raw, ok := o.member(name)
	if !ok {
		return nil, false
	}
	if msg := badText(raw); msg != "" {
		o.fail(name, "%s", msg)
		return nil, false
	}
	// No second json.Valid: every object wraps a member of a body that
	// parseBody checked whole (newObject), and a member of valid JSON is
	// valid; checking again cost a pass over every payload.
	return wireenc.AppendCompact(make([]byte, 0, len(raw)), raw), true
}
