package cli_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// A schedule tick a later tick superseded: `manent wait` fails (exit 1)
// saying "superseded by <id>", and `manent status` shows it; a plain
// cancel still says "cancelled".
func TestWaitSuperseded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	deploys := map[string]manent.Deployment{
		"sch_1@2026-12-04T02:00:00Z": {ID: "sch_1@2026-12-04T02:00:00Z", Application: "web", Environment: "prod", Version: "1",
			State: manent.StateCancelled, CreatedAt: now, FinishedAt: &now, Error: "superseded by sch_1@2026-12-04T03:00:00Z"},
		"dpl_1": {ID: "dpl_1", Application: "web", Environment: "prod", Version: "1",
			State: manent.StateCancelled, CreatedAt: now, FinishedAt: &now, Error: "cancelled"},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/deployments/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, ok := deploys[r.PathValue("id")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(d)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	env := map[string]string{"MANENT_SERVER": s.URL, "MANENT_TOKEN": "t"}

	code, stdout, stderr := runCLI(t, env, "wait", "sch_1@2026-12-04T02:00:00Z", "--timeout", "10s")
	if code != 1 || !strings.Contains(stderr, "Error: superseded by sch_1@2026-12-04T03:00:00Z\n") {
		t.Errorf("wait on a superseded tick: exit %d\nstdout %q\nstderr %q\nwant exit 1 and \"superseded by\"", code, stdout, stderr)
	}
	if _, stdout, _ := runCLI(t, env, "status", "sch_1@2026-12-04T02:00:00Z"); !strings.Contains(stdout, "superseded by sch_1@2026-12-04T03:00:00Z") {
		t.Errorf("status of a superseded tick:\n%s", stdout)
	}
	code, _, stderr = runCLI(t, env, "wait", "dpl_1", "--timeout", "10s")
	if code != 1 || !strings.Contains(stderr, "Error: cancelled\n") || strings.Contains(stderr, "superseded") {
		t.Errorf("wait on a cancelled deploy: exit %d, stderr %q", code, stderr)
	}
}
