package server_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
)

// seeded is one deploy of the DORA golden history: it finished `ago`
// before now, with a source block committed `lead` before it finished
// (none when 0).
type seeded struct {
	app, env string
	state    manent.State
	ago      time.Duration
	lead     time.Duration
}

const day = 24 * time.Hour

// doraHistory pins each figure: a deploy before the window, failures
// restored by a later success, one failure not restored, deploys that did
// not run (CANCELLED, REJECTED), a success without a source block, an
// environment with no failure and one with nothing in the window.
var doraHistory = []seeded{
	{"billing", "prod", manent.StateSuccess, 40 * day, day},                          // before 30d
	{"billing", "prod", manent.StateSuccess, 20 * day, time.Hour},                    // lead 3600
	{"billing", "prod", manent.StateError, 10 * day, 0},                              // restored after 1800
	{"billing", "prod", manent.StateError, 10*day - 10*time.Minute, 0},               // restored after 1200
	{"billing", "prod", manent.StateSuccess, 10*day - 30*time.Minute, 2 * time.Hour}, // lead 7200
	{"billing", "prod", manent.StateCancelled, 2 * day, 0},                           // did not run
	{"billing", "prod", manent.StateSuccess, day, 0},                                 // no source: no lead sample
	{"billing", "prod", manent.StateMaxRecoveryAttemptsExceeded, 12 * time.Hour, 0},  // failed, not restored
	{"billing", "staging", manent.StateSuccess, 5 * day, time.Minute},                // lead 60
	{"billing", "staging", manent.StateRejected, 4 * day, 0},
	{"web", "prod", manent.StateSuccess, 40 * day, 0},
}

