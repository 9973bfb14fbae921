package server_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// A rollback is a new deploy of the release before the current one, with
// its stored descriptor, through the whole admission: RBAC as a submit and
// governance (here: an approval for prod). It records rollback_of, shown by
// status, history and the inventory. On SQLite and PostgreSQL.
func TestRollbackGoesThroughAdmission(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		rules := filepath.Join(t.TempDir(), "governance.yaml")
		if err := os.WriteFile(rules, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 1, approvers: [\"group:sre\"]}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tokens := append([]auth.TokenConfig{{Name: "reader", SHA256: auth.HashToken("reader-token")}}, govTokens...)
		rbac := append([]auth.RBACRule{{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}}}, govRules...)
		srv := newTestServer(t, db, tokens, rbac, func(c *node.Config) { c.Governance.Rules = rules })
		ci, alice := api.NewClient(srv.URL, "ci-token", nil), api.NewClient(srv.URL, "alice-token", nil)
		ctx := context.Background()
		art := artifactFile(t)
		approved := func(id string) *manent.Deployment {
			d := waitFor(t, ci, id, manent.StateAwaitingApproval)
			if _, err := alice.Approve(ctx, id, "ok", d.PlanDigest); err != nil {
				t.Fatal(err)
			}
			return waitFor(t, ci, id, manent.StateSuccess)
		}
		// Nothing to roll back yet: 409 problem+json with the reason.
		code, body, h := do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/prod/rollback", "ci-token", "")
		if code != http.StatusConflict || h.Get("Content-Type") != "application/problem+json" || !strings.Contains(string(body), "billing/prod has no current release") {
			t.Fatalf("rollback without a release: %d %s", code, body)
		}
		var ids []string
		for _, v := range []string{"1", "2"} {
			res, err := ci.Submit(ctx, simple(art, "prod", v, "parameters: {v: "+v+"}\n"), false)
			if err != nil {
				t.Fatal(err)
			}
			approved(res.ID)
			ids = append(ids, res.ID)
		}
		// A reader may not roll back; a body with unknown fields is refused.
		if code, body, _ := do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/prod/rollback", "reader-token", ""); code != http.StatusForbidden {
			t.Fatalf("reader rollback: %d %s", code, body)
		}
		if code, body, _ := do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/prod/rollback", "ci-token", `{"version":"1"}`); code != http.StatusUnprocessableEntity {
			t.Fatalf("unknown field: %d %s", code, body)
		}
		if _, err := ci.Rollback(ctx, "billing", "prod", api.RollbackRequest{To: "7"}); manent.ErrorCode(err) != manent.EConflict ||
			!strings.Contains(manent.ErrorMessage(err), "version 7 never ended SUCCESS in billing/prod") {
			t.Fatalf("rollback to an unknown version: %v", err)
		}
		rb, err := ci.Rollback(ctx, "billing", "prod", api.RollbackRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if rb.Version != "1" || rb.RollbackOf != ids[1] || rb.From != ids[0] || rb.State != manent.StateAwaitingApproval {
			t.Fatalf("rollback %+v: want version 1 awaiting approval, rollback_of %s, from %s", rb, ids[1], ids[0])
		}
		// The accepted rollback is in the audit log (written in the
		// rollback's own transaction), and the chain verifies.
		entries, err := srv.Store.Audit(ctx, store.AuditFilter{Action: "deployment.rollback"})
		if err != nil {
			t.Fatal(err)
		}
		var outcomes []string
		for _, e := range entries {
			outcomes = append(outcomes, e.Outcome+" "+e.Detail)
		}
		if want := "accepted " + rb.ID + " 1 rollback_of " + ids[1] + " from " + ids[0]; len(outcomes) == 0 || outcomes[0] != want {
			t.Fatalf("rollback audit entries %q, newest first: want %q first", outcomes, want)
		}
		if _, problems, err := srv.Store.VerifyAudit(ctx); err != nil || len(problems) != 0 {
			t.Fatalf("verify audit: %v %v", problems, err)
		}
		d := approved(rb.ID)
		if d.RollbackOf != ids[1] || d.Requester != "token:ci" {
			t.Fatalf("status: rollback_of %q requester %q", d.RollbackOf, d.Requester)
		}
		// The stored descriptor was deployed again: its parameter is back.
		cur, err := ci.Current(ctx, "billing", "prod")
		if err != nil {
			t.Fatal(err)
		}
		if cur.Release.DeploymentID != rb.ID || cur.Effective["parameters"].(map[string]any)["v"] != float64(1) {
			t.Fatalf("current after rollback: %+v %v", cur.Release, cur.Effective)
		}
		hist, err := ci.History(ctx, "billing", "prod", 0, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(hist.Items) != 3 || !hist.Items[0].Current || hist.Items[0].RollbackOf != ids[1] || hist.Items[1].Current {
			t.Fatalf("history %+v", hist.Items)
		}
		if _, err := api.NewClient(srv.URL, "reader-token", nil).History(ctx, "billing", "prod", 0, ""); err != nil {
			t.Fatalf("reader history: %v", err)
		}
		if _, err := api.NewClient(srv.URL, "nobody", nil).History(ctx, "billing", "prod", 0, ""); manent.ErrorCode(err) != manent.EUnauthorized {
			t.Fatalf("anonymous history: %v", err)
		}
	})
}

