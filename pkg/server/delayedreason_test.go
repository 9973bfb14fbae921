package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A deploy made DELAYED by a release before f5a0be8 has no reason in its
// row (that release wrote none, and its gate sleeps until schedule.at
// without writing one): status and activity derive it from the deploy's
// saved input — where they said nothing until its time came.
func TestDelayedDeployOfAnOlderReleaseSaysWhy(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		c := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		res, err := c.Submit(ctx, simple(artifactFile(t), "prod", "1", fmt.Sprintf("schedule: {at: %q}\n", at.Format(time.RFC3339))), false)
		if err != nil {
			t.Fatal(err)
		}
		want := "schedule.at " + at.Format(time.RFC3339)
		waitFor(t, c, res.ID, manent.StateDelayed)
		// As the older release left it.
		if _, err := srv.Store.DB().ExecContext(ctx, `UPDATE manent_deployments SET reason = '' WHERE id = '`+res.ID+`'`); err != nil {
			t.Fatal(err)
		}
		d, err := c.Deployment(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d.State != manent.StateDelayed || d.Reason != want {
			t.Errorf("status: %s %q, want DELAYED %q", d.State, d.Reason, want)
		}
		act, err := c.Activity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, g := range act.Environments {
			for _, it := range g.Items {
				if it.ID == res.ID {
					found = true
					if it.Reason != want {
						t.Errorf("activity reason %q, want %q", it.Reason, want)
					}
				}
			}
		}
		if !found {
			t.Errorf("activity does not list %s: %+v", res.ID, act)
		}
	})
}

// The same deploy's `state` event, as that release stored it
// ({"state":"DELAYED"}), carries the reason on the deploy's stream and the
// global stream's first states: a follower saw "DELAYED" and nothing after
// it until the deploy's time came.
func TestDelayedStateEventOfAnOlderReleaseSaysWhy(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		c := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		res, err := c.Submit(ctx, simple(artifactFile(t), "prod", "1", fmt.Sprintf("schedule: {at: %q}\n", at.Format(time.RFC3339))), false)
		if err != nil {
			t.Fatal(err)
		}
		want := `"reason":"schedule.at ` + at.Format(time.RFC3339) + `"`
		waitFor(t, c, res.ID, manent.StateDelayed)
		for _, q := range []string{
			`UPDATE manent_deployments SET reason = '' WHERE id = '` + res.ID + `'`,
			`UPDATE manent_events SET data = '{"state":"DELAYED"}' WHERE deployment_id = '` + res.ID + `' AND type = 'state' AND data LIKE '%DELAYED%'`,
		} {
			if _, err := srv.Store.DB().ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		own := openStream(t, srv.URL+"/api/v1/deployments/"+res.ID+"/events", "admin-token", "")
		got := own.until(t, func(f sseFrame) bool { return f.Event == "state" && strings.Contains(f.Data, `"DELAYED"`) })
		if last := got[len(got)-1]; !strings.Contains(last.Data, want) {
			t.Errorf("the deploy's stream: state event %s, want %s", last.Data, want)
		}
		global := openStream(t, srv.URL+"/api/v1/events", "admin-token", "")
		got = global.until(t, func(f sseFrame) bool { return f.Event == "state" && strings.HasPrefix(f.ID, res.ID+":") })
		if last := got[len(got)-1]; !strings.Contains(last.Data, want) {
			t.Errorf("the global stream: state event %s, want %s", last.Data, want)
		}
	})
}
