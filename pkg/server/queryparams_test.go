package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A list route refuses a query parameter it does not read — a script's
// typo (?stat=FAILED) listed everything, as if unfiltered — with a 400
// naming it and the closest known one; and one given twice (?state=A&
// state=B read A only), saying to give it once. What the CLI, the web
// page and the agent send is still read.
func TestListRoutesRefuseUnknownAndRepeatedParameters(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	cases := []struct {
		path, query, want string
	}{
		{"/api/v1/deployments", "stat=FAILED", `"stat"; did you mean "state"?`},
		{"/api/v1/deployments", "applicaton=billing", `"applicaton"; did you mean "application"?`},
		{"/api/v1/deployments", "state=FAILED&state=ERROR", `"state" is given 2 times`},
		{"/api/v1/deployments", "page=2", `"page"`},
		{"/api/v1/activity", "enviroment=prod", `did you mean "environment"?`},
		{"/api/v1/activity", "limit=5&limit=6", `"limit" is given 2 times`},
		{"/api/v1/audit", "actoin=deployment.submit", `did you mean "action"?`},
		{"/api/v1/environments/billing/prod/history", "cursr=x", `did you mean "cursor"?`},
		{"/api/v1/metrics/dora", "windw=7d", `did you mean "window"?`},
		{"/api/v1/inventory", "application=billing&application=shop", `"application" is given 2 times`},
		{"/api/v1/schedules", "env=prod", `"env"`},
		{"/api/v1/workers", "state=dead", `"state"`},
		{"/api/v1/clusters", "cluster=eu", `"cluster"`},
	}
	for _, c := range cases {
		status, body, h := do(t, "GET", srv.URL+c.path+"?"+c.query, "admin-token", "")
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if status != http.StatusBadRequest || !strings.Contains(h.Get("Content-Type"), "problem+json") || !strings.Contains(p.Detail, c.want) {
			t.Errorf("GET %s?%s: %d %s\nwant 400 problem+json saying %s", c.path, c.query, status, body, c.want)
		}
		if len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0].Path, "query.") {
			t.Errorf("GET %s?%s: errors %+v, want the parameter as query.<name>", c.path, c.query, p.Errors)
		}
	}

	// A hostile name is clipped, not echoed whole.
	long := strings.Repeat("x", 1<<16)
	status, body, _ := do(t, "GET", srv.URL+"/api/v1/deployments?"+long+"=1", "admin-token", "")
	if status != http.StatusBadRequest || len(body) > 2048 {
		t.Errorf("a 64 KiB parameter name: %d, %d bytes of answer; want 400, short", status, len(body))
	}

	// A value the route cannot read says what it takes, clipped.
	for _, c := range []struct{ path, want string }{
		{"/api/v1/deployments?cursor=zzz", `invalid cursor "zzz": give the next_cursor of the page before, unchanged`},
		{"/api/v1/environments/billing/prod/history?cursor=zzz", `invalid cursor "zzz": give the next_cursor of the page before, unchanged`},
		{"/api/v1/deployments?cursor=" + strings.Repeat("z", 1<<14), `invalid cursor "zzzz`},
		{"/api/v1/deployments?state=" + strings.Repeat("Q", 1<<14), `unknown state "QQQQ`},
	} {
		status, body, h := do(t, "GET", srv.URL+c.path, "admin-token", "")
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if status/100 != 4 || !strings.Contains(h.Get("Content-Type"), "problem+json") || !strings.Contains(p.Detail, c.want) || len(body) > 2048 {
			t.Errorf("GET %s: %d %d bytes %.300s\nwant a short problem+json saying %s", manent.ClipText(c.path, 80), status, len(body), body, c.want)
		}
	}

	// What the clients send is read.
	for _, ok := range []string{
		"/api/v1/deployments?" + url.Values{"application": {"billing"}, "environment": {"prod"}, "state": {"ERROR,CANCELLED"}, "limit": {"5"}}.Encode(),
		"/api/v1/activity?" + url.Values{"application": {"billing"}, "environment": {"prod"}, "from": {"0"}, "limit": {"50"}}.Encode(),
		"/api/v1/audit?" + url.Values{"action": {"deployment.submit"}, "before": {"9"}, "limit": {"100"}}.Encode(),
		"/api/v1/environments/billing/prod/history?limit=50",
		"/api/v1/metrics/dora?" + url.Values{"application": {"billing"}, "environment": {"prod"}, "window": {"7d"}}.Encode(),
		"/api/v1/inventory?application=billing&environment=prod",
		"/api/v1/schedules?application=billing",
		"/api/v1/workers",
		"/api/v1/clusters",
	} {
		if status, body, _ := do(t, "GET", srv.URL+ok, "admin-token", ""); status != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", ok, status, body)
		}
	}
}

