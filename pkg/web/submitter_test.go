package web_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// The submitter of a deploy that awaits approval cannot approve or reject
// it (the API answers 403): the page does not offer the buttons to them,
// says why, and still offers Cancel; another identity with
// deployment.approve gets the buttons.
func TestSubmitterSeesNoApproveButtons(t *testing.T) {
	s := startUI(t)
	gate := s.gate(t, "gate-submitter")
	id := s.submit(t, "alice-token", gatedDeploy(t, "prod", "8.1", gate))
	s.waitState(t, id, manent.StateAwaitingApproval)

	alice := newBrowser(t, s.URL)
	alice.login("alice-token")
	p := alice.get("/deployments/" + id)
	if p.Status != http.StatusOK || !strings.Contains(p.Body, "awaiting approval") {
		t.Fatalf("deploy page for its submitter: %d\n%s", p.Status, p.Body)
	}
	for _, b := range []string{`id="approve"`, `id="reject"`, `id="approve-form"`} {
		if strings.Contains(p.Body, b) {
			t.Errorf("the submitter sees %s", b)
		}
	}
	if !strings.Contains(p.Body, `id="cancel"`) {
		t.Error("the submitter does not see Cancel")
	}
	if !strings.Contains(p.Body, "You submitted this deploy") {
		t.Errorf("the page does not say why there is no button:\n%s", p.Body)
	}
	// The API decides anyway: posting is still refused.
	if r := alice.do("POST", "/deployments/"+id+"/approve", url.Values{"csrf": {csrf(t, p)}}); r.Status != http.StatusForbidden {
		t.Errorf("the submitter posts approve: %d, want the API's 403", r.Status)
	}

	bob := newBrowser(t, s.URL)
	bob.login("bob-token")
	p = bob.get("/deployments/" + id)
	for _, b := range []string{`id="approve"`, `id="reject"`} {
		if !strings.Contains(p.Body, b) {
			t.Errorf("another approver does not see %s", b)
		}
	}
	if strings.Contains(p.Body, "You submitted this deploy") {
		t.Error("another approver is told they submitted the deploy")
	}
}

// An identity that may approve in the environment but is not among the
// deploy's approvers, and one that approved already, get no buttons (the
// engine would refuse them: 403, 409) and a line that says why.
func TestNonApproversAndDecidedSeeNoButtons(t *testing.T) {
	s := startUI(t, func(c *node.Config) {
		c.Auth.Tokens = append(append([]auth.TokenConfig{}, c.Auth.Tokens...),
			auth.TokenConfig{Name: "olga", SHA256: auth.HashToken("olga-token"), Groups: []string{"ops"}},
			auth.TokenConfig{Name: "carl", SHA256: auth.HashToken("carl-token"), Groups: []string{"sre"}})
		c.RBAC = append(append([]auth.RBACRule{}, c.RBAC...),
			auth.RBACRule{Subjects: []string{"group:ops"}, Permissions: []string{"deployment.read", "deployment.approve"}})
		gov := filepath.Join(t.TempDir(), "governance.yaml")
		if err := os.WriteFile(gov, []byte("approvals:\n  - {environments: [prod], applications: [\"*\"], count: 2, approvers: [\"group:sre\"], expires: 1h}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Governance.Rules = gov
	})
	gate := s.gate(t, "gate-approvers")
	id := s.submit(t, "alice-token", gatedDeploy(t, "prod", "8.2", gate))
	s.waitState(t, id, manent.StateAwaitingApproval)

	olga := newBrowser(t, s.URL)
	olga.login("olga-token")
	p := olga.get("/deployments/" + id)
	if strings.Contains(p.Body, `id="approve-form"`) || !strings.Contains(p.Body, `id="not-approver"`) {
		t.Errorf("an identity outside the approvers: form shown %v, reason shown %v", strings.Contains(p.Body, `id="approve-form"`), strings.Contains(p.Body, `id="not-approver"`))
	}

	bob := newBrowser(t, s.URL)
	bob.login("bob-token")
	p = bob.get("/deployments/" + id)
	if !strings.Contains(p.Body, `id="approve-form"`) {
		t.Fatal("an approver does not see the form")
	}
	if r := bob.do("POST", "/deployments/"+id+"/approve", url.Values{"csrf": {csrf(t, p)}}); r.Status >= 400 {
		t.Fatalf("bob approves: %d %s", r.Status, r.Body)
	}
	p = bob.get("/deployments/" + id)
	if strings.Contains(p.Body, `id="reject"`) || !strings.Contains(p.Body, `id="approved-already"`) {
		t.Errorf("after approving: reject shown %v, line shown %v", strings.Contains(p.Body, `id="reject"`), strings.Contains(p.Body, `id="approved-already"`))
	}
	carl := newBrowser(t, s.URL)
	carl.login("carl-token")
	if p := carl.get("/deployments/" + id); !strings.Contains(p.Body, `id="approve-form"`) {
		t.Error("the second approver does not see the form")
	}
}
