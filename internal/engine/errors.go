package engine

import (
	"errors"
	"fmt"
)

// Code classifies an error the way docs/api.md's error codes do; protocol
// packages map codes to their own wire errors.
type Code string

const (
	CodeBadRequest        Code = "bad_request"
	CodeNamespaceNotFound Code = "namespace_not_found"
	CodeQueueNotFound     Code = "queue_not_found"
	CodeJobNotFound       Code = "job_not_found"
	CodeConflict          Code = "conflict"
	CodePayloadTooLarge   Code = "payload_too_large"
	CodeQueueFull         Code = "queue_full"
	CodeUnavailable       Code = "unavailable"
	CodeForbidden         Code = "forbidden"
)

// Error is every error the engine returns for a rejected call. Field names
// the offending input (dotted path, e.g. "jobs[3].delay") when there is one.
// A rejected call never changes state.
type Error struct {
	Code    Code
	Field   string
	Message string
}

func (e *Error) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Message
	}
	return e.Message
}

// Is lets errors.Is(err, &Error{Code: X}) match on the code alone.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Field == "" && t.Message == ""
}

// CodeOf returns the code of an engine error, or "" for any other error.
func CodeOf(err error) Code {
	if err == nil {
		return "" // before e, which escapes to errors.As: no allocation on success
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func badf(field, format string, args ...any) *Error {
	return &Error{Code: CodeBadRequest, Field: field, Message: fmt.Sprintf(format, args...)}
}

func errf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// prefixField nests a field error under a parent path: jobs[3] + delay →
// jobs[3].delay. Non-field errors pass through unchanged.
func prefixField(err error, parent string) error {
	var e *Error
	if !errors.As(err, &e) || parent == "" {
		return err
	}
	c := *e
	if c.Field == "" {
		c.Field = parent
	} else {
		c.Field = parent + "." + c.Field
	}
	return &c
}
