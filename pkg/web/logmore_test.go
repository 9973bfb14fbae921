package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A final deploy whose log goes on past the API's first page
// (api.MaxLogPage lines) shows that page and says where the rest is,
// instead of a log that silently stops.
func TestDeployPageSaysTheLogGoesOn(t *testing.T) {
	s := startUI(t)
	gate := s.gate(t, "g")
	open(t, gate)
	id := s.submit(t, "alice-token", gatedDeploy(t, "staging", "1.0", gate))
	s.waitState(t, id, manent.StateSuccess)
	b := newBrowser(t, s.URL)
	b.login("alice-token")
	if p := b.get("/deployments/" + id); p.Status != 200 || strings.Contains(p.Body, `id="log-more"`) {
		t.Fatalf("a short log: %d, says it goes on", p.Status)
	}
	lines := make([]store.LogEntry, api.MaxLogPage)
	for i := range lines {
		lines[i] = store.LogEntry{Time: time.Now(), Text: fmt.Sprintf("extra %d", i)}
	}
	if err := s.Store.AppendLog(t.Context(), id, "extra", lines); err != nil {
		t.Fatal(err)
	}
	p := b.get("/deployments/" + id)
	if p.Status != 200 || !strings.Contains(p.Body, `id="log-more"`) || !strings.Contains(p.Body, "manent logs "+id) {
		t.Fatalf("a long log: %d, no note that it goes on", p.Status)
	}
	if n := strings.Count(p.Body, `class="line"`); n != api.MaxLogPage {
		t.Fatalf("%d lines on the page, want the first page's %d", n, api.MaxLogPage)
	}
}
