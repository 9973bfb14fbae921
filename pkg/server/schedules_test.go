package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// schedule.cron → 201 with a schedule id, SCHEDULED; each tick creates
// <schedule>@<UTC time> through the same checks; DELETE stops it.
func TestRecurringSchedule(t *testing.T) {
	t.Parallel()
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

// An application/environment holds at most schedules.max_per_environment
// recurring schedules: the next is refused with 422 at /schedule/cron (a
// dry run says so too), other environments keep their own count, and a
// deleted schedule frees its place. The store's insert enforces it in the
// same statement that counts, on both databases.
func TestSchedulesPerEnvironmentBounded(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil, func(cfg *node.Config) { cfg.Schedules.MaxPerEnvironment = 2 })
		c := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		art := artifactFile(t)
		// Each at another hour: the same times twice would be refused
		// (TestSameScheduleTwiceRefused).
		hour := 0
		nightly := func(env string) []byte {
			hour++
			return simple(art, env, "1", fmt.Sprintf("schedule: {cron: \"0 %d * * *\"}\n", hour))
		}
		var ids []string
		for i := 0; i < 2; i++ {
			res, err := c.Submit(ctx, nightly("nightly"), false)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, res.Schedule)
		}
		// Several workers may share PostgreSQL: the refusal names this one.
		who := "this server"
		if strings.HasPrefix(db, "postgres") {
			who = "worker test" // newTestServer's executor id
		}
		want := "billing/nightly has 2 recurring schedules, the most " + who + " allows (schedules.max_per_environment)"
		for _, dry := range []bool{true, false} {
			_, err := c.Submit(ctx, nightly("nightly"), dry)
			var me *manent.Error
			if !errorsAs(err, &me) || len(me.Fields) != 1 || me.Fields[0].Path != "/schedule/cron" || !strings.Contains(me.Fields[0].Message, want) {
				t.Fatalf("third schedule (dry run %t): %v %+v, want 422 at /schedule/cron: %s", dry, err, me, want)
			}
		}
		if _, err := c.Submit(ctx, nightly("weekly"), false); err != nil {
			t.Fatalf("another environment: %v", err)
		}
		if status, body, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+ids[0], "admin-token", ""); status != 204 {
			t.Fatalf("delete: %d %s", status, body)
		}
		if _, err := c.Submit(ctx, nightly("nightly"), false); err != nil {
			t.Fatalf("after a delete: %v", err)
		}
		// The insert itself refuses, whatever admission saw (two
		// submissions at once).
		if n, err := srv.Store.ActiveSchedules(ctx, "billing", "nightly"); err != nil || n != 2 {
			t.Fatalf("active schedules %d, %v; want 2", n, err)
		}
		sc := &store.Schedule{ID: "sch_race", Application: "billing", Environment: "nightly", Cron: "0 3 * * *",
			Descriptor: nightly("nightly"), Requester: "token:admin", CreatedAt: time.Now()}
		if err := srv.Store.InsertSchedule(ctx, sc, 2); !errors.Is(err, store.ErrScheduleLimit) {
			t.Fatalf("insert past the limit: %v, want ErrScheduleLimit", err)
		}
		if err := srv.Store.InsertSchedule(ctx, sc, 3); err != nil {
			t.Fatalf("insert within the limit: %v", err)
		}
	})
}