// GET /api/v1/version answers the server's build to any authenticated
// caller, 401 without a token.
func TestVersionRoute(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, nil)
	if code, body, h := do(t, http.MethodGet, srv.URL+"/api/v1/version", "", ""); code != http.StatusUnauthorized || h.Get("Content-Type") != api.ProblemContentType {
		t.Fatalf("anonymous: %d %s", code, body)
	}
	v, err := api.NewClient(srv.URL, "ci-token", nil).Version(context.Background())
	if err != nil || v.Version == "" || !strings.HasPrefix(v.Go, "go1.") {
		t.Fatalf("version %+v %v", v, err)
	}
}

// A rollback is refused while a deploy of the environment is queued or
// running: that deploy would run first and change the current release
// under the rollback, which would then replace a release it was never
// asked to replace. The refusal names the deploy and what to do; once it
// has ended, the rollback goes back from the new current release.
func TestRollbackRefusedWhileADeployRuns(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	twoReleases(t, ci, art)
	running, gate := startGated(t, ci, func(art, gate string) string {
		return strings.Replace(gatedDescriptor(art, "staging", gate), `version: "1"`, `version: "3"`, 1)
	})
	_, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(manent.ErrorMessage(err), "deploy "+running+" (version 3) is PENDING on billing/staging") ||
		!strings.Contains(manent.ErrorMessage(err), "manent cancel "+running) {
		t.Fatalf("rollback while %s runs: %v, want a 409 naming it", running, err)
	}
	if _, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: "1"}); manent.ErrorCode(err) != manent.EConflict {
		t.Fatalf("rollback --to 1 while %s runs: %v, want a 409", running, err)
	}
	// What the current release will be is not known while a deploy runs:
	// "already the current release" (2 is current until 3 activates) or
	// "never ended SUCCESS" (3 may yet) would tell the one on call there
	// is nothing to do, while the deploy ahead is what to wait for or
	// cancel.
	for _, to := range []string{"2", "3"} {
		_, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: to})
		if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(manent.ErrorMessage(err), "deploy "+running+" (version 3) is PENDING on billing/staging") {
			t.Fatalf("rollback --to %s while %s runs: %v, want a 409 naming it", to, running, err)
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, running, manent.StateSuccess)
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil || rb.Version != "2" || rb.RollbackOf != running {
		t.Fatalf("rollback after %s ended: %+v %v, want version 2, rollback_of %s", running, rb, err, running)
	}
}

