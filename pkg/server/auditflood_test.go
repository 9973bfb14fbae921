package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// A token that may only approve cannot flood the audit log with refusals:
// past limits.refusals_per_minute refusals its approvals are answered 429
// problem+json with Retry-After, without acting, and the whole stretch of
// 429s is one entry; the chain verifies. An approver approving more
// deploys than the limit, each once, is never limited. Before the limit,
// each of the 40 refused approvals was a row.
func TestRefusalsCannotFloodTheAudit(t *testing.T) {
	t.Parallel()
	const perMin, flood = 5, 40
	rulesFile := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(rulesFile, []byte(`approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := append([]auth.TokenConfig{{Name: "approver", SHA256: auth.HashToken("approver-token"), Groups: []string{"sre"}}}, govTokens...)
	rules := append([]auth.RBACRule{{Subjects: []string{"token:approver"}, Permissions: []string{"deployment.approve"}}}, govRules...)
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) {
		c.Governance.Rules = rulesFile
		c.Limits.RefusalsPerMinute = perMin
	})
	ctx := context.Background()
	alice, bob := api.NewClient(srv.URL, "alice-token", nil), api.NewClient(srv.URL, "bob-token", nil)
	art := artifactFile(t)

	// Legitimate use: bob approves perMin+3 deploys, each once.
	var ids []string
	for i := range perMin + 3 {
		res, err := alice.Submit(ctx, []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: app%d\nenvironment: prod\nversion: \"1\"\nartifact: {url: %q}\n", i, art)), false)
		if err != nil || res.State != manent.StateAwaitingApproval {
			t.Fatalf("submit %d: %v %+v", i, err, res)
		}
		ids = append(ids, res.ID)
	}
	for _, id := range ids[1:] {
		if _, err := bob.Approve(ctx, id, "", ""); err != nil {
			t.Fatalf("bob approving %s: %v (an approver deciding on different deploys is not limited)", id, err)
		}
	}

	// The flood: approvals pinned to a wave the deploy does not wait for,
	// each a 409 and an audited refusal, then 429s.
	target := ids[0]
	before := auditRows(t, srv.Store, "token:approver")
	var conflicts, limited int
	for range flood {
		status, body, h := do(t, "POST", srv.URL+"/api/v1/deployments/"+target+"/approve", "approver-token", `{"wave": "nope"}`)
		switch status {
		case http.StatusConflict:
			conflicts++
		case http.StatusTooManyRequests:
			limited++
			var p struct {
				Detail string `json:"detail"`
			}
			if secs, err := strconv.Atoi(h.Get("Retry-After")); err != nil || secs < 1 || secs > 60 ||
				!strings.HasPrefix(h.Get("Content-Type"), "application/problem+json") ||
				json.Unmarshal(body, &p) != nil || !strings.Contains(p.Detail, "limits.refusals_per_minute") {
				t.Fatalf("429: Retry-After %q, Content-Type %q, %s", h.Get("Retry-After"), h.Get("Content-Type"), body)
			}
		default:
			t.Fatalf("refused approval: %d %s", status, body)
		}
	}
	if conflicts != perMin || limited != flood-perMin {
		t.Errorf("%d answered 409 and %d 429, want %d and %d", conflicts, limited, perMin, flood-perMin)
	}
	entries := auditRows(t, srv.Store, "token:approver")[len(before):]
	if len(entries) != perMin+1 {
		t.Fatalf("%d refused approvals left %d audit rows, want %d (each refusal, then one for the 429s)", flood, len(entries), perMin+1)
	}
	if last := entries[len(entries)-1]; last.Action != "deployment.approve" || last.Target != target || last.Outcome != "refused" ||
		!strings.Contains(last.Detail, "limits.refusals_per_minute") {
		t.Errorf("the entry of the 429s: %+v", last)
	}
	// Another identity is not limited by the approver's refusals.
	if _, err := bob.Approve(ctx, target, "", ""); err != nil {
		t.Fatalf("bob after the flood: %v", err)
	}
	n, problems, err := srv.Store.VerifyAudit(ctx)
	if err != nil || len(problems) > 0 {
		t.Fatalf("verify-audit over %d rows: %v %+v", n, err, problems)
	}
}

// auditRows returns identity's audit entries, oldest first.
func auditRows(t *testing.T, st *store.Store, identity string) []store.AuditEntry {
	t.Helper()
	var out []store.AuditEntry
	for before := int64(0); ; {
		page, err := st.Audit(context.Background(), store.AuditFilter{Before: before, Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if e.Identity == identity {
				out = append([]store.AuditEntry{e}, out...)
			}
		}
		if len(page) < 1000 {
			return out
		}
		before = page[len(page)-1].Seq
	}
}

// A cancel of a running deploy is accepted (it stops at its next step), and
// so was every repeat of it while the step ran, each an entry: a token that
// may only cancel could flood the audit log with accepted cancels of one
// deploy. A repeat counts against limits.refusals_per_minute as a refusal.
func TestRepeatedCancelsCannotFloodTheAudit(t *testing.T) {
	t.Parallel()
	const perMin, flood = 3, 30
	tokens := append([]auth.TokenConfig{{Name: "canceller", SHA256: auth.HashToken("canceller-token")}}, govTokens...)
	rules := append([]auth.RBACRule{{Subjects: []string{"token:canceller"}, Permissions: []string{"deployment.cancel"}}}, govRules...)
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) { c.Limits.RefusalsPerMinute = perMin })
	id, _ := startGated(t, api.NewClient(srv.URL, "ci-token", nil), gatedStaging)
	var accepted, limited int
	for range flood {
		switch status, body, _ := do(t, "POST", srv.URL+"/api/v1/deployments/"+id+"/cancel", "canceller-token", ""); status {
		case http.StatusAccepted:
			accepted++
		case http.StatusTooManyRequests:
			limited++
		default:
			t.Fatalf("cancel: %d %s", status, body)
		}
	}
	entries := auditRows(t, srv.Store, "token:canceller")
	if accepted != perMin+1 || len(entries) != perMin+2 {
		t.Fatalf("%d cancels: %d accepted, %d answered 429, %d audit rows; want %d accepted (the first and %d repeats), %d rows",
			flood, accepted, limited, len(entries), perMin+1, perMin, perMin+2)
	}
	if _, problems, err := srv.Store.VerifyAudit(context.Background()); err != nil || len(problems) > 0 {
		t.Fatalf("verify-audit: %v %+v", err, problems)
	}
}
