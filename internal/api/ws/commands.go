package ws

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chronoq/chronoq/internal/api/wireenc"
	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/internal/pubsub"
)

// command is one client frame: {"id":N,"<op>":{...}}.
type command struct {
	ID   uint64
	Op   string
	Body json.RawMessage
}

// ops lists the commands; the frame decoder refuses anything else.
var ops = []string{
	"connect", "subscribe", "unsubscribe", "publish", "refresh",
	"consume", "stop", "ack", "nack", "touch", "bury", "put",
}

// opName is the command named k, as one of ops' strings (so naming the
// command allocates nothing); false for an unknown command.
func opName(k []byte) (string, bool) {
	for _, op := range ops {
		if op == string(k) {
			return op, true
		}
	}
	return "", false
}

// maxID keeps ids exact in JavaScript numbers.
const maxID = 1<<53 - 1

// cmdError is an error answered to one command: {"code","message"}.
type cmdError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *cmdError) Error() string { return e.Code + ": " + e.Message }

func errf(code, format string, args ...any) *cmdError {
	return &cmdError{Code: code, Message: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) *cmdError { return errf("bad_request", format, args...) }

// decodeCommand reads a frame's envelope. A frame that is not an object
// with a positive integer id and exactly one known op is an error; ID is
// set whenever it could be read, so the error can still be answered.
func decodeCommand(frame []byte) (command, error) {
	var cmd command
	frame = trimSpace(frame)
	if len(frame) == 0 || frame[0] != '{' || !json.Valid(frame) {
		return cmd, badRequest("a command is a JSON object: {\"id\":1,\"<op>\":{...}}")
	}
	// Without reflection or a map: every command comes here.
	var arr [8]wireenc.Member
	members, ok := wireenc.AppendMembers(arr[:0], frame)
	if !ok {
		m, ok := wireenc.SplitObject(frame)
		if !ok {
			if err := json.Unmarshal(frame, &m); err != nil {
				return cmd, badRequest("invalid command: %v", err)
			}
		}
		members = members[:0]
		for k, v := range m {
			members = append(members, wireenc.Member{Name: []byte(k), Value: v})
		}
	}
	var rawID []byte
	found := false
	for _, m := range members {
		if string(m.Name) == "id" {
			rawID, found = m.Value, true
		}
	}
	if !found {
		return cmd, badRequest("id: missing (a positive integer the answer will carry)")
	}
	id, err := strconv.ParseUint(string(rawID), 10, 64)
	if err != nil || id == 0 || id > maxID {
		return cmd, badRequest("id: must be an integer from 1 to 2^53-1, got %.40s", rawID)
	}
	cmd.ID = id
	for _, m := range members {
		if string(m.Name) == "id" {
			continue
		}
		op, known := opName(m.Name)
		if !known {
			return cmd, badRequest("unknown command %q", m.Name)
		}
		if cmd.Op != "" {
			return cmd, badRequest("one command per frame, got %q and %q", cmd.Op, op)
		}
		cmd.Op, cmd.Body = op, m.Value
	}
	if cmd.Op == "" {
		return cmd, badRequest("no command in the frame")
	}
	if err := checkEscapes(cmd.Op, cmd.Body); err != nil {
		return cmd, err
	}
	return cmd, nil
}

// checkEscapes refuses a string escape that is no Unicode character: a
// lone UTF-16 surrogate ("\ud800"). The frame is UTF-8 already (frames.go),
// but such an escape would be stored as sent and handed to every reader as
// a string no UTF-8 decoder can represent. The error names the body's
// field that holds it.
func checkEscapes(op string, body json.RawMessage) error {
	esc, bad := loneSurrogate(body)
	if !bad {
		return nil
	}
	field := op
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) == nil {
		keys := make([]string, 0, len(fields))
		for k := range fields {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if _, ok := loneSurrogate(fields[k]); ok {
				field = k
				break
			}
		}
	}
	return badRequest("%s: a string holds %s, a lone UTF-16 surrogate escape, which is not a Unicode character (send text as UTF-8; binary payloads as payload_base64)", field, esc)
}