// Rollbacks submitted at the same instant: one is queued, the others are
// refused naming it — not queued behind it to roll back once more (the
// in-flight check runs again in the transaction that queues the rollback).
func TestRacingRollbacksQueueOne(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, nil, nil)
		admin := api.NewClient(srv.URL, "admin-token", nil)
		ctx := context.Background()
		art := artifactFile(t)
		gate := filepath.Join(t.TempDir(), "gate")
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
		// Version 2's descriptor waits for the gate: its rollback stays in
		// flight while the others are checked.
		for _, d := range [][]byte{simple(art, "staging", "1", ""),
			[]byte(strings.Replace(gatedDescriptor(art, "staging", gate), `version: "1"`, `version: "2"`, 1)),
			simple(art, "staging", "3", "")} {
			res, err := admin.Submit(ctx, d, false)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, admin, res.ID, manent.StateSuccess)
		}
		if err := os.Remove(gate); err != nil {
			t.Fatal(err)
		}
		const n = 6
		var wg sync.WaitGroup
		ids, errs := make([]string, n), make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rb, err := admin.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
				if err == nil {
					ids[i] = rb.ID
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		var accepted []string
		for i := range n {
			switch {
			case errs[i] == nil:
				accepted = append(accepted, ids[i])
			case manent.ErrorCode(errs[i]) != manent.EConflict || !strings.Contains(manent.ErrorMessage(errs[i]), "is ENQUEUED on billing/staging") &&
				!strings.Contains(manent.ErrorMessage(errs[i]), "is PENDING on billing/staging"):
				t.Errorf("rollback %d: %v, want a 409 naming the rollback ahead", i, errs[i])
			}
		}
		if len(accepted) != 1 {
			t.Fatalf("%d racing rollbacks queued %v, want exactly one", n, accepted)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		waitFor(t, admin, accepted[0], manent.StateSuccess)
	})
}

// A rollback deploys the bytes the release was: its descriptor had no
// artifact.sha256 and the file behind its URL changed since, so the
// rollback, pinned to the digest that deploy recorded, fails at the
// artifacts step instead of deploying other bytes under the old version.
func TestRollbackPinsTheRecordedArtifact(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art1, art2 := artifactFile(t), artifactFile(t)
	var first string
	for _, c := range []struct{ art, v string }{{art1, "1"}, {art2, "2"}} {
		res, err := ci.Submit(ctx, simple(c.art, "staging", c.v, ""), false)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ci, res.ID, manent.StateSuccess)
		if first == "" {
			first = res.ID
		}
	}
	v1, err := ci.Deployment(ctx, first)
	if err != nil || v1.ArtifactSHA256 == "" {
		t.Fatalf("deploy %s: %+v %v, want its artifact's sha256 recorded", first, v1, err)
	}
	if err := os.WriteFile(strings.TrimPrefix(art1, "file://"), []byte("other bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil || rb.Version != "1" {
		t.Fatalf("rollback: %+v %v, want version 1", rb, err)
	}
	d := waitFor(t, ci, rb.ID, manent.StateError)
	if !strings.Contains(d.Error, v1.ArtifactSHA256) {
		t.Fatalf("rollback over changed bytes: error %q, want the recorded sha256 %s named", d.Error, v1.ArtifactSHA256)
	}
}

