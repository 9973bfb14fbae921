package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
)

var govTokens = []auth.TokenConfig{
	{Name: "ci", SHA256: auth.HashToken("ci-token")},
	{Name: "alice", SHA256: auth.HashToken("alice-token"), Groups: []string{"sre"}},
	{Name: "bob", SHA256: auth.HashToken("bob-token"), Groups: []string{"sre"}},
}

var govRules = []auth.RBACRule{{Subjects: []string{"token:ci", "group:sre"},
	Permissions: []string{"deployment.submit", "deployment.dry-run", "deployment.read", "deployment.approve", "deployment.cancel"}}}

func govServer(t *testing.T, rules string) (*testServer, func(token string) *api.Client) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := newTestServer(t, enginetest.SQLite(t), govTokens, govRules, func(c *node.Config) { c.Governance.Rules = path })
	return srv, func(token string) *api.Client { return api.NewClient(srv.URL, token, nil) }
}

func waitFor(t *testing.T, c *api.Client, id string, want manent.State) *manent.Deployment {
	t.Helper()
	var d *manent.Deployment
	enginetest.Eventually(t, 60*time.Second, func() bool {
		var err error
		d, err = c.Deployment(context.Background(), id)
		return err == nil && d.State == want
	}, "deploy %s to be %s", id, want)
	return d
}

func simple(art, env, version string, extra string) []byte {
	return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: %q\nartifact: {url: %q}\n%s", env, version, art, extra))
}

// A freeze refuses a deploy with its name and when it reopens; an allowed
// identity breaks the glass, with an audit entry.
func TestFreezeRefusesWithNameAndReopening(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC()
	rules := fmt.Sprintf(`freezes:
  - {name: year-end, environments: [prod], from: %s, to: %s, allow: ["token:alice"]}
`, now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Truncate(time.Second).Format(time.RFC3339))
	srv, client := govServer(t, rules)
	art := artifactFile(t)
	_, err := client("ci-token").Submit(context.Background(), simple(art, "prod", "1", ""), false)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid || !strings.Contains(fmt.Sprint(me.Fields), "year-end") ||
		!strings.Contains(fmt.Sprint(me.Fields), now.Add(time.Hour).Truncate(time.Second).Format(time.RFC3339)) {
		t.Fatalf("submit during a freeze: %v %+v", err, me)
	}
	if len(me.Fields) != 1 || me.Fields[0].Path != "/environment" {
		t.Fatalf("submit during a freeze: problems %+v, want the freeze once, at /environment", me.Fields)
	}
	res, err := client("alice-token").Submit(context.Background(), simple(art, "prod", "1", ""), false)
	if err != nil {
		t.Fatalf("break glass: %v", err)
	}
	d := waitFor(t, client("alice-token"), res.ID, manent.StateSuccess)
	if d.Decision == nil || !strings.Contains(d.Decision.Freeze, "break glass") {
		t.Errorf("decision %+v: want the bypassed freeze named", d.Decision)
	}
	entries, _ := srv.Store.Audit(context.Background(), store_filter("governance.break-glass"))
	if len(entries) != 1 || entries[0].Identity != "token:alice" {
		t.Fatalf("break-glass audit entries %+v", entries)
	}
}

