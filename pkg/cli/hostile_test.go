package cli_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// evil is text a hostile server (or whoever wrote into it: a step, a
// descriptor of an older server that did not refuse control characters)
// might send: OSC 52 (clipboard), a screen clear, a fake coloured SUCCESS
// over a carriage return, a one-byte CSI, a bidi override, an isolate and
// the bidi marks (RLM, ALM) around Hebrew and Arabic words.
const evil = "\x1b]52;c;aGFja2Vk\x07\x1b[2J\rfake \x1b[32mSUCCESS\x1b[0m \u009b1m\u202e\u2067\u200fשלום\u061cمرحبا"

// hostileServer answers every read with deploys whose every text field is evil.
func hostileServer(t *testing.T) string {
	t.Helper()
	now := time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)
	d := manent.Deployment{
		ID: "dpl_1", Application: "billing" + evil, Environment: "prod" + evil, Version: "1.0" + evil,
		State: manent.StateError, Requester: "alice" + evil, CreatedAt: now, StartedAt: &now, FinishedAt: &now,
		Error: `step "deploy" failed: ` + evil, Rollback: "failed" + evil, Reason: evil,
		Decision:  &manent.Decision{Allowed: true, Deny: []string{evil}, Source: evil},
		Approvals: []manent.Approval{{Identity: "bob" + evil, Verdict: "approve", Comment: evil, Time: now}},
		Rollout:   []manent.WaveStatus{{Name: "w1" + evil, State: "done" + evil, Message: evil}},
		Steps: []manent.Step{
			{Name: "deploy" + evil, State: manent.StepError, Attempts: 1, StartedAt: &now, FinishedAt: &now, Error: evil},
		},
	}
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/deployments/{id}", func(w http.ResponseWriter, r *http.Request) { answer(w, d) })
	mux.HandleFunc("GET /api/v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.ListResult{Items: []manent.Deployment{d}, NextCursor: evil})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/steps", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.StepsResult{Steps: d.Steps})
	})
	mux.HandleFunc("GET /api/v1/deployments/{id}/logs", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.LogsResult{Lines: []manent.LogLine{{Seq: 1, Time: now, Step: "deploy" + evil, Text: evil}}})
	})
	mux.HandleFunc("GET /api/v1/inventory", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.InventoryResult{Items: []manent.InventoryEntry{{Application: d.Application, Environment: d.Environment,
			Current: &manent.Release{DeploymentID: d.ID, Version: d.Version}, LastFailure: &manent.Release{DeploymentID: d.ID, Version: d.Version, Error: evil}}}})
	})
	mux.HandleFunc("GET /api/v1/activity", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.ActivityResult{Environments: []api.ActivityGroup{{Environment: d.Environment, Items: []api.ActivityItem{
			{ID: d.ID, Application: d.Application, Environment: d.Environment, Version: d.Version, State: manent.StateEnqueued,
				Requester: d.Requester, CreatedAt: now, Reason: evil, Ahead: evil, Step: evil}}}}})
	})
	mux.HandleFunc("GET /api/v1/audit", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.AuditResult{Items: []api.AuditEntry{{Seq: 1, Time: now, Identity: evil, Action: evil, Target: evil, Outcome: evil, Detail: evil}}})
	})
	mux.HandleFunc("GET /api/v1/schedules", func(w http.ResponseWriter, r *http.Request) {
		answer(w, api.SchedulesResult{Items: []api.Schedule{{ID: "sch_1" + evil, Application: d.Application, Environment: d.Environment,
			Cron: evil, State: evil, Requester: evil, CreatedAt: now, LastDeploy: evil, LastError: evil}}})
	})
	mux.HandleFunc("POST /api/v1/deployments/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.WriteHeader(http.StatusConflict)
		fmt.Fprintf(w, `{"title":"Conflict","status":409,"detail":%q,"errors":[{"path":"/x","message":%q}]}`, "already final"+evil, evil)
	})
	mux.HandleFunc("POST /api/v1/deployments", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, `{"title":"Internal Server Error","status":500,"detail":%q}`, evil)
	})
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// ourSGR is the only escape sequence the CLI itself writes: a colour.
var ourSGR = regexp.MustCompile("\x1b\\[[0-9;]*m")

// Every command that prints the server's text, on a colour terminal and
// piped: no control character from the server reaches the output, only the
// CLI's own colours; the hostile sequences are there as visible text.
func TestHostileServerTextIsNeutralised(t *testing.T) {
	url := hostileServer(t)
	cmds := [][]string{
		{"status", "dpl_1"}, {"list"}, {"steps", "dpl_1"}, {"logs", "dpl_1"}, {"wait", "dpl_1"},
		{"inventory"}, {"activity"}, {"audit"}, {"schedules", "list"}, {"cancel", "dpl_1"}, {"deploy", "-f", writeDescriptor(t, "1.0.0")},
		{"deploy", "-f", writeDescriptor(t, "1.0.0"), "-o", "yaml"},
		{"status", "dpl_1", "-o", "yaml"}, {"status", "dpl_1", "-o", "json"},
	}
	readOnly := map[string]bool{"list": true, "inventory": true, "steps": true, "logs": true, "status": true, "activity": true, "audit": true, "schedules": true}
	for _, tty := range []string{"", "1"} {
		for _, args := range cmds {
			env := map[string]string{"MANENT_SERVER": url, "MANENT_TOKEN": "t", "MANENT_FORCE_TTY": tty}
			code, stdout, stderr := runCLI(t, env, args...)
			out := stdout + stderr
			if code == 0 && !readOnly[args[0]] {
				t.Errorf("%v: exit 0, want a failure", args)
			}
			if tty == "" && ourSGR.MatchString(out) {
				t.Errorf("%v piped: colour codes in the output", args)
			}
			if strings.Contains(out, "fake \x1b[") {
				t.Errorf("%v (tty=%q): the server's colour sequence got through", args, tty)
			}
			rest := ourSGR.ReplaceAllString(out, "")
			if i := strings.IndexFunc(rest, func(r rune) bool {
				return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) ||
					(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069) || r == 0x200e || r == 0x200f || r == 0x061c
			}); i >= 0 {
				t.Errorf("%v (tty=%q): control character %q reached the output at %d:\n%q", args, tty, rest[i:min(i+8, len(rest))], i, rest)
			}
			if !strings.Contains(out, `\x1b]52;c;aGFja2Vk`) && !strings.Contains(out, `\u001b]52;c;aGFja2Vk`) && !strings.Contains(out, `\e]52;c;aGFja2Vk`) {
				t.Errorf("%v (tty=%q): the hostile text is not shown visibly:\n%s", args, tty, out)
			}
		}
	}
}
