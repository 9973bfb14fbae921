package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// The deploy page shows what the issue asks of it: the step timeline with
// attempts, durations, errors and the rollback steps marked; the rollout
// waves with their state; approvals with who, when and the comment. (The
// end-to-end tests drive real deploys; a failed rollout with a rollback is
// built here from the API's types.)
func TestDeployPageContent(t *testing.T) {
	pages, err := parsePages("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{pages: pages}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	t1, t2, t3 := at.Add(2*time.Second), at.Add(75*time.Second), at.Add(80*time.Second)
	until := at.Add(10 * time.Minute)
	d := manent.Deployment{
		ID: "dpl_X", Application: "billing", Environment: "prod", Version: "9.9", State: manent.StateError,
		Requester: "token:alice", CreatedAt: at, Error: `step "smoke" failed: exit 1`, Rollback: "completed",
		Rollout: []manent.WaveStatus{
			{Name: "canary", Percent: 10, State: "SUCCESS", Observe: "5m0s", ObserveUntil: &until, Gate: "passed"},
			{Name: "rest", Targets: []string{"eu-1", "eu-2"}, State: "ERROR", Message: "health gate: 5xx rate 12%"},
		},
		Approvals: []manent.Approval{{Identity: "token:bob", Verdict: "approve", Comment: "ship it", Time: at}},
		Steps: []manent.Step{
			{Name: "deploy", State: "SUCCESS", Attempts: 1, StartedAt: &at, FinishedAt: &t1},
			{Name: "smoke", State: "ERROR", Attempts: 3, StartedAt: &t1, FinishedAt: &t2, Error: "exit 1: connection refused"},
			{Name: "rollback:deploy", State: "SUCCESS", Attempts: 1, StartedAt: &t2, FinishedAt: &t3},
		},
	}
	p := &pageData{Title: "t", User: &manent.Identity{Subject: "token:bob"}, CSRF: "c", Data: deployView{D: d, Approvals: 1}}
	rec := httptest.NewRecorder()
	h.render(rec, httptest.NewRequest(http.MethodGet, "/deployments/dpl_X", nil), "deployment", http.StatusOK, p)
	body := rec.Body.String()
	for _, want := range []string{
		`<h2 id="steps-h">Steps</h2>`, `attempt 3`, `1m13s`, `2.0s`, `exit 1: connection refused`,
		`data-step="rollback:deploy"`, `is-rollback`, `<span class="tag">rollback</span>`,
		`<h2 id="waves-h">Rollout</h2>`, `canary`, `10 %`, `observed until`, `health gate passed`, `eu-1, eu-2`, `health gate: 5xx rate 12%`,
		`token:bob`, `ship it`, `step &#34;smoke&#34; failed: exit 1`, `Rollback completed.`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the deploy page:\n%s", want, body)
		}
	}
	// No buttons: this viewer may do nothing here.
	for _, b := range []string{`id="approve"`, `id="cancel"`} {
		if strings.Contains(body, b) {
			t.Errorf("button %s without the permission", b)
		}
	}
}

// A running step's duration and the relative times carry what the script
// needs to keep them current — the step's start and the page's time, to
// the millisecond — and the server's text, by the CLI's rule, stays the
// no-script fallback.
func TestDeployPageTimesTick(t *testing.T) {
	pages, err := parsePages("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{pages: pages}
	at := time.Now().Add(-133 * time.Second).UTC()
	done := at.Add(time.Second)
	d := manent.Deployment{
		ID: "dpl_X", Application: "billing", Environment: "prod", Version: "1.0", State: manent.StatePending,
		Requester: "token:alice", CreatedAt: at, StartedAt: &at,
		Steps: []manent.Step{
			{Name: "prepare", State: manent.StepSuccess, Attempts: 1, StartedAt: &at, FinishedAt: &done},
			{Name: "deploy", State: manent.StepRunning, Attempts: 1, StartedAt: &at},
		},
	}
	p := &pageData{Title: "t", User: &manent.Identity{Subject: "token:bob"}, CSRF: "c", Data: deployView{D: d}}
	rec := httptest.NewRecorder()
	h.render(rec, httptest.NewRequest(http.MethodGet, "/deployments/dpl_X", nil), "deployment", http.StatusOK, p)
	body := rec.Body.String()
	for _, want := range []string{
		// The CLI's rule: truncated to the unit (docs/cli.md).
		`<time datetime="` + at.Format(time.RFC3339) + `" title="` + at.Format("2006-01-02 15:04:05 UTC") + `" data-rel>2m ago</time>`,
		`<span class="dur" data-since="` + at.Format("2006-01-02T15:04:05.000Z07:00") + `">2m1`,
		`<span class="dur">1.0s</span>`, // a finished step does not tick
		`<body data-now="`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the deploy page:\n%s", want, body)
		}
	}
	if n := strings.Count(body, "data-since="); n != 1 {
		t.Errorf("%d ticking durations, want 1 (the running step's)", n)
	}
}

