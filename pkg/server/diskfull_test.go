package server_test

import (
	"context"
	"database/sql"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A full disk is a 503 with Retry-After for a submission, never a 500, and
// /readyz fails while it lasts (SPEC §11.1), although the probe's one-row
// update still fits in the WAL's frames of earlier writes. The database
// lives on a real tmpfs of 8 MiB, filled to the last byte; mounting one
// needs root (CAP_SYS_ADMIN), so the test is skipped without it.
func TestFullDiskIs503(t *testing.T) {
	t.Parallel()
	fs := enginetest.SmallDisk(t, "8m")
	srv := newTestServer(t, "sqlite:"+filepath.Join(fs, "manent.db"), nil, nil)
	if status, body, _ := do(t, "GET", srv.URL+"/readyz", "", ""); status != http.StatusOK {
		t.Fatalf("readyz before the disk is full: %d %s", status, body)
	}
	// Deploys first, as on a server that has been working: the WAL has
	// frames a small write can reuse once the disk is full.
	admin := api.NewClient(srv.URL, "admin-token", nil)
	art := artifactFile(t)
	for _, v := range []string{"1", "2", "3"} {
		res, err := admin.Submit(context.Background(), simple(art, "staging", v, ""), false)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, admin, res.ID, manent.StateSuccess)
	}
	// …and a checkpoint has copied them into the database: the next
	// write starts the WAL over, in the room it already has.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(fs, "manent.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var busy, frames, done int
	if err := db.QueryRow(`PRAGMA wal_checkpoint(RESTART)`).Scan(&busy, &frames, &done); err != nil || busy != 0 {
		t.Fatalf("checkpoint: %v (busy %d, %d of %d frames)", err, busy, done, frames)
	}
	fill := filepath.Join(fs, "fill")
	enginetest.FillDisk(t, fill).Close()

	status, body, h := do(t, "GET", srv.URL+"/readyz", "", "")
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "30" || !strings.Contains(string(body), "disk is full") {
		t.Fatalf("readyz with the disk full: %d %v %s, want 503 with Retry-After 30", status, h, body)
	}
	// The first submission is refused, as /readyz says, although the WAL
	// still has room for it: accepted, it failed at its artifacts step.
	status, body, h = do(t, "POST", srv.URL+"/api/v1/deployments", "admin-token", string(simple(art, "staging", "4", "")))
	if status != http.StatusServiceUnavailable || h.Get("Retry-After") != "30" || !strings.Contains(string(body), "disk is full") {
		t.Fatalf("submit with the disk full: %d %v %s, want 503 with Retry-After 30", status, h, body)
	}
	list, err := admin.List(context.Background(), api.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 3 {
		t.Fatalf("%d deploys after a refused submission, want the 3 submitted before the disk was full", len(list.Items))
	}

	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 10*time.Second, func() bool {
		status, _, _ := do(t, "GET", srv.URL+"/readyz", "", "")
		return status == http.StatusOK
	}, "readyz to recover once there is room again")
}