// The streams, the log and the submission read only their own parameters
// too: ?dryrun=true and ?dry_run=1 meant a dry run and deployed, and
// ?follw=1 on the log answered a page as if the log had ended. The
// submission is refused before anything is enqueued.
func TestStreamsLogsAndSubmissionRefuseUnknownParameters(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	art := artifactFile(t)
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	desc := gatedDescriptor(art, "staging", gate)
	for _, q := range []string{"dryrun=true", "dry_run=1", "dry_run", "dry_run=yes", "dry_run=true&dry_run=true", "dry_run=true&validate=1"} {
		status, body, h := do(t, "POST", srv.URL+"/api/v1/deployments?"+q, "admin-token", desc)
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if status != http.StatusBadRequest || !strings.Contains(h.Get("Content-Type"), "problem+json") || len(p.Errors) != 1 || !strings.HasPrefix(p.Errors[0].Path, "query.") {
			t.Errorf("POST /api/v1/deployments?%s: %d %s\nwant 400 problem+json naming the parameter", q, status, body)
		}
	}
	status, body, _ := do(t, "GET", srv.URL+"/api/v1/deployments", "admin-token", "")
	var list api.ListResult
	if err := json.Unmarshal(body, &list); status != http.StatusOK || err != nil {
		t.Fatalf("list: %d %s", status, body)
	}
	if len(list.Items) != 0 {
		t.Fatalf("refused submissions deployed %d times", len(list.Items))
	}

	admin := api.NewClient(srv.URL, "admin-token", nil)
	res, err := admin.Submit(context.Background(), []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	id := res.ID
	for _, c := range []struct{ path, want string }{
		{"/api/v1/deployments/" + id + "/logs?follw=1", `"follw"; did you mean "follow"?`},
		{"/api/v1/deployments/" + id + "/logs?follow=1", `"follow" is "1"; it takes true or false`},
		{"/api/v1/deployments/" + id + "/logs?follow=true&after=3", `"after"`},
		{"/api/v1/deployments/" + id + "/logs?aftr=3", `did you mean "after"?`},
		{"/api/v1/deployments/" + id + "/events?type=log", `did you mean "types"?`},
		{"/api/v1/deployments/" + id + "/events?types=log&types=state", `"types" is given 2 times`},
		{"/api/v1/events?enviroment=prod", `did you mean "environment"?`},
		{"/api/v1/events?follow=1", `"follow"`},
	} {
		status, body, h := do(t, "GET", srv.URL+c.path, "admin-token", "")
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if status != http.StatusBadRequest || !strings.Contains(h.Get("Content-Type"), "problem+json") || !strings.Contains(p.Detail, c.want) {
			t.Errorf("GET %s: %d %s\nwant 400 problem+json saying %s", c.path, status, body, c.want)
		}
	}

	// What the CLI, the web page and r3labs/sse send is still read (the
	// streams answer 200 and stay open: the request is cancelled once the
	// status is in).
	for _, ok := range []string{
		"/api/v1/deployments/" + id + "/logs?after=1&limit=5",
		"/api/v1/deployments/" + id + "/logs?follow=false",
		"/api/v1/deployments/" + id + "/logs?follow=true&last_event_id=0",
		"/api/v1/deployments/" + id + "/events?last_event_id=0&types=state,log",
		"/api/v1/events?application=billing&environment=staging&types=state",
	} {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+ok, nil)
		req.Header.Set("Authorization", "Bearer admin-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			t.Errorf("GET %s: %d %s, want 200", ok, resp.StatusCode, b)
		}
		cancel()
		_ = resp.Body.Close()
	}
	if _, err := admin.Submit(context.Background(), []byte(desc), true); err != nil {
		t.Errorf("the client's dry run: %v", err)
	}
}
