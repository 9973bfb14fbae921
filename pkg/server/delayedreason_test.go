package server_test

import (
	"context"
	"fmt"
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