// A rollback is no lead-time sample: it redeploys an old descriptor, whose
// source.committed_at is the old commit's — counted again, it would make
// the lead time look as if the rollback took days. It still counts as a
// deploy (frequency) and restores (time to restore).
func TestRollbackIsNoLeadTimeSample(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	committed := time.Now().Add(-72 * time.Hour).UTC().Format(time.RFC3339)
	for _, v := range []string{"1", "2"} {
		res, err := ci.Submit(ctx, simple(art, "staging", v, "source: {committed_at: "+committed+"}\n"), false)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ci, res.ID, manent.StateSuccess)
	}
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, rb.ID, manent.StateSuccess)
	d, err := ci.DORA(ctx, api.DORAOptions{Application: "billing", Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if d.DeploymentFrequency.Deploys != 3 || d.LeadTimeSeconds.Samples != 2 {
		t.Fatalf("deploys %d, lead-time samples %d: want 3 deploys and 2 samples (the rollback is none)", d.DeploymentFrequency.Deploys, d.LeadTimeSeconds.Samples)
	}
}

// History, current and rollback of a name no descriptor may have answer 422
// naming the rule, not an empty history (a typo's "Billing" looked like an
// environment that never deployed).
func TestEnvironmentRoutesCheckNames(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	for _, path := range []string{"/api/v1/environments/Billing/prod/history", "/api/v1/environments/billing/my%20env/current"} {
		code, body, h := do(t, http.MethodGet, srv.URL+path, "ci-token", "")
		if code != http.StatusUnprocessableEntity || h.Get("Content-Type") != api.ProblemContentType || !strings.Contains(string(body), "lowercase letters") {
			t.Errorf("%s: %d %s, want a 422 naming the rule", path, code, body)
		}
	}
	code, body, _ := do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/PROD/rollback", "ci-token", "")
	if code != http.StatusUnprocessableEntity {
		t.Errorf("rollback: %d %s, want 422", code, body)
	}
	if code, body, _ := do(t, http.MethodGet, srv.URL+"/api/v1/environments/billing/prod/history", "ci-token", ""); code != http.StatusOK {
		t.Errorf("a valid name: %d %s", code, body)
	}
}

// A "to" no descriptor's version can be (a control character, more than
// 256 characters, a 1 MiB body) is a 422 at /to that quotes it clipped,
// not a 409 echoing it whole — escape sequences and all — in the answer
// and in the audit log, where it stays.
func TestRollbackToMustBeAVersion(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	twoReleases(t, ci, art)
	for _, to := range []string{"1\x1b[2J", "1\n2", strings.Repeat("v", 257), strings.Repeat("\x1b[31m", 100_000)} {
		_, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: to})
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/to" {
			t.Fatalf("to %.20q: %v %+v, want a 422 at /to", to, err, me)
		}
		if strings.ContainsAny(me.Message+me.Fields[0].Message, "\x1b\n") || len(me.Fields[0].Message) > 300 {
			t.Errorf("to %.20q: message %q, want it quoted and clipped", to, me.Fields[0].Message)
		}
	}
	entries, err := srv.Store.Audit(ctx, store.AuditFilter{Action: "deployment.rollback"})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if len(e.Detail) > 1000 || strings.Contains(e.Detail, "\x1b") {
			t.Errorf("audit detail of %d bytes %.80q: want no raw or whole hostile version", len(e.Detail), e.Detail)
		}
	}
	// A version with spaces or unicode is one: its refusal is the 409.
	if _, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: "1 – hotfix"}); manent.ErrorCode(err) != manent.EConflict {
		t.Fatalf("to an unknown version: %v, want a 409", err)
	}
}

// A current release that failed and stayed live (rollback disabled, a step
// after activation failed) is not "already" its version: rollback --to
// that version goes back to its last SUCCESS deploy — the way out of a
// failed redeploy of the same version. A healthy current release is still
// refused, and a version that never succeeded still is too.
func TestRollbackToTheVersionOfAFailedCurrentRelease(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	fail := "rollback: {enabled: false}\nsteps:\n  - {name: boom, after: activation, plugin: script, with: {command: [sh, -c, 'exit 1']}}\n"
	var ids []string
	for _, c := range []struct{ v, extra string }{{"1", ""}, {"2", ""}, {"2", "parameters: {again: true}\n"}} {
		res, err := ci.Submit(ctx, simple(art, "staging", c.v, c.extra), false)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ci, res.ID, manent.StateSuccess)
		ids = append(ids, res.ID)
	}
	if _, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: "2"}); manent.ErrorCode(err) != manent.EConflict ||
		!strings.Contains(manent.ErrorMessage(err), "version 2 is already the current release of billing/staging ("+ids[2]+")") {
		t.Fatalf("rollback --to the healthy current version: %v, want a 409", err)
	}
	res, err := ci.Submit(ctx, simple(art, "staging", "2", fail), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, res.ID, manent.StateError)
	if cur, err := ci.Current(ctx, "billing", "staging"); err != nil || cur.Release.DeploymentID != res.ID {
		t.Fatalf("current %+v %v: want the failed live deploy %s", cur, err, res.ID)
	}
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: "2"})
	if err != nil || rb.Version != "2" || rb.From != ids[2] || rb.RollbackOf != res.ID {
		t.Fatalf("rollback --to 2 over the failed 2: %+v %v, want version 2 from %s, rollback_of %s", rb, err, ids[2], res.ID)
	}
	waitFor(t, ci, rb.ID, manent.StateSuccess)
	// A failed current version that never succeeded has nothing to go back to.
	res, err = ci.Submit(ctx, simple(art, "staging", "3", fail), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, res.ID, manent.StateError)
	if _, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{To: "3"}); manent.ErrorCode(err) != manent.EConflict ||
		!strings.Contains(manent.ErrorMessage(err), "version 3 never ended SUCCESS in billing/staging") {
		t.Fatalf("rollback --to 3 that never succeeded: %v, want a 409", err)
	}
}

