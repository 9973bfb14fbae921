package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/store"
)

// Approve, reject, cancel and rollback under hostile and least-permission
// use: a body past the limit, bad JSON, unknown fields, a wave that is
// no string or 10 KiB of escape sequences, a token that may only read,
// one of another application, one that may only approve, none. Each is
// problem+json with its status and a bounded message; none decides,
// cancels or rolls back anything; the audit entries of the refusals echo
// no huge or control-character input.
func TestHostileVerdicts(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(path, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 1, approvers: [\"group:sre\"], expires: 1h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := append(slices.Clone(govTokens),
		auth.TokenConfig{Name: "reader", SHA256: auth.HashToken("reader-token")},
		auth.TokenConfig{Name: "other", SHA256: auth.HashToken("other-token")},
		auth.TokenConfig{Name: "approver", SHA256: auth.HashToken("approver-token")})
	rules := append(slices.Clone(govRules),
		auth.RBACRule{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}},
		auth.RBACRule{Subjects: []string{"token:other"}, Applications: []string{"payments"},
			Permissions: []string{"deployment.submit", "deployment.read", "deployment.approve", "deployment.cancel"}},
		auth.RBACRule{Subjects: []string{"token:approver"}, Permissions: []string{"deployment.approve"}})
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) { c.Governance.Rules = path })
	ctx := context.Background()
	alice := api.NewClient(srv.URL, "alice-token", nil)
	art := artifactFile(t)
	// billing/prod has a release to roll back to and a deploy waiting for
	// its approval.
	for _, v := range []string{"1", "2"} {
		res, err := alice.Submit(ctx, simple(art, "prod", v, ""), false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := api.NewClient(srv.URL, "bob-token", nil).Approve(ctx, res.ID, "", ""); err != nil {
			t.Fatal(err)
		}
		waitFor(t, alice, res.ID, manent.StateSuccess)
	}
	res, err := alice.Submit(ctx, simple(art, "prod", "3", ""), false)
	if err != nil || res.State != manent.StateAwaitingApproval {
		t.Fatalf("submit: %+v %v", res, err)
	}
	last, err := srv.Store.Audit(ctx, store.AuditFilter{Limit: 1})
	if err != nil || len(last) != 1 {
		t.Fatalf("audit: %v %v", last, err)
	}

	dep := srv.URL + "/api/v1/deployments/" + res.ID
	absent := srv.URL + "/api/v1/deployments/dpl_0000000000000000000000000"
	rollback := srv.URL + "/api/v1/environments/billing/prod/rollback"
	huge := `{"comment": "` + strings.Repeat("x", server.MaxBody) + `"}`
	wave := strings.Repeat("\x1b[2J\u202ewave", 10<<10/10)
	waveBody, _ := json.Marshal(map[string]string{"wave": wave})
	field, _ := json.Marshal(map[string]string{strings.Repeat("\x1b[31mk", 10<<10/6): "v"})
	for _, tt := range []struct {
		name, url, token, body string
		status                 int
		want                   string
	}{
		{"approve too large", dep + "/approve", "bob-token", huge, 413, "request body is larger than 1048576 bytes"},
		{"reject too large", dep + "/reject", "bob-token", huge, 413, "request body is larger than 1048576 bytes"},
		{"rollback too large", rollback, "alice-token", `{"to": "` + strings.Repeat("1", server.MaxBody) + `"}`, 413, "request body is larger than 1048576 bytes"},
		{"approve invalid JSON", dep + "/approve", "bob-token", `{"comment": `, 422, "body"},
		{"reject invalid JSON", dep + "/reject", "bob-token", `{"comment" "x"}`, 422, "body"},
		{"approve unknown field", dep + "/approve", "bob-token", `{"verdict": "reject"}`, 422, `unknown field "verdict"`},
		{"approve 10 KiB unknown field", dep + "/approve", "bob-token", string(field), 422, "unknown field"},
		{"approve wave -1", dep + "/approve", "bob-token", `{"wave": -1}`, 422, "wave"},
		{"reject wave object", dep + "/reject", "bob-token", `{"wave": {"name": "eu"}}`, 422, "wave"},
		{"approve 10 KiB wave", dep + "/approve", "bob-token", string(waveBody), 409, "does not wait for the approval of wave"},
		{"reject 10 KiB wave", dep + "/reject", "bob-token", string(waveBody), 409, "does not wait for the approval of wave"},
		{"approve read-only", dep + "/approve", "reader-token", `{}`, 403, "token:reader"},
		{"reject read-only", dep + "/reject", "reader-token", `{}`, 403, "token:reader"},
		{"cancel read-only", dep + "/cancel", "reader-token", "", 403, "token:reader"},
		{"rollback read-only", rollback, "reader-token", `{}`, 403, "token:reader"},
		{"approve other application", dep + "/approve", "other-token", `{}`, 403, "token:other may not read deploy " + res.ID},
		{"reject other application", dep + "/reject", "other-token", `{}`, 403, "token:other may not read deploy " + res.ID},
		{"cancel other application", dep + "/cancel", "other-token", "", 403, "token:other may not read deploy " + res.ID},
		{"rollback other application", rollback, "other-token", `{}`, 403, "token:other"},
		{"approve absent", absent + "/approve", "other-token", `{}`, 404, "not found"},
		{"cancel approve-only", dep + "/cancel", "approver-token", "", 403, "token:approver"},
		{"rollback approve-only", rollback, "approver-token", `{}`, 403, "token:approver"},
		{"approve no token", dep + "/approve", "", `{}`, 401, ""},
		{"reject no token", dep + "/reject", "", `{}`, 401, ""},
		{"cancel no token", dep + "/cancel", "", "", 401, ""},
		{"rollback no token", rollback, "", `{}`, 401, ""},
		{"cancel too large", dep + "/cancel", "bob-token", huge, 413, "request body is larger than 1048576 bytes"},
		// A cancel defines no body: one is {} or nothing; a reason, a
		// force or text is refused, not read as a cancel.
		{"cancel unknown field", dep + "/cancel", "bob-token", `{"reason": "broken"}`, 422, `body: unknown field "reason"`},
		{"cancel invalid JSON", dep + "/cancel", "bob-token", `{"reason" `, 422, "body"},
		{"cancel array", dep + "/cancel", "bob-token", `[]`, 415, "Content-Type"},
		{"cancel text", dep + "/cancel", "bob-token", "now please", 415, "Content-Type"},
	} {
		status, body, h := do(t, "POST", tt.url, tt.token, tt.body)
		var p api.Problem
		_ = json.Unmarshal(body, &p)
		if status != tt.status || h.Get("Content-Type") != api.ProblemContentType || !strings.Contains(p.Detail, tt.want) {
			t.Errorf("%s: %d %s %.300q, want %d problem+json with %q", tt.name, status, h.Get("Content-Type"), body, tt.status, tt.want)
		}
		if len(body) > 2048 || strings.ContainsAny(string(body), "\x1b\u202e") {
			t.Errorf("%s: answered %d bytes %.300q, want a bounded message without control characters", tt.name, len(body), body)
		}
		for _, other := range []string{"billing", "prod", "AWAITING_APPROVAL"} {
			if strings.HasPrefix(tt.token, "other") && tt.url != rollback && strings.Contains(p.Detail, other) {
				t.Errorf("%s: %q tells a caller that may not read the deploy its %s", tt.name, p.Detail, other)
			}
		}
	}

	d, err := alice.Deployment(ctx, res.ID)
	if err != nil || d.State != manent.StateAwaitingApproval || len(d.Approvals) != 0 {
		t.Fatalf("deploy after the hostile requests: %+v %v, want it AWAITING_APPROVAL, undecided, not cancelled", d, err)
	}
	after, err := srv.Store.Audit(ctx, store.AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var refused, entries int
	for _, e := range after {
		if e.Seq <= last[0].Seq {
			continue
		}
		entries++
		if e.Outcome == "accepted" || e.Outcome == "allowed" {
			t.Errorf("audit entry %+v: a hostile request was acted on", e)
		}
		if e.Outcome == "refused" {
			refused++
		}
		text := e.Action + e.Target + e.Detail
		if len(text) > 2048 || strings.ContainsFunc(text, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }) {
			t.Errorf("audit entry %s %s: %d bytes %.300q, want it bounded, without control characters", e.Action, e.Target, len(text), e.Detail)
		}
	}
	if refused == 0 {
		t.Errorf("no refusal audited among %d entries: the 409s of the pinned waves are", entries)
	}
}
