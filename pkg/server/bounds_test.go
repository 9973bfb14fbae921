package server_test

// Attacks on the cost of a submission and on what a descriptor may hold
// (SPEC §11.1 "Bounded work", "Text", "Recurring schedules"; issue 11,
// holes 2, 3 and 5), written as an attacker would send them: to a real
// server on a loopback port. The time they take is measured by the
// descriptor and plan benchmarks; here a hostile request only has a
// generous bound (bombBound), which the quadratic and cubic code of before
// did not meet.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cronspec"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// bombBound is how long one hostile request may take before the test gives
// up: generous (a parse takes well under a second, see the benchmarks), yet
// far below the minutes the quadratic and cubic code took.
func bombBound() time.Duration {
	if raceEnabled {
		return 5 * time.Minute
	}
	return time.Minute
}

// send is do with the bombBound.
func send(t *testing.T, method, url, token, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Error(err) // called from goroutines too: no Fatal
		return 0, nil, nil
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bombBound())
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Error(err)
		return 0, nil, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, resp.Header
}

// problem decodes a problem+json answer.
func problem(t *testing.T, body []byte) api.Problem {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("answer is not problem+json: %v: %.300s", err, body)
	}
	return p
}

// errorBomb is 1 MiB of unknown top-level fields: quadratic before, about
// 90 s of CPU per request sent without a token.
func errorBomb() string {
	var b strings.Builder
	b.WriteString("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: \"https://a/b\"}\n")
	for i := 0; b.Len()+11 <= descriptor.MaxSize; i++ {
		fmt.Fprintf(&b, "k%07d: 1\n", i)
	}
	return b.String()
}

// An error bomb costs the server the same bounded parse with or without a
// token, and the answer lists at most 100 errors, the first ones.
func TestErrorBomb(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	bomb := errorBomb()
	if len(bomb) > descriptor.MaxSize || len(bomb) < descriptor.MaxSize-16 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	for _, tc := range []struct{ name, token, query string }{
		{"anonymous", "", ""},
		{"anonymous dry run", "", "?dry_run=true"},
		{"with a token", "admin-token", ""},
		{"with a token, dry run", "admin-token", "?dry_run=true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, h := send(t, "POST", srv.URL+"/api/v1/deployments"+tc.query, tc.token, bomb)
			if status != 422 || !strings.HasPrefix(h.Get("Content-Type"), api.ProblemContentType) {
				t.Fatalf("status %d %s: want 422 problem+json", status, h.Get("Content-Type"))
			}
			p := problem(t, body)
			if n := len(p.Errors); n == 0 || n > 100 {
				t.Fatalf("%d errors, want 1 to 100", n)
			}
			if got, want := p.Errors[0], (manent.FieldError{Path: "/k0000000", Message: `unknown field "k0000000"`, Line: 6, Column: 1}); got != want {
				t.Errorf("first error %+v, want %+v", got, want)
			}
			if last := p.Errors[len(p.Errors)-1]; !strings.Contains(last.Message, "more errors not shown") {
				t.Errorf("last error %+v: want it to say there are more", last)
			}
		})
	}
	// Two cores, two bombs at once, twice: every one is answered.
	var wg sync.WaitGroup
	statuses := make([]int, 4)
	for i := range statuses {
		wg.Go(func() { statuses[i], _, _ = send(t, "POST", srv.URL+"/api/v1/deployments", "", bomb) })
	}
	wg.Wait()
	for i, s := range statuses {
		if s != 422 {
			t.Errorf("concurrent bomb %d: status %d, want 422", i, s)
		}
	}
}

// steps is n custom steps, each after the previous, listed last first: the
// order that made planning cubic.
func steps(n int) string {
	var b strings.Builder
	b.WriteString("steps:\n")
	for i := n - 1; i >= 0; i-- {
		anchor := fmt.Sprintf("s%d", i-1)
		if i == 0 {
			anchor = "deploy"
		}
		fmt.Fprintf(&b, "  - {name: s%d, after: %s, plugin: script, with: {command: [\"true\"]}}\n", i, anchor)
	}
	return b.String()
}

