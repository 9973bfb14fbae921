package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// GET …/logs answers a page at a time — at most api.MaxLogPage lines and
// about api.MaxLogPageBytes of text — with next_after while the log goes
// on, so a long log costs a bounded answer; paging through it gives every
// line once, in order.
func TestLogsArePaged(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	res, err := c.Submit(ctx, simple(artifactFile(t), "staging", "1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, res.ID, manent.StateSuccess)
	before, err := c.LogsPage(ctx, res.ID, 0, 0)
	if err != nil || before.NextAfter != 0 || len(before.Lines) == 0 {
		t.Fatalf("a short log: %d lines, next_after %d, %v; want it whole", len(before.Lines), before.NextAfter, err)
	}
	// 25,000 short lines, then 300 of 16 KiB (4.7 MiB).
	now := time.Now()
	var short, long []store.LogEntry
	for i := 0; i < 25_000; i++ {
		short = append(short, store.LogEntry{Time: now, Text: fmt.Sprintf("short %d", i)})
	}
	for i := 0; i < 300; i++ {
		long = append(long, store.LogEntry{Time: now, Text: fmt.Sprintf("long %d ", i) + strings.Repeat("x", 16<<10)})
	}
	if err := srv.Store.AppendLog(ctx, res.ID, "extra", short); err != nil {
		t.Fatal(err)
	}
	if err := srv.Store.AppendLog(ctx, res.ID, "extra", long); err != nil {
		t.Fatal(err)
	}
	total := len(before.Lines) + len(short) + len(long)

	first, err := c.LogsPage(ctx, res.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(first.Lines) != api.MaxLogPage || first.NextAfter != first.Lines[len(first.Lines)-1].Seq {
		t.Fatalf("first page: %d lines, next_after %d; want %d and the last line's seq", len(first.Lines), first.NextAfter, api.MaxLogPage)
	}
	var seen []manent.LogLine
	var after int64
	pages := 0
	for {
		p, err := c.LogsPage(ctx, res.ID, after, 0)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		size := 0
		for _, l := range p.Lines {
			size += len(l.Text)
		}
		if size > api.MaxLogPageBytes {
			t.Fatalf("page %d holds %d bytes of text, more than %d", pages, size, api.MaxLogPageBytes)
		}
		seen = append(seen, p.Lines...)
		if p.NextAfter == 0 {
			break
		}
		after = p.NextAfter
		if pages > 20 {
			t.Fatal("more than 20 pages")
		}
	}
	if len(seen) != total {
		t.Fatalf("%d lines over %d pages, want %d", len(seen), pages, total)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i].Seq <= seen[i-1].Seq {
			t.Fatalf("line %d: seq %d after %d", i, seen[i].Seq, seen[i-1].Seq)
		}
	}
	// 10,000 + 10,000 + the rest of the short lines and about 250 long
	// ones + the last long ones.
	if pages != 4 {
		t.Errorf("%d pages, want 4 (two full, one cut by its bytes, the rest)", pages)
	}
	all, err := c.Logs(ctx, res.ID)
	if err != nil || len(all.Lines) != total || all.NextAfter != 0 {
		t.Fatalf("Logs: %d lines, next_after %d, %v; want all %d", len(all.Lines), all.NextAfter, err, total)
	}
	small, err := c.LogsPage(ctx, res.ID, 0, 3)
	if err != nil || len(small.Lines) != 3 || small.NextAfter != small.Lines[2].Seq {
		t.Fatalf("limit=3: %d lines, next_after %d, %v", len(small.Lines), small.NextAfter, err)
	}
	for _, bad := range []string{"0", "10001", "x"} {
		code, body, h := do(t, http.MethodGet, srv.URL+"/api/v1/deployments/"+res.ID+"/logs?limit="+bad, "admin-token", "")
		if code != http.StatusBadRequest && code != http.StatusUnprocessableEntity || !strings.Contains(string(body), "limit must be a number from 1 to 10000") ||
			!strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") {
			t.Errorf("limit=%s: %d %s", bad, code, body)
		}
	}
}

// A deploy whose log retention removed (retention.logs, or
// retention.deploys on its way: a crash may leave part of it) says so:
// GET …/logs answers logs_removed_from, so that an empty or partial log
// never reads as the deploy's whole log.
func TestLogsSayRetentionRemovedThem(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	res, err := c.Submit(ctx, simple(artifactFile(t), "staging", "1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, res.ID, manent.StateSuccess)
	if got, err := c.Logs(ctx, res.ID); err != nil || got.LogsRemovedFrom != nil || len(got.Lines) == 0 {
		t.Fatalf("a whole log: %d lines, removed from %v, %v", len(got.Lines), got.LogsRemovedFrom, err)
	}
	if n, err := srv.Store.PruneLogs(ctx, time.Now().Add(time.Hour), 100); err != nil || n != 1 {
		t.Fatalf("PruneLogs: %d, %v", n, err)
	}
	got, err := c.Logs(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LogsRemovedFrom == nil || len(got.Lines) != 0 {
		t.Fatalf("a log retention removed: %d lines, logs_removed_from %v; want none and when", len(got.Lines), got.LogsRemovedFrom)
	}
	// The deploy's own answer says it too (manent status, the web page,
	// logs -f read it there), at the same time; a whole log's does not.
	code, body, _ := do(t, http.MethodGet, srv.URL+"/api/v1/deployments/"+res.ID, "admin-token", "")
	var d struct {
		LogsRemovedFrom *time.Time `json:"logs_removed_from"`
	}
	if err := json.Unmarshal(body, &d); code != http.StatusOK || err != nil || d.LogsRemovedFrom == nil || !d.LogsRemovedFrom.Equal(*got.LogsRemovedFrom) {
		t.Fatalf("GET the deploy after retention: %d %s; want logs_removed_from %v", code, body, got.LogsRemovedFrom)
	}
	other, err := c.Submit(ctx, simple(artifactFile(t), "staging", "2", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, other.ID, manent.StateSuccess)
	if _, body, _ := do(t, http.MethodGet, srv.URL+"/api/v1/deployments/"+other.ID, "admin-token", ""); strings.Contains(string(body), "logs_removed_from") {
		t.Fatalf("a whole log's deploy: %s", body)
	}
}
