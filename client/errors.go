package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is an answer the server refused: its HTTP status and the code and
// message of docs/api.md's error body.
type Error struct {
	Status  int    // HTTP status, e.g. 409
	Code    string // docs/api.md's snake_case code, e.g. "conflict"
	Message string // human text; for bad_request it starts with the field
	// RetryAfter is the server's Retry-After (503), zero when absent.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	switch {
	case e.Code != "" && e.Message != "":
		return e.Code + ": " + e.Message
	case e.Code != "":
		return e.Code
	case e.Message != "":
		return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("HTTP %d %s", e.Status, http.StatusText(e.Status))
}

// Is makes errors.Is(err, ErrConflict) and the like work. A target matches
// when its Code (if set) and its Status (if set) equal e's, so ErrNotFound
// matches every 404 and ErrJobNotFound only job_not_found.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	if !ok || (t.Code == "" && t.Status == 0) {
		return false
	}
	return (t.Code == "" || t.Code == e.Code) && (t.Status == 0 || t.Status == e.Status)
}

// Sentinels for errors.Is. They are matched by status and/or code, never by
// identity, so compare with errors.Is, not ==.
var (
	ErrBadRequest         = &Error{Status: http.StatusBadRequest, Message: "bad request"}
	ErrUnauthorized       = &Error{Status: http.StatusUnauthorized, Message: "unauthorized"}
	ErrForbidden          = &Error{Status: http.StatusForbidden, Message: "forbidden"}
	ErrNotFound           = &Error{Status: http.StatusNotFound, Message: "not found"}
	ErrNamespaceNotFound  = &Error{Code: "namespace_not_found", Message: "namespace not found"}
	ErrQueueNotFound      = &Error{Code: "queue_not_found", Message: "queue not found"}
	ErrJobNotFound        = &Error{Code: "job_not_found", Message: "job not found"}
	ErrConflict           = &Error{Status: http.StatusConflict, Message: "conflict"}
	ErrPayloadTooLarge    = &Error{Status: http.StatusRequestEntityTooLarge, Message: "payload too large"}
	ErrQueueFull          = &Error{Code: "queue_full", Message: "queue full"}
	ErrUnavailable        = &Error{Status: http.StatusServiceUnavailable, Message: "unavailable"}
	ErrWaitTimeout        = errors.New("chronoq: the wait ended before the job completed")
	errNoFilter           = errors.New("chronoq: give at least one filter (state, key or tag)")
	errPayloadAmbiguous   = errors.New("chronoq: give either Payload or PayloadBytes, not both")
	errExclusiveDelayAt   = errors.New("chronoq: Delay and At are exclusive")
	errRespawnLimitAndIDs = errors.New("chronoq: Limit and IDs are exclusive")
)

// codeOfStatus fills in a code when an error answer did not come from
// chronoq itself (a proxy's HTML page, an empty 502).
var codeOfStatus = map[int]string{
	http.StatusBadRequest:            "bad_request",
	http.StatusUnauthorized:          "unauthorized",
	http.StatusForbidden:             "forbidden",
	http.StatusNotFound:              "not_found",
	http.StatusConflict:              "conflict",
	http.StatusRequestEntityTooLarge: "payload_too_large",
	http.StatusServiceUnavailable:    "unavailable",
}

func newError(res *http.Response, raw []byte) *Error {
	e := &Error{Status: res.StatusCode}
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &body) == nil && body.Error != nil {
		e.Code, e.Message = body.Error.Code, body.Error.Message
	} else {
		e.Code = codeOfStatus[res.StatusCode]
		msg := strings.TrimSpace(string(raw[:min(len(raw), 512)]))
		if msg == "" {
			msg = http.StatusText(res.StatusCode)
		}
		e.Message = msg
	}
	if ra := res.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}