// loneSurrogate finds a \uXXXX escape in the valid JSON text b that is a
// surrogate not part of a high+low pair.
func loneSurrogate(b []byte) (string, bool) {
	for i := 0; i < len(b); i++ {
		if b[i] != '\\' || i+1 >= len(b) {
			continue // in valid JSON a backslash only starts an escape in a string
		}
		if b[i+1] != 'u' || i+6 > len(b) {
			i++ // a one-character escape, such as \\
			continue
		}
		r := hex4(b[i+2 : i+6])
		switch {
		case r >= 0xd800 && r < 0xdc00:
			if i+12 <= len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
				if r2 := hex4(b[i+8 : i+12]); r2 >= 0xdc00 && r2 < 0xe000 {
					i += 11
					continue
				}
			}
			return string(b[i : i+6]), true
		case r >= 0xdc00 && r < 0xe000:
			return string(b[i : i+6]), true
		}
		i += 5
	}
	return "", false
}

func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
}

// Command bodies. Unknown fields are refused (strictUnmarshal).

type connectBody struct {
	Token string `json:"token"`
}

type subscribeBody struct {
	Channel string  `json:"channel"`
	Since   *uint64 `json:"since"`
	Epoch   *string `json:"epoch"`
}

type channelBody struct {
	Channel string `json:"channel"`
}

type publishBody struct {
	Channel string          `json:"channel"`
	Data    json.RawMessage `json:"data"`
}

type refreshBody struct {
	Token string `json:"token"`
}

type consumeBody struct {
	Namespace string    `json:"namespace"`
	Queues    []string  `json:"queues"`
	Prefetch  *int      `json:"prefetch"`
	TTR       *duration `json:"ttr"`
}

type jobRef struct {
	Namespace string `json:"namespace"`
	Queue     string `json:"queue"`
	ID        string `json:"id"`
	Receipt   string `json:"receipt"`
}

type ackBody struct {
	jobRef
	Result json.RawMessage `json:"result"`
}

type nackBody struct {
	jobRef
	Delay *duration `json:"delay"`
	Error string    `json:"error"`
}

type touchBody struct {
	jobRef
	TTR *duration `json:"ttr"`
}

type buryBody struct {
	jobRef
	Reason string `json:"reason"`
}

type putBody struct {
	Namespace      string            `json:"namespace"`
	Queue          string            `json:"queue"`
	Payload        json.RawMessage   `json:"payload"`
	PayloadBase64  *string           `json:"payload_base64"`
	ID             string            `json:"id"`
	Delay          *duration         `json:"delay"`
	At             *time.Time        `json:"at"`
	Priority       *uint32           `json:"priority"`
	TTL            *duration         `json:"ttl"`
	TTR            *duration         `json:"ttr"`
	Tries          *uint32           `json:"tries"`
	Key            string            `json:"key"`
	Tags           map[string]string `json:"tags"`
	ReplyTo        string            `json:"reply_to"`
	IdempotencyKey string            `json:"idempotency_key"`
	Notify         string            `json:"notify"`
}

// decodePutBody reads a put command's body. The common body (known
// fields, strings without escapes, a payload) is read from its members
// directly; anything else goes through decodeBody, which gives the same
// result and every error message.
func decodePutBody(raw json.RawMessage, b *putBody) error {
	if fastPutBody(raw, b) {
		return nil
	}
	*b = putBody{}
	return decodeBody(raw, b)
}