// On a server without governance the decision says so in words, not
// "by none" (the CLI's "allowed, source: none").
func TestDeployPageDecisionWithoutGovernance(t *testing.T) {
	pages, err := parsePages("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{pages: pages}
	for _, tt := range []struct {
		source string
		want   string
	}{
		{"none", `<dd>allowed (no governance configured)</dd>`},
		{"rules:/etc/manent/governance.yaml", `<dd>allowed by rules:/etc/manent/governance.yaml</dd>`},
		{"", `<dd>allowed</dd>`},
	} {
		d := manent.Deployment{ID: "dpl_X", Application: "billing", Environment: "prod", Version: "1.0", State: manent.StateSuccess,
			Requester: "token:alice", CreatedAt: time.Now(), Decision: &manent.Decision{Allowed: true, Source: tt.source}}
		p := &pageData{Title: "t", User: &manent.Identity{Subject: "token:bob"}, CSRF: "c", Data: deployView{D: d}}
		rec := httptest.NewRecorder()
		h.render(rec, httptest.NewRequest(http.MethodGet, "/deployments/dpl_X", nil), "deployment", http.StatusOK, p)
		if body := rec.Body.String(); !strings.Contains(body, tt.want) || strings.Contains(body, "by none") {
			t.Errorf("source %q: want %q in the deploy page:\n%s", tt.source, tt.want, body)
		}
	}
}

// The web's relative times follow the CLI's rule.
func TestAgoIsTheCLIRule(t *testing.T) {
	now := time.Now()
	for _, tt := range []struct {
		at   any
		want string
	}{
		{now.Add(-133 * time.Second), "2m ago"},
		{now.Add(-3 * time.Second), "just now"},
		{now.Add(-30 * time.Second), "30s ago"},
		{now.Add(-(2*time.Hour + 59*time.Minute)), "2h ago"},
		{now.Add(-50 * time.Hour), "2d ago"},
		{now.Add(5*time.Minute + 30*time.Second), "in 5m"},
		{(*time.Time)(nil), "—"},
		{time.Time{}, "—"},
	} {
		if got := ago(tt.at); got != tt.want {
			t.Errorf("ago(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
}

// A step between two attempts reads as one: running, its attempt failed,
// when the next one starts — not a failed step (its error alone under a
// "running" badge read as a failure).
func TestDeployPageRetryingStep(t *testing.T) {
	pages, err := parsePages("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{pages: pages}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	next := at.Add(4 * time.Second)
	d := manent.Deployment{
		ID: "dpl_X", Application: "billing", Environment: "prod", Version: "1.0", State: manent.StatePending,
		Requester: "token:alice", CreatedAt: at, StartedAt: &at,
		Steps: []manent.Step{{Name: "smoke", State: manent.StepRunning, Attempts: 2, StartedAt: &at,
			Error: "exit 1: connection refused", NextAttemptAt: &next, MaxAttempts: 5}},
	}
	p := &pageData{Title: "t", User: &manent.Identity{Subject: "token:bob"}, CSRF: "c", Data: deployView{D: d}}
	rec := httptest.NewRecorder()
	h.render(rec, httptest.NewRequest(http.MethodGet, "/deployments/dpl_X", nil), "deployment", http.StatusOK, p)
	body := rec.Body.String()
	want := `<span class="attempts">attempt 2 of 5 failed; next attempt at <time datetime="2026-12-04T10:00:04Z">2026-12-04 10:00:04 UTC</time></span>`
	if !strings.Contains(body, want) {
		t.Errorf("no %q in the deploy page:\n%s", want, body)
	}
}

// A deploy whose log retention removed says so under its log, instead of
// "No log lines yet." — an empty log read as a deploy that logged nothing.
func TestDeployPageSaysRetentionRemovedTheLog(t *testing.T) {
	pages, err := parsePages("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{pages: pages}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	removed := at.Add(30 * 24 * time.Hour)
	d := manent.Deployment{ID: "dpl_X", Application: "billing", Environment: "prod", Version: "9.9", State: manent.StateSuccess,
		Requester: "token:alice", CreatedAt: at, FinishedAt: &at, LogsRemovedFrom: &removed}
	p := &pageData{Title: "t", User: &manent.Identity{Subject: "token:bob"}, CSRF: "c", Data: deployView{D: d}}
	rec := httptest.NewRecorder()
	h.render(rec, httptest.NewRequest(http.MethodGet, "/deployments/dpl_X", nil), "deployment", http.StatusOK, p)
	body := rec.Body.String()
	if !strings.Contains(body, `Log lines removed by retention from <time datetime="2027-01-03T10:00:00Z"`) {
		t.Errorf("the deploy page does not say retention removed its log:\n%s", body)
	}
	if strings.Contains(body, "No log lines yet.") {
		t.Errorf("a removed log reads as one not written yet:\n%s", body)
	}
}
