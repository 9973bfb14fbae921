package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
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