func seedDORA(t *testing.T, st *store.Store, now time.Time) {
	t.Helper()
	ctx := context.Background()
	for i, s := range doraHistory {
		fin := now.Add(-s.ago)
		rec := &store.Record{Deployment: manent.Deployment{ID: manent.NewDeploymentID(), Application: s.app, Environment: s.env,
			Version: "v" + string(rune('a'+i)), State: manent.StateEnqueued, Requester: "token:seed", CreatedAt: fin.Add(-time.Minute)},
			Input: json.RawMessage(`{}`)}
		if s.lead > 0 {
			at := fin.Add(-s.lead)
			rec.CommittedAt = &at
		}
		err := st.Tx(ctx, func(tx *sql.Tx) error {
			if err := st.InsertDeployment(ctx, tx, rec); err != nil {
				return err
			}
			_, err := st.FinishTx(ctx, tx, rec.ID, store.Outcome{State: s.state, At: fin})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// TestDORAGolden pins the four figures of GET /api/v1/metrics/dora over a
// seeded history, on SQLite and PostgreSQL.
func TestDORAGolden(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		tokens := []auth.TokenConfig{{Name: "stg", SHA256: auth.HashToken("stg-token")}}
		rules := []auth.RBACRule{{Subjects: []string{"token:stg"}, Permissions: []string{"deployment.read"},
			Applications: []string{"billing"}, Environments: []string{"staging"}}}
		ts := newTestServer(t, db, tokens, rules)
		seedDORA(t, ts.Store, time.Now())
		cases := []struct {
			name, query, token, want string
		}{
			{"prod 30d", "?application=billing&environment=prod", "admin-token", `{"window":"30d","application":"billing","environment":"prod",
				"deployment_frequency":{"deploys":6,"per_day":0.2},
				"lead_time_seconds":{"median":5400,"p90":7200,"samples":2},
				"change_failure_rate":{"failed":3,"total":6,"rate":0.5},
				"time_to_restore_seconds":{"median":1500,"samples":2}}`},
			{"prod 7d: empty samples are null", "?application=billing&environment=prod&window=7d", "admin-token", `{"window":"7d","application":"billing","environment":"prod",
				"deployment_frequency":{"deploys":2,"per_day":0.286},
				"lead_time_seconds":{"median":null,"p90":null,"samples":0},
				"change_failure_rate":{"failed":1,"total":2,"rate":0.5},
				"time_to_restore_seconds":{"median":null,"samples":0}}`},
			{"prod 36h", "?application=billing&environment=prod&window=36h", "admin-token", `{"window":"36h","application":"billing","environment":"prod",
				"deployment_frequency":{"deploys":2,"per_day":1.333},
				"lead_time_seconds":{"median":null,"p90":null,"samples":0},
				"change_failure_rate":{"failed":1,"total":2,"rate":0.5},
				"time_to_restore_seconds":{"median":null,"samples":0}}`},
			{"no failure: rate 0", "?application=billing&environment=staging", "admin-token", `{"window":"30d","application":"billing","environment":"staging",
				"deployment_frequency":{"deploys":1,"per_day":0.033},
				"lead_time_seconds":{"median":60,"p90":60,"samples":1},
				"change_failure_rate":{"failed":0,"total":1,"rate":0},
				"time_to_restore_seconds":{"median":null,"samples":0}}`},
			{"nothing in the window", "?application=web&environment=prod", "admin-token", `{"window":"30d","application":"web","environment":"prod",
				"deployment_frequency":{"deploys":0,"per_day":0},
				"lead_time_seconds":{"median":null,"p90":null,"samples":0},
				"change_failure_rate":{"failed":0,"total":0,"rate":null},
				"time_to_restore_seconds":{"median":null,"samples":0}}`},
			{"everything", "", "admin-token", `{"window":"30d","application":"","environment":"",
				"deployment_frequency":{"deploys":7,"per_day":0.233},
				"lead_time_seconds":{"median":3600,"p90":7200,"samples":3},
				"change_failure_rate":{"failed":3,"total":7,"rate":0.429},
				"time_to_restore_seconds":{"median":1500,"samples":2}}`},
			{"only what the caller may read", "?application=billing", "stg-token", `{"window":"30d","application":"billing","environment":"",
				"deployment_frequency":{"deploys":1,"per_day":0.033},
				"lead_time_seconds":{"median":60,"p90":60,"samples":1},
				"change_failure_rate":{"failed":0,"total":1,"rate":0},
				"time_to_restore_seconds":{"median":null,"samples":0}}`},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				code, body, h := do(t, http.MethodGet, ts.URL+"/api/v1/metrics/dora"+c.query, c.token, "")
				if code != http.StatusOK {
					t.Fatalf("status %d: %s", code, body)
				}
				if ct := h.Get("Content-Type"); ct != "application/json" {
					t.Errorf("content type %q", ct)
				}
				var got, want any
				if err := json.Unmarshal(body, &got); err != nil {
					t.Fatal(err)
				}
				if err := json.Unmarshal([]byte(c.want), &want); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("got  %s\nwant %s", body, c.want)
				}
			})
		}
		// Errors are problem+json: a bad window, reading where one may not.
		for _, c := range []struct {
			query, token string
			status       int
		}{
			{"?window=30", "admin-token", http.StatusUnprocessableEntity},
			{"?window=0d", "admin-token", http.StatusUnprocessableEntity},
			{"?window=99999w", "admin-token", http.StatusUnprocessableEntity},
			{"?window=-1d", "admin-token", http.StatusUnprocessableEntity},
			{"?window=1.5d", "admin-token", http.StatusUnprocessableEntity},
			{"?window=10000d", "admin-token", http.StatusUnprocessableEntity},
			// A filter no descriptor may match is no environment without deploys.
			{"?application=Billing", "admin-token", http.StatusUnprocessableEntity},
			{"?application=billing&environment=prod%20eu", "admin-token", http.StatusUnprocessableEntity},
			// A line break is no text: refused before any route.
			{"?application=billing&environment=prod%0A", "admin-token", http.StatusBadRequest},
			{"?application=billing&environment=prod", "stg-token", http.StatusForbidden},
			{"", "", http.StatusUnauthorized},
		} {
			code, body, h := do(t, http.MethodGet, ts.URL+"/api/v1/metrics/dora"+c.query, c.token, "")
			if code != c.status || h.Get("Content-Type") != "application/problem+json" {
				t.Errorf("%s as %q: %d %s %s, want %d problem+json", c.query, c.token, code, h.Get("Content-Type"), body, c.status)
			}
		}
	})
}

// A commit time after the deploy's end gives no lead-time sample (it would
// be negative and pull the median below what any deploy took).
func TestDORALeadTimeIgnoresCommitsAfterTheDeploy(t *testing.T) {
	now := time.Now()
	before, after := now.Add(-time.Hour), now.Add(time.Hour)
	got := server.DORA([]store.Finished{
		{ID: "a", Application: "billing", Environment: "prod", State: manent.StateSuccess, FinishedAt: now, CommittedAt: &before},
		{ID: "b", Application: "billing", Environment: "prod", State: manent.StateSuccess, FinishedAt: now, CommittedAt: &after},
	}, 30*day)
	if got.LeadTimeSeconds.Samples != 1 || got.LeadTimeSeconds.Median == nil || *got.LeadTimeSeconds.Median != 3600 {
		t.Fatalf("lead time %+v: want one sample of 3600 s", got.LeadTimeSeconds)
	}
}