// A rollback goes back from one release (rollback_of). When another deploy
// becomes the current release while the rollback waits for its approval,
// the rollback would replace a release nobody asked it to replace: its
// approval is refused (409 naming both), and one approved before that
// ends ERROR at its config step, before it deploys anything.
func TestRollbackOutdatedByANewRelease(t *testing.T) {
	t.Parallel()
	srv, client := govServer(t, "approvals:\n  - {environments: [staging], applications: [\"*\"], count: 1, approvers: [\"group:sre\"]}\n")
	ci, alice := client("ci-token"), client("alice-token")
	ctx := context.Background()
	art := artifactFile(t)
	approve := func(id string) error {
		d := waitFor(t, ci, id, manent.StateAwaitingApproval)
		_, err := alice.Approve(ctx, id, "ok", d.PlanDigest)
		return err
	}
	var ids []string
	for _, v := range []string{"1", "2"} {
		res, err := ci.Submit(ctx, simple(art, "staging", v, ""), false)
		if err != nil {
			t.Fatal(err)
		}
		if err := approve(res.ID); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ci, res.ID, manent.StateSuccess)
		ids = append(ids, res.ID)
	}
	_ = srv

	// Version 3 waits for its approval, so does the rollback from 2; 3 is
	// approved and goes through: the rollback's approval is refused.
	v3, err := ci.Submit(ctx, simple(art, "staging", "3", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil || rb.RollbackOf != ids[1] || rb.Version != "1" {
		t.Fatalf("rollback: %+v %v", rb, err)
	}
	if err := approve(v3.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, v3.ID, manent.StateSuccess)
	err = approve(rb.ID)
	if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(manent.ErrorMessage(err), v3.ID) ||
		!strings.Contains(manent.ErrorMessage(err), "rollback "+rb.ID) {
		t.Fatalf("approving the rollback from %s after %s became current: %v, want a 409 naming both", ids[1], v3.ID, err)
	}
	if _, err := alice.Reject(ctx, rb.ID, "outdated"); err != nil {
		t.Fatalf("reject the outdated rollback: %v", err)
	}

	// Approved while an older deploy, approved before it, still runs: the
	// approval is taken (the current release is still the one it goes
	// back from), and the rollback ends ERROR at config once that deploy
	// is current.
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	v4, err := ci.Submit(ctx, []byte(strings.Replace(gatedDescriptor(art, "staging", gate), `version: "1"`, `version: "4"`, 1)), false)
	if err != nil {
		t.Fatal(err)
	}
	rb2, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil || rb2.RollbackOf != v3.ID {
		t.Fatalf("second rollback: %+v %v", rb2, err)
	}
	if err := approve(v4.ID); err != nil {
		t.Fatal(err)
	}
	waitStepRunning(t, ci, v4.ID, "gate")
	if err := approve(rb2.ID); err != nil {
		t.Fatalf("approve the rollback while %s runs: %v", v4.ID, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, v4.ID, manent.StateSuccess)
	d := waitFor(t, ci, rb2.ID, manent.StateError)
	if !strings.Contains(d.Error, `step "config" failed: rollback `+rb2.ID) || !strings.Contains(d.Error, v4.ID) || !strings.Contains(d.Error, "manent rollback billing staging") {
		t.Fatalf("outdated rollback error %q: want it to end at config naming %s and how to roll back again", d.Error, v4.ID)
	}
	if cur, err := ci.Current(ctx, "billing", "staging"); err != nil || cur.Release.DeploymentID != v4.ID {
		t.Fatalf("current %+v %v: want %s still", cur, err, v4.ID)
	}
}

// A rollback runs today's checks on an old descriptor: when they refuse it
// (here the environment no longer lets a descriptor set a parameter it
// sets), the 422 says which deploy's descriptor was refused and what to do,
// not only "the deploy was refused" of a descriptor the caller never sent.
func TestRollbackRefusalNamesTheReusedDescriptor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	targets := filepath.Join(dir, "targets")
	policy := func(allowed string) {
		env := fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\ndescriptor_policy: {parameters: [%s]}\n", targets, allowed)
		if err := os.WriteFile(filepath.Join(dir, "staging.yaml"), []byte(env), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	policy("replicas, debug")
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil, func(c *node.Config) {
		configured(c)
		c.Environments = envconfig.Settings{Provider: "files", Dir: dir}
		c.Plugins.Local.Root = targets
	})
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	var first string
	for _, v := range []string{"1", "2"} {
		extra := ""
		if v == "1" {
			extra = "parameters: {debug: true}\n"
		}
		res, err := c.Submit(ctx, simple(art, "staging", v, extra), false)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, c, res.ID, manent.StateSuccess)
		if first == "" {
			first = res.ID
		}
	}
	policy("replicas")
	_, err := c.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/parameters/debug" {
		t.Fatalf("rollback under the new policy: %v %+v, want a 422 at /parameters/debug", err, me)
	}
	if want := "the descriptor of deploy " + first + " (version 1), which the rollback deploys again, was refused by today's checks: 1 problem"; !strings.HasPrefix(me.Message, want) ||
		!strings.Contains(me.Message, "manent deploy") {
		t.Fatalf("message %q, want it to start %q and say how to go on", me.Message, want)
	}
}

