package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A request cancelled under the handler (the server stopping) is a 503
// the client may retry, not a 500; a cancellation the request did not see
// stays an internal error.
func TestWriteErrorCancelledRequest(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodGet, "/api/v1/deployments/x", nil).WithContext(ctx)
	w := httptest.NewRecorder()
	writeError(w, r, slog.New(slog.DiscardHandler), fmt.Errorf("status: %w", context.Canceled))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" || !strings.Contains(w.Body.String(), "cancelled") {
		t.Fatalf("cancelled request: %d %v %s, want 503 with Retry-After", w.Code, w.Header(), w.Body)
	}
	w = httptest.NewRecorder()
	writeError(w, httptest.NewRequest(http.MethodGet, "/", nil), slog.New(slog.DiscardHandler), context.Canceled)
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("a cancellation of something else: %d, want 500", w.Code)
	}
}

// A call refused because of a storage fault is audited with the fault's
// reason, as the caller was told (503), not as "internal error".
func TestRefusalNamesStorageFaults(t *testing.T) {
	busy := fmt.Errorf("cancel: %w", &store.Fault{Reason: "the database is busy", RetryAfter: time.Second, Err: errors.New("database is locked")})
	for _, tt := range []struct {
		err  error
		want string
	}{
		{busy, "the database is busy"},
		{manent.Errorf(manent.EConflict, "deploy dpl_x is already final"), "deploy dpl_x is already final"},
		{errors.New("boom"), "internal error"},
	} {
		if got := refusal(tt.err); got != tt.want {
			t.Errorf("refusal(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
