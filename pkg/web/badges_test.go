package web_test

import (
	"os"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
)

// TestStateBadgesHaveColours: every deploy state and every workload state
// the pages show as a badge (class state-<state>, as the templates' lower
// writes it) has a colour in app.css — a new state (DRIFTED) is not left
// grey among the others.
func TestStateBadgesHaveColours(t *testing.T) {
	css, err := os.ReadFile("static/app.css")
	if err != nil {
		t.Fatal(err)
	}
	coloured := map[string]bool{}
	for _, rule := range strings.Split(string(css), "}") {
		selectors, body, ok := strings.Cut(rule, "{")
		if !ok || !strings.Contains(body, "--c:") {
			continue
		}
		for _, s := range strings.Split(selectors, ",") {
			coloured[strings.TrimSpace(s)] = true
		}
	}
	var states []string
	for _, s := range manent.States {
		states = append(states, string(s))
	}
	states = append(states, clusterstate.WorkloadStates...)
	for _, s := range states {
		class := ".state-" + strings.ToLower(strings.ReplaceAll(s, "_", "-"))
		if !coloured[class] {
			t.Errorf("state %s: no colour (--c) for %s in static/app.css", s, class)
		}
	}
}
