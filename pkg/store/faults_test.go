package store_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/manent-io/manent/pkg/store"
)

func TestAsFault(t *testing.T) {
	tests := []struct {
		name   string
		err    error
		reason string // "" for not a fault
	}{
		{"nil", nil, ""},
		{"not found", store.ErrNotFound, ""},
		{"cancelled", context.Canceled, ""},
		{"a bug", errors.New("syntax error near SELEKT"), ""},
		{"sqlite busy, as text through DBOS", fmt.Errorf("enqueue: %w", errors.New("database is locked (5) (SQLITE_BUSY)")), "busy"},
		{"sqlite full, as text", errors.New("database or disk is full (13)"), "full"},
		{"ENOSPC", fmt.Errorf("write wal: %w", syscall.ENOSPC), "full"},
		{"postgres disk full", &pgconn.PgError{Code: "53100"}, "full"},
		{"postgres too many connections", &pgconn.PgError{Code: "53300"}, "busy"},
		{"postgres serialization", &pgconn.PgError{Code: "40001"}, "busy"},
		{"postgres admin shutdown (a restart, pg_terminate_backend)", &pgconn.PgError{Code: "57P01"}, "reached"},
		{"postgres starting up", &pgconn.PgError{Code: "57P03"}, "reached"},
		{"postgres query cancelled by the server", &pgconn.PgError{Code: "57014"}, ""},
		{"connection lost mid-query", fmt.Errorf("list: %w", io.ErrUnexpectedEOF), "reached"},
		{"pool connection closed", fmt.Errorf("begin: %w", pgconn.ErrConnClosed), "reached"},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), "reached"},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), "reached"},
		{"conn closed, as text through DBOS", errors.New("failed to enqueue: begin: conn closed"), "reached"},
		{"postgres unique violation", &pgconn.PgError{Code: "23505"}, ""},
		{"connection refused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), "reached"},
		{"deadline", context.DeadlineExceeded, "busy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := store.AsFault(tt.err)
			switch {
			case tt.reason == "" && f != nil:
				t.Fatalf("%v classified as a fault: %v", tt.err, f)
			case tt.reason != "" && f == nil:
				t.Fatalf("%v not classified as a fault", tt.err)
			case f != nil && (f.RetryAfter < time.Second || !strings.Contains(f.Reason, tt.reason)):
				t.Fatalf("%v: reason %q retry after %s", tt.err, f.Reason, f.RetryAfter)
			}
		})
	}
}
