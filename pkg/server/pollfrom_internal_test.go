package server

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/store"
)

// A poll that cannot read the store leaves the global streams' window
// where it was: the next poll looks back to the last one that read, so a
// deploy another worker created while this one could not reach the
// database is not missed. The window moved on with every poll, read or
// not, and a partition longer than pollSlack lost those deploys' first
// events.
func TestFailedPollKeepsTheWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, enginetest.SQLite(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	h := newHub(st, slog.New(slog.NewTextHandler(io.Discard, nil)))
	last := time.Now().Add(-time.Minute)
	if got := h.pollFrom(ctx, nil, true, last); !got.After(last) {
		t.Fatalf("a poll that read the store returned %v, want a time after %v", got, last)
	}
	st.Close()
	if got := h.pollFrom(ctx, nil, true, last); !got.Equal(last) {
		t.Fatalf("a poll that could not read the store moved the window to %v, want it kept at %v", got, last)
	}
}