// A rollback's history entry says which release it restored and whose:
// rollback_of is the deploy it went back from, rollback_from the deploy
// whose release (version, descriptor) it deployed again — the audit log
// and the 202 knew it, the history did not.
func TestHistorySaysWhatARollbackRestored(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	ids := twoReleases(t, ci, art)
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil || rb.From != ids[0] {
		t.Fatalf("rollback %+v %v: want from %s", rb, err, ids[0])
	}
	waitFor(t, ci, rb.ID, manent.StateSuccess)
	h, err := ci.History(ctx, "billing", "staging", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range h.Items {
		want := ""
		if e.ID == rb.ID {
			want = ids[0]
			if e.RollbackOf != ids[1] || e.Version != "1" {
				t.Errorf("rollback entry %+v: want version 1, rollback_of %s", e, ids[1])
			}
		}
		if e.RollbackFrom != want {
			t.Errorf("entry %s: rollback_from %q, want %q", e.ID, e.RollbackFrom, want)
		}
	}
}

// A rollback that waits for its approval (prod) and the same rollback sent
// again without an Idempotency-Key (a double click, a pipeline retried):
// the second is refused 409 naming the first and what to do with it —
// it was queued too, two rollbacks waiting for one approval each, of
// which the second approved was refused as outdated. Rollbacks sent at
// the same instant queue one. On SQLite and PostgreSQL.
func TestRollbackWaitingForApprovalQueuesOne(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		rules := filepath.Join(t.TempDir(), "governance.yaml")
		if err := os.WriteFile(rules, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 1, approvers: [\"group:sre\"]}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		srv := newTestServer(t, db, govTokens, govRules, func(c *node.Config) { c.Governance.Rules = rules })
		ci, alice := api.NewClient(srv.URL, "ci-token", nil), api.NewClient(srv.URL, "alice-token", nil)
		ctx := context.Background()
		art := artifactFile(t)
		for _, v := range []string{"1", "2"} {
			res, err := ci.Submit(ctx, simple(art, "prod", v, ""), false)
			if err != nil {
				t.Fatal(err)
			}
			d := waitFor(t, ci, res.ID, manent.StateAwaitingApproval)
			if _, err := alice.Approve(ctx, res.ID, "ok", d.PlanDigest); err != nil {
				t.Fatal(err)
			}
			waitFor(t, ci, res.ID, manent.StateSuccess)
		}
		first, err := ci.Rollback(ctx, "billing", "prod", api.RollbackRequest{})
		if err != nil || first.State != manent.StateAwaitingApproval {
			t.Fatalf("rollback: %+v %v, want it AWAITING_APPROVAL", first, err)
		}
		for _, req := range []api.RollbackRequest{{}, {To: "1"}} {
			_, err := ci.Rollback(ctx, "billing", "prod", req)
			if msg := manent.ErrorMessage(err); manent.ErrorCode(err) != manent.EConflict ||
				!strings.Contains(msg, "rollback "+first.ID+" (version 1) of "+first.RollbackOf+" waits for its approval on billing/prod") ||
				!strings.Contains(msg, "manent approve "+first.ID) || !strings.Contains(msg, "manent reject "+first.ID) {
				t.Fatalf("rollback %+v again while %s waits: %v, want a 409 naming it", req, first.ID, err)
			}
		}
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = ci.Rollback(ctx, "billing", "prod", api.RollbackRequest{})
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if manent.ErrorCode(err) != manent.EConflict {
				t.Errorf("racing rollback %d: %v, want 409", i, err)
			}
		}
		list, _, err := srv.Store.List(ctx, store.Filter{Application: "billing", Environment: "prod", States: []manent.State{manent.StateAwaitingApproval}})
		if err != nil || len(list) != 1 || list[0].ID != first.ID {
			t.Fatalf("deploys waiting for an approval on billing/prod: %d %v, want only %s", len(list), err, first.ID)
		}
		// Rejected, the environment may be rolled back again.
		if _, err := alice.Reject(ctx, first.ID, "not now"); err != nil {
			t.Fatal(err)
		}
		waitFor(t, ci, first.ID, manent.StateRejected)
		if again, err := ci.Rollback(ctx, "billing", "prod", api.RollbackRequest{}); err != nil || again.State != manent.StateAwaitingApproval {
			t.Fatalf("rollback once %s is rejected: %+v %v", first.ID, again, err)
		}
	})
}

