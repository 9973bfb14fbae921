package manent

import (
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// Code classifies a domain error. The HTTP layer maps codes to statuses and
// the CLI maps them to exit codes.
type Code string

// Error codes.
const (
	EInvalid         Code = "invalid"           // the input is wrong: 422
	EUnauthorized    Code = "unauthorized"      // no or bad credentials: 401
	EForbidden       Code = "forbidden"         // authenticated, not allowed: 403
	ENotFound        Code = "not_found"         // 404
	EConflict        Code = "conflict"          // the current state forbids it: 409
	ETooLarge        Code = "too_large"         // 413
	ETooSlow         Code = "too_slow"          // the request did not arrive in time: 408
	ETooManyRequests Code = "too_many_requests" // 429
	EUnavailable     Code = "unavailable"       // a dependency is down: 503
	EInternal        Code = "internal"          // 500
)

// FieldError is one problem with a named part of the input.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// Error is the one domain error: a code, a message a person understands,
// optional field errors and an optional cause.
type Error struct {
	Code    Code
	Message string
	Fields  []FieldError
	Err     error
	// RetryAfter, on an EUnavailable or ETooManyRequests error, is when to
	// try again: the HTTP layer answers it as Retry-After (0: not said).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return e.Err.Error()
	}
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is matches another *Error by code, so errors.Is(err, &Error{Code: ENotFound}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == ""
}

// Errorf builds an *Error with a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EInternal
// for any other non-nil error, and "" for nil.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EInternal
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic message for other errors (which must not leak internals).
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Error()
	}
	return "internal error"
}

// Plural says a count with its noun for a message: "1 deploy", "0
// deploys", "2 approvals" — never "deploy(s)". noun is the singular of a
// noun whose plural takes an "s".
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// ClipText cuts s to at most max bytes, at a rune boundary, marking the
// cut with "…": for text of a request quoted in an error, so a 1 MiB value
// is refused with a message of a line.
func ClipText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
