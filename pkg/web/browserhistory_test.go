package web_test

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// TestBrowserHistoryShowsRollbacks opens an environment's history in
// Chromium after a `manent rollback`: the rollback's row names the deploy it
// went back from (rollback_of) and the one whose release it deployed again
// (rollback_from, "restores"), each a link to that deploy, as `manent
// history` prints them in ROLLBACK OF and RESTORES; the other rows name
// neither.
func TestBrowserHistoryShowsRollbacks(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)
	gate := s.gate(t, "g")
	open(t, gate)
	first := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.0", gate))
	s.waitState(t, first, manent.StateSuccess)
	second := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.1", gate))
	s.waitState(t, second, manent.StateSuccess)
	rb, err := s.client("alice-token").Rollback(context.Background(), "billing", "staging", api.RollbackRequest{})
	if err != nil {
		t.Fatalf("rollback: %v", err)
	}
	s.waitState(t, rb.ID, manent.StateSuccess)

	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	run(t, bob, "open the history", chromedp.Navigate(s.URL+"/environments/billing/staging"),
		chromedp.WaitVisible(chromedp.CSS("table.grid")))
	// The row of each deploy: its text, and where its links go.
	rows := value(t, bob, "read the rows", chromedp.Evaluate[map[string]map[string]string](`(function () {
		var out = {};
		document.querySelectorAll('table.grid tbody tr').forEach(function (tr) {
			var id = tr.querySelector('td.id').textContent.trim();
			var of = tr.querySelector('.rollback-of a'), from = tr.querySelector('.rollback-from a');
			out[id] = {
				of: of ? of.getAttribute('href') : '',
				from: from ? from.getAttribute('href') : '',
				text: tr.querySelector('th').innerText.replace(/\s+/g, ' ').trim(),
				current: tr.classList.contains('current') ? 'yes' : ''
			};
		});
		return out;
	}())`))
	if len(rows) != 3 {
		t.Fatalf("the history shows %d deploys, want 3: %v", len(rows), rows)
	}
	got := rows[rb.ID]
	if got["of"] != "/deployments/"+second || got["from"] != "/deployments/"+first {
		t.Errorf("the rollback's row links rollback of %q and restores %q, want /deployments/%s and /deployments/%s (%q)",
			got["of"], got["from"], second, first, got["text"])
	}
	if want := "1.0 CURRENT rollback of " + second + " restores " + first; got["text"] != want || got["current"] != "yes" {
		t.Errorf("the rollback's row reads %q (current %q), want %q, current", got["text"], got["current"], want)
	}
	for _, id := range []string{first, second} {
		if r := rows[id]; r["of"] != "" || r["from"] != "" || r["current"] != "" {
			t.Errorf("deploy %s's row: %v, want no rollback link and not current", id, r)
		}
	}
}