// An explicit empty "to" (a script's {"to": "$VERSION"} with VERSION
// unset) is a 422 at /to, not a rollback to the release before the
// current one: the CLI refuses --to "" for that reason, and the API said
// nothing and rolled back to a release nobody named. A body without "to"
// ({} or none) still goes back to the release before the current one.
func TestRollbackToEmptyIsRefused(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules)
	ci := api.NewClient(srv.URL, "ci-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	twoReleases(t, ci, art)
	// Other bodies a strict reading refuses keep their words: "to" of
	// another JSON type, a field the request does not have.
	for body, want := range map[string]string{`{"to": 5}`: `\"to\" is a number, want a string`, `{"version": "1"}`: `unknown field \"version\"`} {
		code, got, _ := do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/staging/rollback", "ci-token", body)
		if code != http.StatusUnprocessableEntity || !strings.Contains(string(got), want) {
			t.Errorf("%s: %d %s, want a 422 saying %s", body, code, got, want)
		}
	}
	code, body, h := do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/staging/rollback", "ci-token", `{"to": ""}`)
	if code != http.StatusUnprocessableEntity || h.Get("Content-Type") != api.ProblemContentType ||
		!strings.Contains(string(body), `"path":"/to"`) || !strings.Contains(string(body), "leave") {
		t.Fatalf(`{"to": ""}: %d %s, want a 422 at /to saying to leave "to" out`, code, body)
	}
	list, err := ci.List(ctx, api.ListOptions{Application: "billing", Environment: "staging"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("%d deploys after the refused rollback, want the 2 deploys and no rollback", len(list.Items))
	}
	code, body, _ = do(t, http.MethodPost, srv.URL+"/api/v1/environments/billing/staging/rollback", "ci-token", `{}`)
	if code != http.StatusAccepted || !strings.Contains(string(body), `"version": "1"`) && !strings.Contains(string(body), `"version":"1"`) {
		t.Errorf("{}: %d %s, want 202 rolling back to 1", code, body)
	}
}

// twoReleases deploys versions 1 and 2 of billing to staging with ci, each
// to SUCCESS, and returns their ids: an environment with a release to go
// back to.
func twoReleases(t *testing.T, ci *api.Client, art string) []string {
	t.Helper()
	var ids []string
	for _, v := range []string{"1", "2"} {
		res, err := ci.Submit(context.Background(), simple(art, "staging", v, ""), false)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, ci, res.ID, manent.StateSuccess)
		ids = append(ids, res.ID)
	}
	return ids
}