// Promotion: prod requires the same version to have succeeded in staging.
func TestPromotionRequires(t *testing.T) {
	t.Parallel()
	_, client := govServer(t, "promotion:\n  - {environment: prod, requires: [staging]}\n")
	art := artifactFile(t)
	ci := client("ci-token")
	ctx := context.Background()
	if _, err := ci.Submit(ctx, simple(art, "prod", "2.0", ""), false); !strings.Contains(fmt.Sprint(err, errFields(err)), "staging") {
		t.Fatalf("prod before staging: %v %v", err, errFields(err))
	}
	res, err := ci.Submit(ctx, simple(art, "staging", "2.0", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, res.ID, manent.StateSuccess)
	good, err := ci.Submit(ctx, simple(art, "prod", "2.0", ""), false)
	if err != nil {
		t.Fatalf("prod after staging: %v %v", err, errFields(err))
	}
	waitFor(t, ci, good.ID, manent.StateSuccess)

	// QA: version 2.0 rebuilt (another artifact at the same URL) went to
	// prod on the strength of the first build's success in staging.
	// Stated in the descriptor, its digest is refused at submission;
	// unstated, once downloaded, before anything is deployed.
	s1, s2 := sha256.Sum256([]byte("x")), sha256.Sum256([]byte("rebuilt"))
	digest, rebuilt := hex.EncodeToString(s1[:]), hex.EncodeToString(s2[:])
	want := fmt.Sprintf("requires the artifact of billing 2.0 that succeeded in staging (sha256 %s), not sha256 %s", digest, rebuilt)
	_, err = ci.Submit(ctx, []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"2.0\"\nartifact: {url: %q, sha256: %s}\n", art, rebuilt)), false)
	if got := fmt.Sprint(err, errFields(err)); !strings.Contains(got, want) {
		t.Fatalf("prod with a stated digest of another artifact: %s, want %q", got, want)
	}
	path := strings.TrimPrefix(art, "file://")
	if err := os.WriteFile(path, []byte("rebuilt"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = ci.Submit(ctx, simple(art, "prod", "2.0", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, ci, res.ID, manent.StateError)
	if !strings.Contains(d.Error, want) {
		t.Fatalf("prod with a rebuilt artifact: error %q, want %q", d.Error, want)
	}
	for _, st := range d.Steps {
		if st.Name == manent.StepDeploy && st.State != manent.StepPending && st.State != manent.StepSkipped {
			t.Fatalf("step deploy %s: the rebuilt artifact was deployed", st.State)
		}
	}
}

// prodApprovals starts a server where a prod deploy needs one approval by
// group sre, and returns alice and bob (both sre) and an artifact.
func prodApprovals(t *testing.T) (alice, bob *api.Client, art string) {
	t.Helper()
	_, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`)
	return client("alice-token"), client("bob-token"), artifactFile(t)
}

// Approvals over HTTP: AWAITING_APPROVAL, the submitter cannot approve, a
// second approval by one identity does not count, another approver's makes
// it ENQUEUED with the same id; a rejection is REJECTED.
func TestApprovalsOverHTTP(t *testing.T) {
	t.Parallel()
	_, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`)
	art := artifactFile(t)
	ctx := context.Background()
	alice, bob := client("alice-token"), client("bob-token")
	dry, err := alice.Submit(ctx, simple(art, "prod", "3", ""), true)
	if err != nil || dry.Decision == nil || dry.Decision.ApprovalsRequired != 1 {
		t.Fatalf("validate: %v %+v: want the decision with 1 approval required", err, dry.Decision)
	}
	res, err := alice.Submit(ctx, simple(art, "prod", "3", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if res.State != manent.StateAwaitingApproval {
		t.Fatalf("state %s, want AWAITING_APPROVAL", res.State)
	}
	if _, err := alice.Approve(ctx, res.ID, "", ""); manent.ErrorCode(err) != manent.EForbidden {
		t.Fatalf("the submitter approving: %v, want 403", err)
	}
	if _, err := client("ci-token").Approve(ctx, res.ID, "", ""); manent.ErrorCode(err) != manent.EForbidden {
		t.Fatalf("a non-approver approving: %v, want 403", err)
	}
	// A comment is bounded (MaxComment) and plain text, line breaks and
	// tabs aside: it goes to the audit log and to every reader.
	for comment, want := range map[string]string{
		strings.Repeat("x", server.MaxComment+1): "comment is 4097 bytes, at most 4096",
		"ok\n\x1b[2Jwiped":                       "comment line 2 holds an escape character (U+001B, terminal escape sequences) at character 1",
		"fine\u202eevil":                         "comment line 1 holds",
		"approved\u200f rejected":                "comment line 1 holds the bidirectional-text mark U+200F at character 9",
	} {
		if _, err := bob.Approve(ctx, res.ID, comment, ""); manent.ErrorCode(err) != manent.EInvalid || !strings.Contains(err.Error(), want) {
			t.Fatalf("comment %.20q: %v, want a refusal saying %q", comment, err, want)
		}
	}
	d, err := bob.Approve(ctx, res.ID, "looks good\n\twith a second line", "")
	if err != nil {
		t.Fatal(err)
	}
	// Sent again, bob's approval is answered with what was recorded (a
	// client whose answer was lost); another verdict by him is refused.
	if again, err := bob.Approve(ctx, res.ID, "", ""); err != nil || len(again.Approvals) != 1 {
		t.Fatalf("bob's approval sent again: %v %+v, want it answered, counted once", err, again)
	}
	if _, err := bob.Reject(ctx, res.ID, ""); manent.ErrorCode(err) != manent.EConflict {
		t.Fatalf("bob rejecting what he approved: %v, want 409", err)
	}
	d = waitFor(t, alice, res.ID, manent.StateSuccess)
	if d.ID != res.ID || len(d.Approvals) != 1 || d.Approvals[0].Identity != "token:bob" {
		t.Fatalf("deploy %+v", d)
	}

	res, err = alice.Submit(ctx, simple(art, "prod", "4", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Reject(ctx, res.ID, "not today"); err != nil {
		t.Fatal(err)
	}
	d = waitFor(t, alice, res.ID, manent.StateRejected)
	if !strings.Contains(d.Error, "not today") {
		t.Errorf("error %q", d.Error)
	}
}

// A deploy that waited for its approval while a newer one of its
// environment went through cannot be approved: that would put its older
// release back over the current one, unasked. It can be rejected; a deploy
// submitted after the current one is approved as usual.
func TestStaleApprovalRefused(t *testing.T) {
	t.Parallel()
	alice, bob, art := prodApprovals(t)
	ctx := context.Background()
	older, err := alice.Submit(ctx, simple(art, "prod", "1.0", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	newer, err := alice.Submit(ctx, simple(art, "prod", "1.1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Approve(ctx, newer.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, alice, newer.ID, manent.StateSuccess)
	_, err = bob.Approve(ctx, older.ID, "", "")
	want := fmt.Sprintf("deploy %s (1.0) was submitted before %s, which made 1.1 billing/prod's current release: approving it would put 1.0 back over 1.1", older.ID, newer.ID)
	if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(err.Error(), want) {
		t.Fatalf("approving the older deploy: %v, want 409: %s", err, want)
	}
	if d, err := alice.Deployment(ctx, older.ID); err != nil || d.State != manent.StateAwaitingApproval || len(d.Approvals) != 0 {
		t.Fatalf("the older deploy after the refusal: %+v %v, want still AWAITING_APPROVAL, no approval recorded", d, err)
	}
	if _, err := bob.Reject(ctx, older.ID, "superseded by 1.1"); err != nil {
		t.Fatalf("rejecting it: %v", err)
	}
	waitFor(t, alice, older.ID, manent.StateRejected)
	// Submitted after the current release: approved as usual.
	next, err := alice.Submit(ctx, simple(art, "prod", "1.2", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Approve(ctx, next.ID, "", ""); err != nil {
		t.Fatalf("approving a newer deploy: %v", err)
	}
	waitFor(t, alice, next.ID, manent.StateSuccess)
}

// A deploy approved while a newer deploy of its environment was running
// waits behind it; when the newer one has become the current release by
// then, the approved one ends ERROR at its config step instead of putting
// its older release back over the newer one.
func TestApprovedDeployOvertakenDoesNotRun(t *testing.T) {
	t.Parallel()
	alice, bob, art := prodApprovals(t)
	ctx := context.Background()
	older, err := alice.Submit(ctx, simple(art, "prod", "1.0", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	gated := strings.Replace(gatedDescriptor(art, "prod", gate), `version: "1"`, `version: "1.1"`, 1)
	newer, err := alice.Submit(ctx, []byte(gated), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Approve(ctx, newer.ID, "", ""); err != nil {
		t.Fatal(err)
	}
	waitStepRunning(t, alice, newer.ID, "gate")
	// 1.1 is not the current release yet: approving 1.0 is allowed.
	if _, err := bob.Approve(ctx, older.ID, "", ""); err != nil {
		t.Fatalf("approving 1.0 while 1.1 runs: %v", err)
	}
	queued := waitFor(t, alice, older.ID, manent.StateEnqueued)
	hint := fmt.Sprintf("behind %s (PENDING), submitted after this deploy: if it succeeds, this one ends ERROR at its config step rather than put 1.0 back over 1.1", newer.ID)
	if !strings.Contains(queued.Reason, hint) {
		t.Errorf("1.0 queued behind 1.1: reason %q, want it to say %q", queued.Reason, hint)
	}
	if act, err := alice.Activity(ctx); err != nil {
		t.Fatal(err)
	} else if !strings.Contains(fmt.Sprint(act), hint) {
		t.Errorf("activity does not say why 1.0 may not run: %+v", act)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, alice, newer.ID, manent.StateSuccess)
	var d *manent.Deployment
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err = alice.Deployment(ctx, older.ID)
		return err == nil && d.State.Final()
	}, "1.0 to end")
	if d.State != manent.StateError {
		t.Fatalf("1.0 ended %s, want ERROR: it would have put 1.0 back over 1.1", d.State)
	}
	want := fmt.Sprintf("deploy %s (1.0) was submitted before %s, which became billing/prod's current release while this one waited for its approval: running it would put 1.0 back over 1.1", older.ID, newer.ID)
	if !strings.Contains(d.Error, want) {
		t.Errorf("1.0's error %q, want %q", d.Error, want)
	}
	for _, st := range d.Steps {
		if (st.Name == manent.StepDeploy || st.Name == manent.StepActivation) && st.State != manent.StepPending && st.State != manent.StepSkipped {
			t.Errorf("step %s of 1.0 is %s: it may not run", st.Name, st.State)
		}
	}
	cur, err := alice.Current(ctx, "billing", "prod")
	if err != nil || cur.Release == nil || cur.Release.Version != "1.1" {
		t.Fatalf("current release %+v %v, want 1.1", cur, err)
	}
}

// schedule.at and after through the API. Both submits must end before
// schedule.at (the first is then DELAYED, the second waits on it): on a
// loaded machine they may not, and the test tries again with a longer wait
// and new versions; a wrong state while schedule.at is still ahead is a
// failure at once.
func TestScheduleAtAndAfter(t *testing.T) {
	t.Parallel()
	_, client := govServer(t, "")
	art := artifactFile(t)
	ctx := context.Background()
	ci := client("ci-token")
	ran := false
	for i, wait := range []time.Duration{2 * time.Second, 6 * time.Second, 20 * time.Second} {
		version := fmt.Sprint(10 + i)
		at := time.Now().Add(wait).UTC().Truncate(time.Second).Add(time.Second)
		first, err := ci.Submit(ctx, simple(art, "qa", version, fmt.Sprintf("schedule: {at: %q}\n", at.Format(time.RFC3339))), false)
		if err != nil {
			t.Fatal(err)
		}
		second, err := ci.Submit(ctx, simple(art, "prod", version, fmt.Sprintf("after: [%s]\n", first.ID)), false)
		if err != nil {
			t.Fatal(err)
		}
		submitted := time.Now()
		waitFor(t, ci, first.ID, manent.StateSuccess)
		waitFor(t, ci, second.ID, manent.StateSuccess)
		if first.State == manent.StateDelayed && second.State == manent.StateWaitingDependency {
			ran = true
			break
		}
		if submitted.Before(at) {
			t.Fatalf("states %s and %s, want DELAYED and WAITING_DEPENDENCY", first.State, second.State)
		}
		t.Logf("the submits ended after schedule.at (%s ahead), states %s and %s: again with a longer wait", wait, first.State, second.State)
	}
	if !ran {
		t.Fatal("the machine never submitted twice within 20 s")
	}
	if _, err := ci.Submit(ctx, simple(art, "prod", "6", "after: [dpl_nope]\n"), false); !strings.Contains(fmt.Sprint(errFields(err)), "/after/0") {
		t.Fatalf("unknown dependency: %v %v", err, errFields(err))
	}
}

func errFields(err error) []manent.FieldError {
	var me *manent.Error
	if errorsAs(err, &me) {
		return me.Fields
	}
	return nil
}

// QA: a release rolled back in staging (manent rollback) still counted as
// a success there, and went to prod on its strength. It counts again once
// deployed to staging again, and a rollback *to* a release is a success of
// that release.
func TestPromotionRefusesAReleaseRolledBackUpstream(t *testing.T) {
	t.Parallel()
	_, client := govServer(t, "promotion:\n  - {environment: prod, requires: [staging]}\n")
	art := artifactFile(t)
	ci := client("ci-token")
	ctx := context.Background()
	deploy := func(env, version string) string {
		t.Helper()
		res, err := ci.Submit(ctx, simple(art, env, version, ""), false)
		if err != nil {
			t.Fatalf("deploy %s to %s: %v %v", version, env, err, errFields(err))
		}
		waitFor(t, ci, res.ID, manent.StateSuccess)
		return res.ID
	}
	deploy("staging", "1.0")
	bad := deploy("staging", "2.0")
	rb, err := ci.Rollback(ctx, "billing", "staging", api.RollbackRequest{})
	if err != nil {
		t.Fatal(err)
	}
	r := waitFor(t, ci, rb.ID, manent.StateSuccess)

	_, err = ci.Submit(ctx, simple(art, "prod", "2.0", ""), false)
	want := fmt.Sprintf("promotion to prod requires billing 2.0 to succeed first in staging: release 2.0 (%s) was rolled back in staging at %s by token:ci (rollback %s)",
		bad, r.FinishedAt.UTC().Format(time.RFC3339), rb.ID)
	if got := fmt.Sprint(err, errFields(err)); !strings.Contains(got, want) {
		t.Fatalf("prod with a release rolled back in staging: %s, want %q", got, want)
	}
	// The rollback went back to 1.0: a success of 1.0 in staging.
	deploy("prod", "1.0")
	// Deployed to staging again, 2.0 counts again.
	deploy("staging", "2.0")
	deploy("prod", "2.0")
}

// QA: "promotion to prod requires billing 1.2 to succeed first in:
// staging" did not say what staging has. The refusal now says whether 1.2
// was never deployed there, failed there, or still waits there, and which
// version staging runs.
func TestPromotionRefusalSaysWhatStagingHas(t *testing.T) {
	t.Parallel()
	_, client := govServer(t, "promotion:\n  - {environment: prod, requires: [staging]}\n")
	art := artifactFile(t)
	ci := client("ci-token")
	ctx := context.Background()
	refusal := func() string {
		t.Helper()
		_, err := ci.Submit(ctx, simple(art, "prod", "1.2", ""), false)
		if err == nil {
			t.Fatal("prod 1.2 was accepted before it succeeded in staging")
		}
		return fmt.Sprint(errFields(err))
	}
	const base = "promotion to prod requires billing 1.2 to succeed first in: staging — "

	res, err := ci.Submit(ctx, simple(art, "staging", "1.1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, res.ID, manent.StateSuccess)
	if got, want := refusal(), base+"it was never deployed there (staging runs 1.1)"; !strings.Contains(got, want) {
		t.Errorf("never deployed: %s\nwant %q", got, want)
	}

	// Another artifact than the one stated: staging's deploy of 1.2 fails.
	wrong := strings.Repeat("0", 64)
	res, err = ci.Submit(ctx, []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"1.2\"\nartifact: {url: %q, sha256: %q}\n", art, wrong)), false)
	if err != nil {
		t.Fatal(err, errFields(err))
	}
	waitFor(t, ci, res.ID, manent.StateError)
	if got, want := refusal(), base+fmt.Sprintf("its last deploy there (%s) ended ERROR (staging runs 1.1)", res.ID); !strings.Contains(got, want) {
		t.Errorf("failed there: %s\nwant %q", got, want)
	}

	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	res, err = ci.Submit(ctx, simple(art, "staging", "1.2", fmt.Sprintf("schedule: {at: %q}\n", at)), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, res.ID, manent.StateDelayed)
	if got, want := refusal(), base+fmt.Sprintf("it is still DELAYED there (%s)", res.ID); !strings.Contains(got, want) {
		t.Errorf("waiting there: %s\nwant %q", got, want)
	}
	if _, err := ci.Cancel(ctx, res.ID); err != nil {
		t.Fatal(err)
	}
}

// lostAnswer sits before a real server: the first verdict (a POST to
// …/approve or …/reject) goes through and is recorded, and its answer is
// replaced by a 503 with Retry-After — a storage fault after the commit.
type lostAnswer struct {
	target string
	// beforeRetry, when set, is waited for before a verdict is relayed
	// after the lost answer (false: it answers 504).
	beforeRetry func() bool
	mu          sync.Mutex
	lost        bool
}

func (p *lostAnswer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	enginetest.Relay{
		Target: p.target,
		Before: func(w http.ResponseWriter, r *http.Request) bool {
			p.mu.Lock()
			retry := p.lost && r.Method == http.MethodPost
			p.mu.Unlock()
			if retry && p.beforeRetry != nil && !p.beforeRetry() {
				http.Error(w, "the deploy did not get there", http.StatusGatewayTimeout)
				return true
			}
			return false
		},
		After: func(w http.ResponseWriter, r *http.Request, resp *http.Response) bool {
			p.mu.Lock()
			lose := !p.lost && resp.StatusCode == http.StatusOK && r.Method == http.MethodPost &&
				(strings.HasSuffix(r.URL.Path, "/approve") || strings.HasSuffix(r.URL.Path, "/reject"))
			p.lost = p.lost || lose
			p.mu.Unlock()
			if !lose {
				return false
			}
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"title":"Service Unavailable","status":503,"detail":"database is busy; retry in 1s"}`))
			return true
		},
	}.ServeHTTP(w, r)
}

// QA: a verdict recorded and then answered 503 with Retry-After (a
// storage fault after the commit) was sent again by the client and
// refused 409 "already decided": the CI job failed on an approval that
// counted. The same identity's same verdict is answered with what was
// recorded; another verdict by it is still a 409.
func TestVerdictRecordedThenLostIsAnsweredAgain(t *testing.T) {
	t.Parallel()
	srv, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`)
	art := artifactFile(t)
	ctx := context.Background()
	alice := client("alice-token")
	through := func(token string) (*api.Client, *lostAnswer) {
		p := &lostAnswer{target: srv.URL}
		hs := httptest.NewServer(p)
		t.Cleanup(hs.Close)
		return api.NewClient(hs.URL, token, nil), p
	}
	for _, verdict := range []string{"approve", "reject"} {
		res, err := alice.Submit(ctx, simple(art, "prod", "7-"+verdict, ""), false)
		if err != nil || res.State != manent.StateAwaitingApproval {
			t.Fatalf("submit: %+v %v", res, err)
		}
		bob, p := through("bob-token")
		send := bob.Approve
		other := func(ctx context.Context, id, comment, _ string) (*manent.Deployment, error) {
			return bob.Reject(ctx, id, comment)
		}
		if verdict == "reject" {
			send, other = other, bob.Approve
		}
		d, err := send(ctx, res.ID, "ok", "")
		if err != nil || !p.lost {
			t.Fatalf("%s, its answer lost after the commit (lost %v): %v, want the recorded verdict", verdict, p.lost, err)
		}
		if len(d.Approvals) != 1 || d.Approvals[0].Identity != "token:bob" || d.Approvals[0].Verdict != verdict {
			t.Fatalf("%s answered %+v, want bob's %s once", verdict, d.Approvals, verdict)
		}
		if _, err := other(ctx, res.ID, "", ""); manent.ErrorCode(err) != manent.EConflict {
			t.Fatalf("bob's other verdict after his %s: %v, want 409", verdict, err)
		}
	}

	// A wave's verdict (--wave): the same.
	res, err := alice.Submit(ctx, simple(art, "staging", "8", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"), false)
	if err != nil {
		t.Fatalf("submit with waves: %v %v", err, errFields(err))
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := alice.Deployment(ctx, res.ID)
		return err == nil && strings.Contains(d.Reason, "wave rest awaits approval")
	}, "wave rest to wait for its approval")
	bob, p := through("bob-token")
	d, err := bob.ApproveWave(ctx, res.ID, "rest", "canary is fine")
	if err != nil || !p.lost {
		t.Fatalf("approve --wave, its answer lost after the commit (lost %v): %v, want the recorded verdict", p.lost, err)
	}
	waitFor(t, alice, d.ID, manent.StateSuccess)
	if _, err := bob.RejectWave(ctx, res.ID, "rest", ""); manent.ErrorCode(err) != manent.EConflict {
		t.Fatalf("bob's rejection of the wave he approved: %v, want 409", err)
	}
}

// A verdict sent without naming a wave is pinned to what the deploy waits
// for when the client reads it (DecideWaiting, what `manent approve` sends):
// its approval recorded and the answer lost (503 with Retry-After), the
// deploy goes on to a wave that waits for approval before the client sends
// it again — the retry is answered with the recorded approval and does
// not approve the wave. Unpinned, it went to whatever the deploy waited
// for by then: the wave, approved by no one's decision.
func TestRetriedApprovalDoesNotApproveTheWaveReachedMeanwhile(t *testing.T) {
	t.Parallel()
	srv, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`)
	ctx := context.Background()
	alice := client("alice-token")
	res, err := alice.Submit(ctx, simple(artifactFile(t), "prod", "9", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"), false)
	if err != nil || res.State != manent.StateAwaitingApproval {
		t.Fatalf("submit: %+v %v %v", res, err, errFields(err))
	}
	p := loseAnswerUntilRestWaits(ctx, srv.URL, alice, res.ID)
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	bob := api.NewClient(hs.URL, "bob-token", nil)
	d, wave, err := bob.DecideWaiting(ctx, res.ID, "approve", "reviewed", "")
	if err != nil || !p.lost || wave != "" {
		t.Fatalf("approve, its answer lost after the commit (lost %v): wave %q, %v; want the deploy's own approval answered", p.lost, wave, err)
	}
	now, err := alice.Deployment(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !restWaits(now) {
		t.Fatalf("wave rest no longer waits for its approval after the retry of the deploy's own: %+v", now.Rollout)
	}
	for _, w := range now.Rollout {
		if len(w.Approvals) != 0 {
			t.Fatalf("wave %s has approvals %+v: the retry counted for it", w.Name, w.Approvals)
		}
	}
	if len(d.Approvals) != 1 || d.Approvals[0].Identity != "token:bob" {
		t.Fatalf("answered approvals %+v, want bob's once", d.Approvals)
	}
}

// A script's approval names no wave (POST …/approve {"comment": …}): its
// approval recorded and the answer lost (503 with Retry-After), the deploy
// went on to a wave waiting for approval, and the client's retry approved
// that wave — no one had looked at the canary. An identity that already
// decided on something else in the deploy must now name the wave (409);
// pinned to it, its verdict counts.
func TestUnpinnedRetryDoesNotApproveTheNextWave(t *testing.T) {
	t.Parallel()
	srv, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`)
	ctx := context.Background()
	alice := client("alice-token")
	res, err := alice.Submit(ctx, simple(artifactFile(t), "prod", "9u", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"), false)
	if err != nil || res.State != manent.StateAwaitingApproval {
		t.Fatalf("submit: %+v %v %v", res, err, errFields(err))
	}
	p := loseAnswerUntilRestWaits(ctx, srv.URL, alice, res.ID)
	hs := httptest.NewServer(p)
	t.Cleanup(hs.Close)
	bob := api.NewClient(hs.URL, "bob-token", nil)
	_, err = bob.Approve(ctx, res.ID, "reviewed", "")
	if !p.lost || manent.ErrorCode(err) != manent.EConflict || !strings.Contains(err.Error(), `send {"wave": "rest"}`) {
		t.Fatalf("unpinned approval sent again once wave rest waits (lost %v): %v, want 409 asking for the wave", p.lost, err)
	}
	now, err := alice.Deployment(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !restWaits(now) {
		t.Fatalf("wave rest no longer waits for its approval after the retry: %+v", now.Rollout)
	}
	for _, w := range now.Rollout {
		if len(w.Approvals) != 0 {
			t.Fatalf("wave %s has approvals %+v: the retry counted for it", w.Name, w.Approvals)
		}
	}
	// Named, the wave's approval counts; an identity that decided nothing
	// yet still approves it unpinned.
	if _, err := client("bob-token").ApproveWave(ctx, res.ID, "rest", "canary is fine"); err != nil {
		t.Fatalf("approve --wave rest: %v", err)
	}
	waitFor(t, alice, res.ID, manent.StateSuccess)
	res, err = alice.Submit(ctx, simple(artifactFile(t), "staging", "9v", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"), false)
	if err != nil {
		t.Fatalf("submit to staging: %v %v", err, errFields(err))
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := alice.Deployment(ctx, res.ID)
		return err == nil && restWaits(d)
	}, "wave rest to wait for its approval")
	if _, err := client("bob-token").Approve(ctx, res.ID, "first verdict", ""); err != nil {
		t.Fatalf("bob's first verdict, unpinned: %v", err)
	}
	waitFor(t, alice, res.ID, manent.StateSuccess)
}

// A token that may approve but not read deploys (deployment.approve alone)
// still approves with DecideWaiting, what `manent approve` sends: the read
// that pins the verdict is refused it, and the verdict goes unpinned, as
// before the pinning.
func TestApproveOnlyTokenStillDecides(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(path, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 1, approvers: [\"token:approver\"], expires: 1h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := append(slices.Clone(govTokens), auth.TokenConfig{Name: "approver", SHA256: auth.HashToken("approver-token")})
	rules := append(slices.Clone(govRules), auth.RBACRule{Subjects: []string{"token:approver"}, Permissions: []string{"deployment.approve"}})
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) { c.Governance.Rules = path })
	ctx := context.Background()
	alice := api.NewClient(srv.URL, "alice-token", nil)
	res, err := alice.Submit(ctx, simple(artifactFile(t), "prod", "10", ""), false)
	if err != nil || res.State != manent.StateAwaitingApproval {
		t.Fatalf("submit: %+v %v", res, err)
	}
	approver := api.NewClient(srv.URL, "approver-token", nil)
	if _, _, err := approver.DecideWaiting(ctx, res.ID, "approve", "ok", ""); err != nil {
		t.Fatalf("approve with deployment.approve alone: %v", err)
	}
	waitFor(t, alice, res.ID, manent.StateSuccess)
}

// restWaits reports whether d's rollout wave "rest" waits for its approval.
func restWaits(d *manent.Deployment) bool {
	for _, w := range d.Rollout {
		if w.Name == "rest" && w.State == manent.WaveAwaitingApproval {
			return true
		}
	}
	return false
}

// loseAnswerUntilRestWaits is a lostAnswer before target whose retry waits
// (up to 60 s) until deploy id's wave "rest" waits for its approval.
func loseAnswerUntilRestWaits(ctx context.Context, target string, alice *api.Client, id string) *lostAnswer {
	return &lostAnswer{target: target, beforeRetry: func() bool {
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			if d, err := alice.Deployment(ctx, id); err == nil && restWaits(d) {
				return true
			}
			time.Sleep(20 * time.Millisecond) // polling the deploy's state with a deadline
		}
		return false
	}}
}

// A verdict whose read of the wave that waits fails (the database away at
// that instant) is answered 503 with Retry-After, as any storage fault:
// nothing is decided, and the client sends it again. The server took the
// failed read for "no wave waits": a verdict pinned to the waiting wave
// was refused 409 (the deploy "moved on"), which a client does not retry,
// and an unpinned one by an identity that had approved the deploy itself
// was answered 200 as that approval sent again — neither recorded.
func TestVerdictWhileTheDatabaseIsAwayIs503(t *testing.T) {
	srv, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 1, approvers: ["group:sre"], expires: 1h}
`)
	ctx := context.Background()
	alice, bob := client("alice-token"), client("bob-token")
	res, err := alice.Submit(ctx, simple(artifactFile(t), "prod", "12", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"), false)
	if err != nil || res.State != manent.StateAwaitingApproval {
		t.Fatalf("submit: %+v %v %v", res, err, errFields(err))
	}
	if _, err := bob.Approve(ctx, res.ID, "reviewed", ""); err != nil {
		t.Fatalf("bob's approval of the deploy: %v", err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := alice.Deployment(ctx, res.ID)
		return err == nil && restWaits(d)
	}, "wave rest to wait for its approval")
	once := api.NewClientWith(srv.URL, "bob-token", nil, api.Options{Retries: -1})
	for _, v := range []struct {
		name string
		send func() error
	}{
		{"pinned to wave rest", func() error { _, err := once.ApproveWave(ctx, res.ID, "rest", "canary is fine"); return err }},
		{"unpinned", func() error { _, err := once.Approve(ctx, res.ID, "canary is fine", ""); return err }},
	} {
		var failed atomic.Int32
		servertest.SetReadFault(t, func(op string) error {
			if op != "waiting wave" || !failed.CompareAndSwap(0, 1) {
				return nil
			}
			return &store.Fault{Reason: "the database cannot be reached", RetryAfter: 5 * time.Second, Err: io.ErrUnexpectedEOF}
		})
		err := v.send()
		var se *api.ServerError
		if !errors.As(err, &se) || se.Status != http.StatusServiceUnavailable || se.RetryAfter <= 0 || se.Err != nil {
			t.Errorf("approval %s while the read of the waiting wave fails: %v, want a 503 problem with Retry-After", v.name, err)
		}
		if failed.Load() != 1 {
			t.Errorf("approval %s: no fault injected at the read of the waiting wave", v.name)
		}
	}
	now, err := alice.Deployment(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !restWaits(now) {
		t.Fatalf("wave rest no longer waits for its approval after the verdicts refused for the outage: %+v", now.Rollout)
	}
	for _, w := range now.Rollout {
		if len(w.Approvals) != 0 {
			t.Fatalf("wave %s has approvals %+v: a verdict refused for the outage counted", w.Name, w.Approvals)
		}
	}
	// The database back, the same verdict sent again counts.
	if _, err := bob.ApproveWave(ctx, res.ID, "rest", "canary is fine"); err != nil {
		t.Fatalf("approve --wave rest once the database is back: %v", err)
	}
	waitFor(t, alice, res.ID, manent.StateSuccess)
}

// A submitter who may not read the environment a promotion requires is
// told only that the version has not succeeded there: not that
// environment's deploy ids or release (which deployment.read guards).
func TestPromotionRefusalKeepsWhatTheSubmitterMayNotRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(path, []byte("promotion:\n  - {environment: prod, requires: [staging]}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tokens := append(slices.Clone(govTokens), auth.TokenConfig{Name: "releaser", SHA256: auth.HashToken("releaser-token")})
	rules := append(slices.Clone(govRules), auth.RBACRule{Subjects: []string{"token:releaser"},
		Permissions: []string{"deployment.submit", "deployment.read"}, Environments: []string{"prod"}})
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) { c.Governance.Rules = path })
	ci, releaser := api.NewClient(srv.URL, "ci-token", nil), api.NewClient(srv.URL, "releaser-token", nil)
	ctx := context.Background()
	art := artifactFile(t)
	res, err := ci.Submit(ctx, simple(art, "staging", "1.1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ci, res.ID, manent.StateSuccess)
	refusal := func(c *api.Client) string {
		t.Helper()
		_, err := c.Submit(ctx, simple(art, "prod", "1.2", ""), false)
		if err == nil {
			t.Fatal("prod 1.2 was accepted before it succeeded in staging")
		}
		return fmt.Sprint(errFields(err))
	}
	const base = "promotion to prod requires billing 1.2 to succeed first in: staging"
	if got := refusal(ci); !strings.Contains(got, base+" — it was never deployed there (staging runs 1.1)") {
		t.Errorf("a submitter who may read staging: %s\nwant what staging has", got)
	}
	if got := refusal(releaser); !strings.Contains(got, base) || strings.Contains(got, base+" —") || strings.Contains(got, "1.1") {
		t.Errorf("a submitter who may not read staging: %s\nwant %q alone", got, base)
	}
}

// An approval counts in the deploy's reason as soon as the call returns:
// status read at once says "approvals 1/2", not the "approvals 0/2" the
// gate wrote before it woke and counted again. QA: status and activity
// showed the old count for about half a second after `manent approve`.
func TestApprovalCountsInTheReasonAtOnce(t *testing.T) {
	_, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 2, approvers: ["group:sre"], expires: 1h}
`)
	ctx := context.Background()
	ci, bob := client("ci-token"), client("bob-token")
	res, err := ci.Submit(ctx, simple(artifactFile(t), "prod", "1", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d, err = ci.Deployment(ctx, res.ID)
		return err == nil && strings.HasPrefix(d.Reason, "approvals 0/2 by group:sre, expires at ")
	}, "the gate to count no approval yet")
	answer, err := bob.Approve(ctx, res.ID, "", "")
	if err != nil {
		t.Fatal(err)
	}
	now, err := ci.Deployment(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]string{"the approval's answer": answer.Reason, "status read at once": now.Reason} {
		if want := strings.Replace(d.Reason, "approvals 0/2", "approvals 1/2", 1); got != want {
			t.Errorf("%s: reason %q, want %q", what, got, want)
		}
	}
}

// A wave's approval counts in the deploy's reason as soon as the call
// returns, as the deploy's own does: status read at once says "wave rest
// awaits approval 1/2", and so does the wave's row, not the "0/2" the run
// wrote before it woke and counted again.
func TestWaveApprovalCountsInTheReasonAtOnce(t *testing.T) {
	_, client := govServer(t, `approvals:
  - {environments: [prod], applications: ["*"], count: 2, approvers: ["group:sre"], expires: 1h}
`)
	ctx := context.Background()
	ci, alice, bob := client("ci-token"), client("alice-token"), client("bob-token")
	res, err := ci.Submit(ctx, simple(artifactFile(t), "prod", "1", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*api.Client{alice, bob} {
		if _, err := c.Approve(ctx, res.ID, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	var d *manent.Deployment
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err = ci.Deployment(ctx, res.ID)
		return err == nil && strings.HasPrefix(d.Reason, "wave rest awaits approval 0/2, expires at ")
	}, "wave rest to wait for its approvals")
	answer, err := bob.ApproveWave(ctx, res.ID, "rest", "")
	if err != nil {
		t.Fatal(err)
	}
	now, err := ci.Deployment(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(d.Reason, "0/2", "1/2", 1)
	for what, got := range map[string]string{"the approval's answer": answer.Reason, "status read at once": now.Reason} {
		if got != want {
			t.Errorf("%s: reason %q, want %q", what, got, want)
		}
	}
	for _, w := range now.Rollout {
		if w.Name == "rest" && (w.State != manent.WaveAwaitingApproval || w.Message != want) {
			t.Errorf("wave rest read at once: %s %q, want %s %q", w.State, w.Message, manent.WaveAwaitingApproval, want)
		}
	}
}