// A step bomb is refused by the schema before anything plans it; the most
// steps a descriptor may have are planned, in order.
func TestStepBomb(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	art := artifactFile(t)
	bomb := string(simple(art, "prod", "1", steps(4000)))
	for _, tc := range []struct{ name, token, query string }{
		{"anonymous", "", ""},
		{"dry run", "admin-token", "?dry_run=true"},
		{"submit", "admin-token", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := send(t, "POST", srv.URL+"/api/v1/deployments"+tc.query, tc.token, bomb)
			if status != 422 {
				t.Fatalf("status %d: %.300s, want 422", status, body)
			}
			p := problem(t, body)
			if len(p.Errors) > 100 || p.Errors[0].Path != "/steps" || p.Errors[0].Message != "must have at most 200 items, got 4000" {
				t.Fatalf("errors %+v, want the first at /steps saying at most 200", p.Errors[:min(3, len(p.Errors))])
			}
		})
	}

	c := api.NewClient(srv.URL, "admin-token", nil)
	res, err := c.Submit(context.Background(), simple(art, "prod", "1", steps(200)), true)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range res.Plan.Steps {
		names = append(names, s.Name)
	}
	at := strings.Index(strings.Join(names, " "), "deploy s0 s1 s2 ")
	if len(names) != len(manent.DefaultPipeline)+200 || at < 0 || !strings.Contains(strings.Join(names, " "), "s198 s199 post-test") {
		t.Fatalf("plan of %d steps: %v … want deploy s0 … s199 post-test", len(names), names[:min(12, len(names))])
	}
}

// Control characters (terminal escape sequences, line breaks, C1 and
// bidirectional controls) are refused in single-line text, naming the field.
func TestControlCharactersRefused(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	art := artifactFile(t)
	tests := []struct {
		name, yml, path, msg string
	}{
		{"clear screen in version", fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1.0\\e[2J\\e[HSUCCESS\"\nartifact: {url: %q}\n", art),
			"/version", "version must be a single line of plain text: it contains an escape character (U+001B, terminal escape sequences) at character 4"},
		{"window title in version", fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\\e]0;owned\\a\"\nartifact: {url: %q}\n", art),
			"/version", "version must be a single line of plain text: it contains an escape character (U+001B, terminal escape sequences) at character 2"},
		{"fake line in version", fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\\n2026-12-03 deploy SUCCESS\"\nartifact: {url: %q}\n", art),
			"/version", "version must be a single line of plain text: it contains a line break (U+000A) at character 2"},
		{"C1 CSI in a wave target", string(simple(art, "prod", "1", "rollout:\n  waves:\n    - {name: w1, targets: [\"eu\\x9b2J\"]}\n")),
			"/rollout/waves/0/targets/0", "rollout.waves[0].targets[0] must be a single line of plain text: it contains the control character U+009B at character 3"},
		{"escape in a schedule", string(simple(art, "prod", "1", "schedule: {cron: \"@daily\\e[2J\"}\n")),
			"/schedule/cron", "schedule.cron must be a single line of plain text: it contains an escape character (U+001B, terminal escape sequences) at character 7"},
		{"escape in a step name", string(simple(art, "prod", "1", "steps:\n  - {name: \"a\\e[2J\", before: deploy, plugin: script}\n")),
			"/steps/0/name", "must match"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, q := range []string{"", "?dry_run=true"} {
				status, body, _ := do(t, "POST", srv.URL+"/api/v1/deployments"+q, "admin-token", tt.yml)
				if status != 422 {
					t.Fatalf("%s: status %d %.300s, want 422", q, status, body)
				}
				p := problem(t, body)
				found := false
				for _, e := range p.Errors {
					found = found || (e.Path == tt.path && strings.Contains(e.Message, tt.msg))
				}
				if !found {
					t.Fatalf("%s: errors %+v, want %s: %s", q, p.Errors, tt.path, tt.msg)
				}
			}
		})
	}
	// Free-form configuration may hold several lines.
	c := api.NewClient(srv.URL, "admin-token", nil)
	if _, err := c.Submit(context.Background(), simple(art, "prod", "1", "parameters: {notes: \"line 1\\nline 2\\ttabbed\"}\n"), true); err != nil {
		t.Fatalf("multi-line parameter: %v", err)
	}
}

