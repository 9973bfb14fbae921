package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// waveDeploy is a deploy of billing to env in two waves, the second
// waiting for an approval; its first step prints a coloured line, waits
// (bounded) for gate, then prints another.
func waveDeploy(t testing.TB, env, version, gate string) []byte {
	art := filepath.Join(t.TempDir(), "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`printf '\033[1;31mred %s\033[0m plain <b>x</b>\n'; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; printf '\033[32mgreen %s\033[0m \033]8;;https://evil.example/\033\\link\033]8;;\033\\\033[2J end\n'`, version, gate, version)
	return []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: %q\nartifact: {url: %q}\n"+
		"steps:\n  - {name: prepare, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n"+
		"rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n",
		env, version, "file://"+art, script))
}

// waitWave waits until deploy id waits for the approval of wave.
func (s *uiServer) waitWave(t testing.TB, id, wave string) {
	t.Helper()
	c := s.client("admin-token")
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := c.Deployment(context.Background(), id)
		return err == nil && d.State == manent.StatePending && strings.Contains(d.Reason, "wave "+wave+" awaits approval")
	}, "deploy %s to wait for the approval of wave %s", id, wave)
}

// A wave waiting for its approval shows on the deploy page: which wave,
// who may approve, and the buttons for an identity the engine would let
// decide; the others read why they cannot. The buttons post to the same
// routes as the deploy's approval (CSRF, then the API decides) and are
// pinned to the wave shown: a stale page's verdict never counts for what
// waits by then.
func TestWaveApprovalOnThePage(t *testing.T) {
	s := startUI(t)
	gate := s.gate(t, "wave-gate")
	open(t, gate)
	id := s.submit(t, "alice-token", waveDeploy(t, "staging", "3.0", gate))
	s.waitWave(t, id, "rest")
	path := "/deployments/" + id

	bob, alice, vera := newBrowser(t, s.URL), newBrowser(t, s.URL), newBrowser(t, s.URL)
	bob.login("bob-token")
	alice.login("alice-token")
	vera.login("vera-token")

	for _, tt := range []struct {
		who  *browser
		name string
		want []string
		not  []string
	}{
		{bob, "an approver", []string{`id="wave-approval"`, "Wave rest waits for its approval", `0 of 1`,
			"Who may approve: anyone who may approve deploys of billing in staging (deployment.approve), except the submitter",
			`id="approve-wave"`, `id="reject-wave"`, `name="wave" value="rest"`, `maxlength="4096"`}, nil},
		{alice, "the submitter", []string{`id="wave-approval"`, `id="wave-submitter"`}, []string{`id="approve-wave"`}},
		{vera, "a reader", []string{`id="wave-approval"`, `id="wave-may-not-approve"`, "deployment.approve"}, []string{`id="approve-wave"`}},
	} {
		p := tt.who.get(path)
		if p.Status != http.StatusOK {
			t.Fatalf("%s: GET %s: %d", tt.name, path, p.Status)
		}
		for _, w := range tt.want {
			if !strings.Contains(p.Body, w) {
				t.Errorf("%s: no %q in the page", tt.name, w)
			}
		}
		for _, n := range tt.not {
			if strings.Contains(p.Body, n) {
				t.Errorf("%s: %q in the page", tt.name, n)
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	token := csrf(t, bob.get(path))
	post := func(form url.Values) page { return bob.do(http.MethodPost, path+"/approve", form) }
	// Without the CSRF token: refused, nothing recorded.
	if p := post(url.Values{"wave": {"rest"}}); p.Status != http.StatusForbidden {
		t.Fatalf("approve without CSRF: %d", p.Status)
	}
	// A page that showed the deploy's own approval, or another wave,
	// decides nothing on wave rest.
	for _, wave := range []string{"", "canary"} {
		p := post(url.Values{"csrf": {token}, "wave": {wave}})
		if p.Status != http.StatusConflict || !strings.Contains(p.Body, "wave rest waits") {
			t.Fatalf("a verdict for %q while wave rest waits: %d\n%s", wave, p.Status, p.Body)
		}
	}
	d, err := s.client("admin-token").Deployment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if w := d.Rollout[1]; len(w.Approvals) != 0 || w.ApprovalsRequired != 1 {
		t.Fatalf("wave rest: %d approvals, %d required; want none recorded, 1 required", len(w.Approvals), w.ApprovalsRequired)
	}
	// The button: the wave is approved, the deploy goes on and ends.
	if p := post(url.Values{"csrf": {token}, "wave": {"rest"}, "comment": {"canary is clean"}}); p.Status != http.StatusSeeOther {
		t.Fatalf("approve the wave: %d\n%s", p.Status, p.Body)
	}
	s.waitState(t, id, manent.StateSuccess)
	p := vera.get(path)
	if !strings.Contains(p.Body, "token:bob") || !strings.Contains(p.Body, "canary is clean") || strings.Contains(p.Body, `id="wave-approval"`) {
		t.Errorf("the finished deploy's page does not list the wave's approval (or still shows it waiting):\n%s", p.Body)
	}
}
