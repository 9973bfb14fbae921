package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// schedule.cron → 201 with a schedule id, SCHEDULED; each tick creates
// <schedule>@<UTC time> through the same checks; DELETE stops it.
func TestRecurringSchedule(t *testing.T) {
	// Ticks every 2 s: below the default schedules.min_interval.
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(cfg *node.Config) { cfg.Schedules.MinInterval = time.Second })
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	res, err := c.Submit(ctx, simple(artifactFile(t), "nightly", "1", "schedule: {cron: \"@every 2s\"}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Schedule == "" || res.State != manent.StateScheduled || res.ID != "" {
		t.Fatalf("answer %+v: want a schedule id and SCHEDULED", res)
	}
	// A tick still waiting when the next one fires is superseded: wait
	// for one that succeeded, not for the newest.
	var tick *manent.Deployment
	enginetest.Eventually(t, 60*time.Second, func() bool {
		l, err := c.List(ctx, api.ListOptions{Environment: "nightly"})
		if err != nil {
			return false
		}
		for i := range l.Items {
			if l.Items[i].State == manent.StateSuccess {
				tick = &l.Items[i]
				return true
			}
		}
		return false
	}, "a tick to create a deploy that succeeds")
	if !strings.HasPrefix(tick.ID, res.Schedule+"@") {
		t.Fatalf("deploy id %q: want %s@<UTC time>", tick.ID, res.Schedule)
	}
	if _, err := time.Parse(time.RFC3339, strings.TrimPrefix(tick.ID, res.Schedule+"@")); err != nil {
		t.Fatalf("deploy id %q: the tick time is not RFC 3339: %v", tick.ID, err)
	}
	if d := waitFor(t, c, tick.ID, manent.StateSuccess); d.Requester != "token:admin" {
		t.Errorf("requester %q", d.Requester)
	}
	status, body, _ := do(t, "GET", srv.URL+"/api/v1/schedules", "admin-token", "")
	var list struct {
		Items []struct {
			ID, State, Cron string
			LastDeploy      string `json:"last_deploy"`
		}
	}
	_ = json.Unmarshal(body, &list)
	if status != 200 || len(list.Items) != 1 || list.Items[0].ID != res.Schedule || list.Items[0].State != "SCHEDULED" {
		t.Fatalf("schedules: %d %s", status, body)
	}
	if status, body, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+res.Schedule, "admin-token", ""); status != 204 {
		t.Fatalf("delete: %d %s", status, body)
	}
	if status, _, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+res.Schedule, "admin-token", ""); status != 404 {
		t.Fatalf("second delete: %d, want 404", status)
	}
	status, body, _ = do(t, "GET", srv.URL+"/api/v1/schedules", "admin-token", "")
	if status != 200 || strings.Contains(string(body), res.Schedule) {
		t.Fatalf("schedules after delete: %d %s", status, body)
	}
}