// QA: the same descriptor with schedule.cron submitted twice (a CI job
// run again, a pipeline per commit) made two schedules of one
// application/environment firing at the same times, and each tick
// deployed twice. A schedule firing at the times of a live one of its
// application/environment is refused with 422 at /schedule/cron naming
// it (a dry run says so too), whatever the spelling of the expression;
// another time, another environment, or after the delete, it is created.
// The creating transaction checks again, whatever admission saw (two
// submissions at once), on both databases.
func TestSameScheduleTwiceRefused(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		c := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		art := artifactFile(t)
		cron := func(env, expr string) []byte {
			return simple(art, env, "1", fmt.Sprintf("schedule: {cron: %q}\n", expr))
		}
		first, err := c.Submit(ctx, cron("nightly", "0 3 * * *"), false)
		if err != nil {
			t.Fatal(err)
		}
		want := "billing/nightly has schedule " + first.Schedule + " firing at the same times (\"0 3 * * *\", created by token:admin): each tick would deploy twice"
		for _, expr := range []string{"0 3 * * *", "CRON_TZ=UTC 0 3 * * 0-6", "0  3 * * *"} {
			for _, dry := range []bool{true, false} {
				_, err := c.Submit(ctx, cron("nightly", expr), dry)
				var me *manent.Error
				if !errorsAs(err, &me) || len(me.Fields) != 1 || me.Fields[0].Path != "/schedule/cron" || !strings.Contains(me.Fields[0].Message, want) {
					t.Fatalf("%q again (dry run %t): %v %+v, want 422 at /schedule/cron: %s", expr, dry, err, me, want)
				}
			}
		}
		if n, err := srv.Store.ActiveSchedules(ctx, "billing", "nightly"); err != nil || n != 1 {
			t.Fatalf("active schedules %d, %v; want 1", n, err)
		}
		for _, ok := range [][2]string{{"nightly", "0 4 * * *"}, {"nightly", "CRON_TZ=Europe/Paris 0 3 * * *"}, {"weekly", "0 3 * * *"}} {
			if _, err := c.Submit(ctx, cron(ok[0], ok[1]), false); err != nil {
				t.Fatalf("%s %q: %v", ok[0], ok[1], err)
			}
		}
		// The transaction that records it refuses it too.
		sc := &store.Schedule{ID: "sch_race", Application: "billing", Environment: "nightly", Cron: "0 3 * * *",
			Descriptor: cron("nightly", "0 3 * * *"), Requester: "token:admin", CreatedAt: time.Now()}
		err = srv.Engine.CreateSchedule(ctx, sc)
		var me *manent.Error
		if !errorsAs(err, &me) || len(me.Fields) != 1 || !strings.Contains(me.Fields[0].Message, want) {
			t.Fatalf("CreateSchedule of the same times: %v, want the refusal: %s", err, want)
		}
		if status, body, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+first.Schedule, "admin-token", ""); status != 204 {
			t.Fatalf("delete: %d %s", status, body)
		}
		if _, err := c.Submit(ctx, cron("nightly", "0 3 * * *"), false); err != nil {
			t.Fatalf("after the delete: %v", err)
		}
	})
}

// QA: DELETE of a schedule answered 404 for an unknown id and 403 naming
// the schedule's application and environment for a known one, to any
// token: an oracle of schedule ids and where they deploy. A caller who
// may not read that application/environment gets the unknown id's 404; one
// who may read it gets the 403.
func TestDeleteScheduleOfOthers(t *testing.T) {
	t.Parallel()
	tokens := []auth.TokenConfig{
		{Name: "stranger", SHA256: auth.HashToken("stranger-token")},
		{Name: "reader", SHA256: auth.HashToken("reader-token")},
	}
	rules := []auth.RBACRule{
		{Subjects: []string{"token:stranger"}, Permissions: []string{"deployment.read", "deployment.submit", "schedule.manage"}, Applications: []string{"web"}, Environments: []string{"*"}},
		{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}, Applications: []string{"billing"}, Environments: []string{"*"}},
	}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules)
	res, err := api.NewClient(srv.URL, "admin-token", nil).Submit(context.Background(), simple(artifactFile(t), "nightly", "1", "schedule: {cron: \"0 3 * * *\"}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	_, unknown, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/sch_nope", "stranger-token", "")
	status, body, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+res.Schedule, "stranger-token", "")
	if status != 404 || strings.Contains(string(body), "billing") || strings.Contains(string(body), "nightly") ||
		string(body) != strings.ReplaceAll(string(unknown), "sch_nope", res.Schedule) {
		t.Errorf("stranger: %d %s; want the 404 of an unknown id (%s)", status, body, unknown)
	}
	if status, body, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+res.Schedule, "reader-token", ""); status != 403 || !strings.Contains(string(body), "schedule.manage") {
		t.Errorf("reader: %d %s; want 403 naming schedule.manage", status, body)
	}
	if status, body, _ := do(t, "DELETE", srv.URL+"/api/v1/schedules/"+res.Schedule, "admin-token", ""); status != 204 {
		t.Errorf("admin: %d %s; want 204", status, body)
	}
}