// fastPutBody fills b from a body of only plain string fields and a
// non-null payload, as encoding/json would; false (b partly filled) for
// any other body.
func fastPutBody(raw json.RawMessage, b *putBody) bool {
	var arr [8]wireenc.Member
	members, ok := wireenc.AppendMembers(arr[:0], trimSpace(raw))
	if !ok {
		return false
	}
	for _, m := range members {
		v := m.Value
		var dst *string
		switch string(m.Name) {
		case "payload":
			if string(v) == "null" {
				return false
			}
			// The command's frame is this message's own buffer (frames.go),
			// so the payload is not copied here; request copies it once.
			b.Payload = v
			continue
		case "namespace":
			dst = &b.Namespace
		case "queue":
			dst = &b.Queue
		case "id":
			dst = &b.ID
		case "key":
			dst = &b.Key
		case "reply_to":
			dst = &b.ReplyTo
		case "idempotency_key":
			dst = &b.IdempotencyKey
		case "notify":
			dst = &b.Notify
		default:
			return false
		}
		s, ok := plainString(v)
		if !ok {
			return false
		}
		*dst = s
	}
	return true
}

// plainString is a JSON string without escapes, controls or non-ASCII
// bytes, whose value is its bytes between the quotes.
func plainString(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", false
	}
	for _, c := range v[1 : len(v)-1] {
		if c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return "", false
		}
	}
	return string(v[1 : len(v)-1]), true
}

// decodeBody reads a command's body into v; an absent or null body is an
// empty object.
func decodeBody(raw json.RawMessage, v any) error {
	raw = trimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if err := strictUnmarshal(raw, v); err != nil {
		var ce *cmdError
		if errors.As(err, &ce) {
			return ce
		}
		return badRequest("%v", err)
	}
	return nil
}

// duration is a Go duration string ("30s") or a number of seconds, as in
// the HTTP API.
type duration time.Duration

func (d *duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q (want e.g. \"30s\" or a number of seconds)", s)
		}
		if v < 0 {
			return errors.New("duration must not be negative")
		}
		*d = duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || f < 0 || f > 9e9 || math.IsNaN(f) {
		return fmt.Errorf("invalid duration %.40s (want e.g. \"30s\" or a number of seconds)", b)
	}
	*d = duration(math.Round(f * 1e9))
	return nil
}

func (d *duration) ptr() *time.Duration {
	if d == nil {
		return nil
	}
	v := time.Duration(*d)
	return &v
}

// describeJSONError names the offending field where encoding/json lets us.
func describeJSONError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		f := te.Field
		if f == "" {
			f = "body"
		}
		return badRequest("%s: must be %s, got JSON %s", f, jsonKind(te.Type.Kind().String()), te.Value)
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return badRequest("invalid JSON at byte %d: %v", se.Offset, se)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return badRequest("unknown field %s", f)
	}
	if strings.HasPrefix(msg, "json: ") {
		return badRequest("%s", strings.TrimPrefix(msg, "json: "))
	}
	return badRequest("%s", msg)
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "struct", "map":
		return "an object"
	case "bool":
		return "true or false"
	}
	return "a number"
}

// compactJSON validates and compacts a JSON value given by a client;
// number spelling, key order and escapes stay as sent.
func compactJSON(field string, raw json.RawMessage, max int64) ([]byte, error) {
	if len(raw) == 0 {
		return nil, badRequest("%s: missing", field)
	}
	if !hasJSONSpace(raw) {
		// Every value comes out of a frame decodeCommand checked with
		// json.Valid (or out of json.Unmarshal), so one without whitespace
		// is compact already: a copy is json.Compact's result, without its
		// second scan.
		if int64(len(raw)) > max {
			return nil, errf("payload_too_large", "%s: %d bytes, the limit is %d", field, len(raw), max)
		}
		return bytes.Clone(raw), nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, badRequest("%s: invalid JSON: %v", field, err)
	}
	if int64(buf.Len()) > max {
		return nil, errf("payload_too_large", "%s: %d bytes, the limit is %d", field, buf.Len(), max)
	}
	return buf.Bytes(), nil
}

