package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
)

// The answer shapes are package wire's; internal/api/wireenc fills them.

// writeJSON encodes into a buffer first so that an encoding failure can
// still become a clean 500 instead of a truncated 200. HTML escaping is off:
// payloads must come back byte for byte as they were stored, and the
// default encoder would rewrite <, > and & inside them.
func writeJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		status = http.StatusInternalServerError
		buf.Reset()
		buf.WriteString(`{"error":{"code":"internal","message":"internal error"}}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// answerBufs holds the buffers of writeEncoded; a buffer grown past
// maxPooledAnswer (a large take) is not kept.
var answerBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

const maxPooledAnswer = 64 << 10

// contentTypeJSON is the hot routes' Content-Type header value, shared by
// their answers: Header.Set makes a new slice for it on every request.
// net/http only reads it (an Add would append to a copy, its capacity
// being 1).
var contentTypeJSON = []string{"application/json"}

// writeEncoded writes the answer that enc appends: the hot routes' answers,
// which internal/api/wireenc writes byte for byte as writeJSON would
// (newline included) without reflection.
func writeEncoded(w http.ResponseWriter, status int, enc func([]byte) []byte) {
	bp := answerBufs.Get().(*[]byte)
	b := append(enc((*bp)[:0]), '\n')
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
	if cap(b) <= maxPooledAnswer {
		*bp = b[:0]
		answerBufs.Put(bp)
	}
}
