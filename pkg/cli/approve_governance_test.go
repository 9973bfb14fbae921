package cli_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
)

// approvalServer is a server whose prod deploys need 2 approvals by
// group:sre: alice and bob are in group sre and may approve, carol may
// approve (RBAC) but is no approver of the rule, reader may only read. The
// bootstrap token (token:admin) submits.
func approvalServer(t *testing.T) (srv *servertest.Server, env func(token string) map[string]string) {
	t.Helper()
	rules := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(rules, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 2, approvers: [\"group:sre\"], expires: 1h}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv = servertest.Start(t, servertest.WithConfig(func(c *node.Config) {
		c.Governance.Rules = rules
		c.Auth.Tokens = []auth.TokenConfig{
			{Name: "alice", SHA256: auth.HashToken("alice-token"), Groups: []string{"sre"}},
			{Name: "bob", SHA256: auth.HashToken("bob-token"), Groups: []string{"sre"}},
			{Name: "carol", SHA256: auth.HashToken("carol-token"), Groups: []string{"ops"}},
			{Name: "reader", SHA256: auth.HashToken("reader-token")},
		}
		c.RBAC = []auth.RBACRule{
			{Subjects: []string{"group:sre", "group:ops"}, Permissions: []string{"deployment.read", "deployment.approve"}},
			{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}},
		}
	}))
	return srv, func(token string) map[string]string {
		if token == "" {
			token = srv.Token
		}
		return map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": token}
	}
}

// submitForApproval submits billing/prod 1.0.0 with the bootstrap token
// and returns its id; it waits for 2 approvals.
func submitForApproval(t *testing.T, env func(string) map[string]string) string {
	t.Helper()
	code, out, errOut := runCLI(t, env(""), "deploy", "-f", writeDescriptor(t, "1.0.0"))
	id := regexp.MustCompile(`dpl_[0-9A-Z]+`).FindString(out)
	if code != 0 || id == "" || !strings.Contains(out, "AWAITING_APPROVAL") {
		t.Fatalf("deploy: exit %d, stdout %q\nstderr:\n%s", code, out, errOut)
	}
	return id
}

// QA: an approval sent again once the deploy had ended (here cancelled)
// is answered 200 — the same verdict sent again is not refused, so that a
// client whose answer was lost succeeds — and `manent approve` printed
// "deploy … approved", exit 0, as if it had let the deploy go on. It
// says now that the deploy has ended, and in which state.
func TestApproveOfAnEndedDeploySaysSo(t *testing.T) {
	t.Parallel()
	srv, env := approvalServer(t)
	id := submitForApproval(t, env)
	if code, out, errOut := runCLI(t, env("alice-token"), "approve", id); code != 0 || strings.Contains(out, "ended") {
		t.Fatalf("first approval: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, out, errOut := runCLI(t, env(""), "cancel", id); code != 0 {
		t.Fatalf("cancel: exit %d\n%s%s", code, out, errOut)
	}
	if d, err := srv.Client().Deployment(t.Context(), id); err != nil || d.State != "CANCELLED" {
		t.Fatalf("after the cancel: %+v, %v", d, err)
	}
	code, out, errOut := runCLI(t, env("alice-token"), "approve", id)
	if code != 0 {
		t.Fatalf("the approval sent again: exit %d, want 0 (the server answers 200)\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "has ended CANCELLED") || !strings.Contains(out, "nothing") {
		t.Errorf("the approval sent again after the cancel says:\n%s\nwant that the deploy has ended CANCELLED and the approval changes nothing", out)
	}
}

// QA: the governance refusals of a verdict — the submitter's own, an
// identity RBAC lets approve but the approval rule does not name — are 403
// answers, and the CLI printed the hint of an RBAC refusal: "ask the
// server's administrator to grant it (the rbac: rules …)", which cannot
// help. Each now says what can: another approver, or the rule. An RBAC
// refusal keeps its hint. Exit 2 (a 403) throughout.
func TestApproveRefusalHints(t *testing.T) {
	t.Parallel()
	_, env := approvalServer(t)
	id := submitForApproval(t, env)
	const rbacHint = "the rbac: rules"
	for _, tc := range []struct {
		name, token string
		err, hint   []string
	}{
		{"the submitter", "", []string{"token:admin submitted deploy " + id, "cannot approve or reject it"},
			[]string{"hint: the submitter of a deploy never decides on it", "another approver", "manent cancel " + id}},
		{"an identity the rule does not name", "carol-token", []string{"token:carol is not an approver of deploy " + id, "approvers: group:sre"},
			[]string{"hint: only the approvers the governance rule names", "governance.rules"}},
		{"a token without deployment.approve", "reader-token", []string{"token:reader may not deployment.approve"}, []string{rbacHint}},
	} {
		for _, verb := range []string{"approve", "reject"} {
			code, out, errOut := runCLI(t, env(tc.token), verb, id)
			if code != 2 {
				t.Errorf("%s, %s: exit %d, want 2\nstdout:\n%s\nstderr:\n%s", tc.name, verb, code, out, errOut)
			}
			for _, want := range append(tc.err, tc.hint...) {
				if !strings.Contains(errOut, want) {
					t.Errorf("%s, %s: stderr does not say %q:\n%s", tc.name, verb, want, errOut)
				}
			}
			if len(tc.hint) > 0 && tc.hint[0] != rbacHint && strings.Contains(errOut, rbacHint) {
				t.Errorf("%s, %s: the hint sends to the RBAC rules, which cannot help:\n%s", tc.name, verb, errOut)
			}
		}
	}
}

// QA: `manent steps` of a deploy waiting for its approvals listed every
// step PENDING and said nothing of why none had started (status and
// activity do). Waiting is never silent: when no step runs in a deploy that
// has not ended, steps says, on stderr, what it waits for; stdout stays
// the table.
func TestStepsOfAWaitingDeploySayWhy(t *testing.T) {
	t.Parallel()
	srv, env := approvalServer(t)
	id := submitForApproval(t, env)
	deadline := time.Now().Add(30 * time.Second)
	for {
		d, err := srv.Client().Deployment(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(d.Reason, "approvals 0/2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deploy's reason is still %q after 30s", d.Reason)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errOut := runCLI(t, env("reader-token"), "steps", id)
	if code != 0 || !strings.Contains(out, "PENDING") {
		t.Fatalf("steps: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	for _, want := range []string{"no step is running", "deploy " + id + " is AWAITING_APPROVAL", "approvals 0/2 by group:sre"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("steps of the waiting deploy does not say %q on stderr:\n%s", want, errOut)
		}
	}
	if strings.Contains(out, "no step is running") {
		t.Errorf("the note went to stdout:\n%s", out)
	}
	// -o json is the document alone.
	if code, out, errOut := runCLI(t, env("reader-token"), "steps", id, "-o", "json"); code != 0 || errOut != "" || !strings.HasPrefix(strings.TrimSpace(out), "{") {
		t.Errorf("steps -o json: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