// putRequest turns a put body into the engine's request. The limits the
// engine does not check itself are checked here, like the HTTP API does.
func (p *putBody) request(maxPayload int64) (engine.PutRequest, error) {
	var req engine.PutRequest
	switch {
	case len(p.Payload) > 0 && p.PayloadBase64 != nil:
		return req, badRequest("payload: give either payload or payload_base64, not both")
	case len(p.Payload) > 0:
		data, err := compactJSON("payload", p.Payload, maxPayload)
		if err != nil {
			return req, err
		}
		req.Payload, req.PayloadJSON = data, true
	case p.PayloadBase64 != nil:
		data, err := base64.StdEncoding.DecodeString(*p.PayloadBase64)
		if err != nil {
			return req, badRequest("payload_base64: invalid standard base64: %v", err)
		}
		if int64(len(data)) > maxPayload {
			return req, errf("payload_too_large", "payload: %d bytes, the limit is %d", len(data), maxPayload)
		}
		req.Payload = data
	default:
		return req, badRequest("payload: missing: give payload (any JSON value) or payload_base64")
	}
	if p.ID != "" && !engine.ValidJobID(p.ID) {
		return req, badRequest("id: invalid job id %q", p.ID)
	}
	if p.Delay != nil && p.At != nil {
		return req, badRequest("at: delay and at are exclusive, give one")
	}
	if p.Delay != nil && time.Duration(*p.Delay) > engine.MaxDelay {
		return req, badRequest("delay: must be at most %s", engine.MaxDelay)
	}
	if len(p.Key) > engine.MaxKeyLen {
		return req, badRequest("key: at most %d bytes", engine.MaxKeyLen)
	}
	if len(p.Tags) > engine.MaxTags {
		return req, badRequest("tags: at most %d tags", engine.MaxTags)
	}
	for k, v := range p.Tags {
		if k == "" || len(k) > engine.MaxTagLen || len(v) > engine.MaxTagLen {
			return req, badRequest("tags: keys are 1 to %d bytes, values at most %d", engine.MaxTagLen, engine.MaxTagLen)
		}
	}
	if p.ReplyTo != "" && !engine.ValidQueueName(p.ReplyTo) {
		return req, badRequest("reply_to: invalid queue name %q", p.ReplyTo)
	}
	req.ID, req.At, req.Priority, req.Tries = p.ID, p.At, p.Priority, p.Tries
	req.Delay, req.TTL, req.TTR = p.Delay.ptr(), p.TTL.ptr(), p.TTR.ptr()
	req.Key, req.ReplyTo, req.IdempotencyKey = p.Key, p.ReplyTo, p.IdempotencyKey
	if p.Notify != "" && !pubsub.ValidChannel(p.Notify) {
		return req, badRequest("notify: invalid channel name %q", p.Notify)
	}
	req.Notify = p.Notify
	if len(p.Tags) > 0 {
		req.Tags = p.Tags
	}
	return req, nil
}

// errorOf maps any error to what a client is told. Engine errors keep
// their code; anything else is internal and says no more than that.
func errorOf(err error) *cmdError {
	var ce *cmdError
	if errors.As(err, &ce) {
		return ce
	}
	var ee *engine.Error
	if errors.As(err, &ee) {
		return &cmdError{Code: string(ee.Code), Message: ee.Error()}
	}
	return &cmdError{Code: "internal", Message: "internal error"}
}

// marshal encodes without HTML escaping: data must come back byte for byte.
func marshal(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"internal","message":"internal error"}}`)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// hasJSONSpace says whether b holds a byte of JSON's whitespace, between
// tokens or (then harmlessly) inside a string.
func hasJSONSpace(b []byte) bool {
	for _, c := range b {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}

func trimSpace(b []byte) []byte {
	isSpace := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

// bearer extracts the token of "Authorization: Bearer <token>".
func bearer(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	tok = strings.TrimSpace(tok)
	return tok, tok != ""
}
