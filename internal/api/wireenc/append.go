package wireenc

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/chronoq/chronoq/internal/engine"
	"github.com/chronoq/chronoq/wire"
)

// The answers of the hot routes (take, ack, put) are written by the
// appenders below rather than by encoding/json's reflection: the same bytes
// (append_test.go compares them with encoding/json, HTML escaping off, on
// generated jobs), without building the wire.Job and its strings first.

// AppendJob appends the job object of j: exactly encoding/json's encoding
// of Job(j) with HTML escaping off.
func AppendJob(dst []byte, j *engine.Job) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, j.ID)
	dst = append(dst, `,"namespace":`...)
	dst = appendString(dst, j.Namespace)
	dst = append(dst, `,"queue":`...)
	dst = appendString(dst, j.Queue)
	dst = append(dst, `,"state":`...)
	dst = appendString(dst, j.State.String())
	dst = appendBlob(dst, "payload", j.Data, j.PayloadJSON)
	dst = append(dst, `,"priority":`...)
	dst = strconv.AppendUint(dst, uint64(j.Priority), 10)
	if j.Key != "" {
		dst = append(dst, `,"key":`...)
		dst = appendString(dst, j.Key)
	}
	if len(j.Tags) > 0 {
		dst = append(dst, `,"tags":`...)
		dst = appendTags(dst, j.Tags)
	}
	dst = append(dst, `,"created_at":"`...)
	dst = appendTime(dst, j.CreatedAt)
	dst = append(dst, `","activate_at":"`...)
	dst = appendTime(dst, j.ActivateAt)
	dst = append(dst, '"')
	if !j.ExpireAt.IsZero() {
		dst = append(dst, `,"expire_at":"`...)
		dst = appendTime(dst, j.ExpireAt)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"ttr":`...)
	dst = appendString(dst, j.TTR.String())
	dst = append(dst, `,"tries":`...)
	dst = strconv.AppendUint(dst, uint64(j.Tries), 10)
	dst = append(dst, `,"attempt":`...)
	dst = strconv.AppendUint(dst, uint64(j.Attempt), 10)
	dst = appendOptString(dst, `,"receipt":`, j.Receipt)
	if !j.ReservedUntil.IsZero() {
		dst = append(dst, `,"reserved_until":"`...)
		dst = appendTime(dst, j.ReservedUntil)
		dst = append(dst, '"')
	}
	dst = appendOptString(dst, `,"last_error":`, j.LastError)
	dst = appendOptString(dst, `,"reply_to":`, j.ReplyTo)
	dst = appendOptString(dst, `,"notify":`, j.Notify)
	dst = appendOptString(dst, `,"cron":`, j.Cron)
	if j.HasResult {
		dst = appendBlob(dst, "result", j.ResultData, j.ResultJSON)
	}
	return append(dst, '}')
}

// AppendJobs appends a JSON array of the jobs ([] for none, like Jobs).
func AppendJobs(dst []byte, jobs []engine.Job) []byte {
	dst = append(dst, '[')
	for i := range jobs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendJob(dst, &jobs[i])
	}
	return append(dst, ']')
}

// AppendJobPage appends take's answer, wire.JobPage without a cursor.
func AppendJobPage(dst []byte, jobs []engine.Job) []byte {
	dst = append(dst, `{"jobs":`...)
	dst = AppendJobs(dst, jobs)
	return append(dst, '}')
}

// AppendAck appends an ack's answer (wire.AckAnswer); with take it is
// wire.AckTakeAnswer, whose jobs are always there.
func AppendAck(dst []byte, r engine.AckResult, take bool, jobs []engine.Job) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"state":`...)
	dst = appendString(dst, r.State)
	dst = appendOptString(dst, `,"next_id":`, r.NextID)
	if take {
		dst = append(dst, `,"jobs":`...)
		dst = AppendJobs(dst, jobs)
	}
	return append(dst, '}')
}

// AppendPut appends a put's answer (wire.PutAnswer).
func AppendPut(dst []byte, r engine.PutResult) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, r.ID)
	dst = append(dst, `,"state":`...)
	dst = appendString(dst, r.State.String())
	dst = append(dst, `,"activate_at":"`...)
	dst = appendTime(dst, r.ActivateAt)
	dst = append(dst, `","duplicate":`...)
	dst = strconv.AppendBool(dst, r.Duplicate)
	return append(dst, '}')
}

func appendOptString(dst []byte, key, s string) []byte {
	if s == "" {
		return dst
	}
	return appendString(append(dst, key...), s)
}

// appendBlob appends `,"NAME":<json>` or `,"NAME_base64":"..."` as Blob
// decides. encoding/json compacts a RawMessage, so the JSON form is
// compacted too (stored JSON normally is already).
func appendBlob(dst []byte, name string, data []byte, isJSON bool) []byte {
	if isJSON {
		if len(data) == 0 {
			dst = append(append(append(dst, `,"`...), name...), `":null`...)
			return dst
		}
		if json.Valid(data) {
			dst = append(append(append(dst, `,"`...), name...), `":`...)
			return AppendCompact(dst, data)
		}
	}
	dst = append(append(append(dst, `,"`...), name...), `_base64":"`...)
	dst = base64.StdEncoding.AppendEncode(dst, data)
	return append(dst, '"')
}

// AppendCompact appends src, which must be valid JSON, without the
// whitespace between tokens: json.Compact's output without its scanner.
func AppendCompact(dst, src []byte) []byte {
	inString, escaped := false, false
	start := 0
	for i, c := range src {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// appendTags appends the tags as encoding/json writes a map: keys sorted.
func appendTags(dst []byte, tags map[string]string) []byte {
	var stack [16]string
	keys := stack[:0]
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, k)
		dst = append(dst, ':')
		dst = appendString(dst, tags[k])
	}
	return append(dst, '}')
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string the way encoding/json does with
// HTML escaping off: the two-character escapes for \b \f \n \r \t " \,
// \u00XX for the other control characters, \ufffd for each byte that is
// not valid UTF-8, and \u2028 and \u2029 escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendTime appends t in wire.TimeLayout (UTC, milliseconds truncated),
// as Time does, without time.Format's layout parsing.
func appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, wire.TimeLayout)
	}
	hour, min, sec := t.Clock()
	msec := t.Nanosecond() / int(time.Millisecond)
	dst = append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+min/10), byte('0'+min%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+msec/100), byte('0'+msec/10%10), byte('0'+msec%10), 'Z')
	return dst
}
