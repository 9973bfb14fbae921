package store

import (
	"context"
	"errors"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Fault is a storage failure that is not the caller's fault and not a bug:
// the database is busy or locked, the disk is full, the database cannot be
// reached. Callers answer 503 with Retry-After, and retry later.
type Fault struct {
	// Reason is what a person reads: "the database is busy", …
	Reason string
	// RetryAfter is how long to wait before trying again.
	RetryAfter time.Duration
	Err        error
}

func (f *Fault) Error() string { return f.Reason + ": " + f.Err.Error() }
func (f *Fault) Unwrap() error { return f.Err }

// AsFault classifies err: a *Fault when it is a storage fault (busy or
// locked database, disk full, database unreachable), nil otherwise.
func AsFault(err error) *Fault {
	if err == nil || errors.Is(err, context.Canceled) {
		return nil
	}
	var f *Fault
	if errors.As(err, &f) {
		return f
	}
	busy := &Fault{Reason: "the database is busy", RetryAfter: time.Second, Err: err}
	full := &Fault{Reason: "the database's disk is full", RetryAfter: 30 * time.Second, Err: err}
	down := &Fault{Reason: "the database cannot be reached", RetryAfter: 5 * time.Second, Err: err}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
			return busy
		case sqlite3.SQLITE_FULL:
			return full
		case sqlite3.SQLITE_IOERR, sqlite3.SQLITE_CANTOPEN:
			return down
		}
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "53100": // disk_full
			return full
		case strings.HasPrefix(pe.Code, "57P"): // admin or crash shutdown, starting up: a restart, pg_terminate_backend
			return down
		case strings.HasPrefix(pe.Code, "53"), // insufficient resources
			pe.Code == "55P03", pe.Code == "40001", pe.Code == "40P01": // lock_not_available, serialization_failure, deadlock
			return busy
		case strings.HasPrefix(pe.Code, "08"): // connection exception
			return down
		}
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) || errors.Is(err, syscall.ECONNREFUSED) {
		return down
	}
	// A connection lost under a query (a restart, a failover, a pooler or
	// pg_terminate_backend closing it): the next one may well work.
	if errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNABORTED) {
		return down
	}
	if errors.Is(err, syscall.ENOSPC) {
		return full
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return busy
	}
	// Errors that crossed a library boundary as text (DBOS wraps some).
	msg := strings.ToLower(err.Error())
	switch {
	case strings.Contains(msg, "database is locked"), strings.Contains(msg, "sqlite_busy"), strings.Contains(msg, "database table is locked"):
		return busy
	case strings.Contains(msg, "database or disk is full"), strings.Contains(msg, "no space left on device"), strings.Contains(msg, "sqlite_full"):
		return full
	case strings.HasSuffix(msg, ": conn closed"), strings.Contains(msg, "connection reset by peer"), strings.Contains(msg, "broken pipe"):
		return down
	}
	return nil
}
