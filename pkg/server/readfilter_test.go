package server_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// TestReadFiltersNameWhatTheTokenMayRead: a read route's ?application= or
// ?environment= that names what the token may read nowhere is a 403, as
// naming both is — not a 200 with nothing in it, which DORA answered as
// zero deploys and no failures of an application the token may not see.
// The answer depends on the token's rules only: an application that has
// deploys and one that never existed are refused with the same words.
// What the token may read somewhere is answered, cut to what it may read.
func TestReadFiltersNameWhatTheTokenMayRead(t *testing.T) {
	t.Parallel()
	tokens := []auth.TokenConfig{{Name: "stg", SHA256: auth.HashToken("stg-token")}}
	rules := []auth.RBACRule{{Subjects: []string{"token:stg"}, Permissions: []string{"deployment.read"},
		Applications: []string{"billing"}, Environments: []string{"staging"}}}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules)
	admin := api.NewClient(srv.URL, "admin-token", nil)
	art := artifactFile(t)
	ctx := context.Background()
	// web/prod has a finished deploy the token may not read.
	res, err := admin.Submit(ctx, []byte(strings.Replace(string(simple(art, "prod", "1", "")), "application: billing", "application: web", 1)), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, admin, res.ID, manent.StateSuccess)

	routes := []string{"/api/v1/metrics/dora", "/api/v1/deployments", "/api/v1/activity", "/api/v1/inventory", "/api/v1/schedules", "/api/v1/events"}
	for _, route := range routes {
		for _, tt := range []struct {
			query  string
			status int
			want   string
		}{
			{"?application=web", 403, "token:stg may not deployment.read on web/*"},
			{"?application=nosuch", 403, "token:stg may not deployment.read on nosuch/*"},
			{"?environment=prod", 403, "token:stg may not deployment.read on */prod"},
			{"?application=web&environment=prod", 403, "token:stg may not deployment.read on web/prod"},
			{"?application=billing&environment=prod", 403, "token:stg may not deployment.read on billing/prod"},
			{"?application=billing", 200, ""},
			{"?environment=staging", 200, ""},
			{"?application=billing&environment=staging", 200, ""},
		} {
			if route == "/api/v1/events" && tt.status == 200 {
				continue // a stream: its refusals are what is checked here
			}
			status, body, h := do(t, http.MethodGet, srv.URL+route+tt.query, "stg-token", "")
			if status != tt.status {
				t.Errorf("%s%s: %d %.300s, want %d", route, tt.query, status, body, tt.status)
				continue
			}
			if tt.status == 200 {
				if strings.Contains(string(body), "web") || strings.Contains(string(body), "prod") {
					t.Errorf("%s%s: %.300s shows what the token may not read", route, tt.query, body)
				}
				continue
			}
			if ct := h.Get("Content-Type"); ct != api.ProblemContentType {
				t.Errorf("%s%s: Content-Type %q, want problem+json", route, tt.query, ct)
			}
			if p := problem(t, body); p.Detail != tt.want || p.Status != tt.status {
				t.Errorf("%s%s: %+v, want %d %q", route, tt.query, p, tt.status, tt.want)
			}
		}
		// The admin reads web wherever it is.
		if route != "/api/v1/events" {
			if status, body, _ := do(t, http.MethodGet, srv.URL+route+"?application=web", "admin-token", ""); status != 200 {
				t.Errorf("%s?application=web as admin: %d %.300s", route, status, body)
			}
		}
	}
}

// TestCancelBodyIsNothingOrEmptyObject: a cancel defines no body; `{}`
// (what a client that always sends JSON sends) cancels as no body does.
// Anything else is refused before anything is cancelled
// (TestHostileVerdicts).
func TestCancelBodyIsNothingOrEmptyObject(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	admin := api.NewClient(srv.URL, "admin-token", nil)
	id, gate := startGated(t, admin, gatedStaging)
	status, body, _ := do(t, http.MethodPost, srv.URL+"/api/v1/deployments/"+id+"/cancel", "admin-token", "{ }")
	if status != http.StatusAccepted {
		t.Fatalf("cancel with {}: %d %.300s, want 202", status, body)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, admin, id, manent.StateCancelled)
}