// listedSchedule returns schedule id as GET /api/v1/schedules lists it.
func listedSchedule(t *testing.T, c *api.Client, id string) api.Schedule {
	t.Helper()
	l, err := c.Schedules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range l.Items {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("schedule %s not listed", id)
	return api.Schedule{}
}

// The cron forms of SPEC §11.1 are accepted with their next tick computed
// as the engine schedules them; one firing more often than
// schedules.min_interval is refused (422, not 500).
func TestCronForms(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	art := artifactFile(t)
	ctx := context.Background()
	for i, expr := range []string{"0 3 * * 1-5", "CRON_TZ=Europe/Paris 30 6 * * *", "@hourly", "@daily", "@weekly", "@monthly", "@every 1h"} {
		t.Run(expr, func(t *testing.T) {
			yml := simple(art, fmt.Sprintf("cron%d", i), "1", fmt.Sprintf("schedule: {cron: %q}\n", expr))
			if _, err := c.Submit(ctx, yml, true); err != nil {
				t.Fatalf("validate: %v", err)
			}
			before := time.Now()
			res, err := c.Submit(ctx, yml, false)
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			if res.Schedule == "" || res.State != manent.StateScheduled {
				t.Fatalf("answer %+v, want a schedule", res)
			}
			s := listedSchedule(t, c, res.Schedule)
			spec, err := cronspec.Parse(expr)
			if err != nil {
				t.Fatal(err)
			}
			if s.NextTick == nil || s.NextTick.Before(before) ||
				!(s.NextTick.Equal(spec.Next(before)) || s.NextTick.Equal(spec.Next(time.Now())) || spec.Every() > 0) {
				t.Fatalf("next tick %v, want %v", s.NextTick, spec.Next(before))
			}
		})
	}
	// Independent of cronspec: weekdays at 03:00 UTC; 06:30 in Paris.
	for _, s := range mustSchedules(t, c) {
		switch s.Cron {
		case "0 3 * * 1-5":
			if n := s.NextTick.UTC(); n.Hour() != 3 || n.Minute() != 0 || n.Weekday() == time.Saturday || n.Weekday() == time.Sunday || n.Sub(time.Now()) > 72*time.Hour {
				t.Errorf("0 3 * * 1-5: next tick %s", n)
			}
		case "CRON_TZ=Europe/Paris 30 6 * * *":
			paris, _ := time.LoadLocation("Europe/Paris")
			if n := s.NextTick.In(paris); n.Hour() != 6 || n.Minute() != 30 || n.Sub(time.Now()) > 24*time.Hour {
				t.Errorf("CRON_TZ=Europe/Paris 30 6 * * *: next tick %s", n)
			}
		}
	}

	for _, tc := range []struct{ expr, msg string }{
		{"@every 1s", `"@every 1s" fires every 1s, more often than this server allows (schedules.min_interval: 1m)`},
		{"@every 59s", `fires every 59s`},
	} {
		for _, dry := range []bool{true, false} {
			_, err := c.Submit(ctx, simple(art, "fast", "1", fmt.Sprintf("schedule: {cron: %q}\n", tc.expr)), dry)
			var e *manent.Error
			if !errorsAs(err, &e) || e.Code != manent.EInvalid || len(e.Fields) != 1 || e.Fields[0].Path != "/schedule/cron" ||
				!strings.Contains(e.Fields[0].Message, tc.msg) {
				t.Errorf("%s (dry run %v): got %v, want 422 at /schedule/cron: %s", tc.expr, dry, err, tc.msg)
			}
		}
	}
}

func mustSchedules(t *testing.T, c *api.Client) []api.Schedule {
	t.Helper()
	l, err := c.Schedules(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// schedules.min_interval is the server's: lower, @every 1s is allowed;
// higher, an hourly schedule is refused.
func TestScheduleMinIntervalConfigurable(t *testing.T) {
	t.Parallel()
	art := artifactFile(t)
	ctx := context.Background()
	tests := []struct {
		min      time.Duration
		expr     string
		refused  bool
		interval string
	}{
		{time.Second, "@every 1s", false, ""},
		{2 * time.Hour, "@hourly", true, `"@hourly" fires every 1h, more often than this server allows (schedules.min_interval: 2h)`},
		{2 * time.Hour, "0,59 0,23 * * *", true, `fires every 1m,`}, // 23:59, then 00:00
		{2 * time.Hour, "0 */2 * * *", false, ""},
		{2 * time.Hour, "@every 2h", false, ""},
	}
	for _, tt := range tests {
		srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(cfg *node.Config) { cfg.Schedules.MinInterval = tt.min })
		c := api.NewClient(srv.URL, "admin-token", nil)
		_, err := c.Submit(ctx, simple(art, "prod", "1", fmt.Sprintf("schedule: {cron: %q}\n", tt.expr)), true)
		if tt.refused {
			var e *manent.Error
			if !errorsAs(err, &e) || e.Code != manent.EInvalid || len(e.Fields) != 1 || !strings.Contains(e.Fields[0].Message, tt.interval) {
				t.Errorf("min %s, %s: got %v, want refused: %s", tt.min, tt.expr, err, tt.interval)
			}
		} else if err != nil {
			t.Errorf("min %s, %s: %v, want accepted", tt.min, tt.expr, err)
		}
	}
}

// A standard 5-field expression ticks for real, at the whole minute its
// next_tick announced (the DBOS scheduler wants 6 fields: the submit
// answered 500 before).
func TestFiveFieldCronTicks(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the next whole minute")
	}
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	res, err := c.Submit(ctx, simple(artifactFile(t), "minutely", "1", "schedule: {cron: \"* * * * *\"}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	announced := listedSchedule(t, c, res.Schedule).NextTick
	if announced == nil || announced.Second() != 0 {
		t.Fatalf("next tick %v, want a whole minute", announced)
	}
	var tick *manent.Deployment
	enginetest.Eventually(t, 90*time.Second, func() bool {
		l, err := c.List(ctx, api.ListOptions{Environment: "minutely"})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		tick = &l.Items[0]
		return true
	}, "a tick of \"* * * * *\" to create a deploy")
	at, err := time.Parse(time.RFC3339, strings.TrimPrefix(tick.ID, res.Schedule+"@"))
	if err != nil {
		t.Fatalf("deploy id %q: %v", tick.ID, err)
	}
	// The first tick is the announced one, unless the scheduler picked the
	// schedule up after that minute had passed.
	if at.Second() != 0 || at.Before(*announced) || at.After(announced.Add(time.Minute)) {
		t.Fatalf("tick at %s, announced %s", at, announced)
	}
	if s := listedSchedule(t, c, res.Schedule); s.NextTick == nil || !s.NextTick.After(at) {
		t.Errorf("after the tick at %s, next tick %v", at, s.NextTick)
	}
}

// A hostile stream parameter is quoted back clipped: a 512 KiB
// Last-Event-ID or ?types= is not answered with a 512 KiB problem.
func TestStreamParamsEchoClipped(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	long := strings.Repeat("9", 512<<10)
	for _, tc := range []struct{ name, header, query string }{
		{"Last-Event-ID", long, ""},
		{"types", "", "?types=" + strings.Repeat("x", 512<<10)},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api/v1/deployments/dpl_01M9ZZZZZZZZZZZZZZZZZZZZZZ/events"+tc.query, nil)
		req.Header.Set("Authorization", "Bearer admin-token")
		if tc.header != "" {
			req.Header.Set("Last-Event-ID", tc.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnprocessableEntity || len(b) > 1024 {
			t.Errorf("%s: %d with %d bytes, want a short 422", tc.name, resp.StatusCode, len(b))
		}
	}
}
