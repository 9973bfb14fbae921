package engine_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// withRules makes the fixture's server use the governance rules src.
func withRules(t *testing.T, src string) func(*node.Config) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "governance.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return func(c *node.Config) { c.Governance.Rules = path }
}

// A deploy accepted before a freeze that starts before it runs fails in its
// config step, naming the freeze; nothing is deployed. (The deploy waits
// for its schedule.at past the freeze's start.)
func TestConfigStepRechecksFreeze(t *testing.T) {
	now := time.Now().UTC().Truncate(time.Second)
	// The freeze must not have begun when the deploy is submitted: the
	// fixture takes a while on a loaded machine, so it begins 6 s out.
	starts := now.Add(6 * time.Second)
	f := newFixture(t, enginetest.SQLite(t), 2, withRules(t, fmt.Sprintf("freezes:\n  - {name: incident, environments: [prod], from: %s, to: %s}\n",
		starts.Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339))))
	url, _ := f.artifact("v1", "x")
	at := fmt.Sprintf("schedule: {at: %s}\n", starts.Add(time.Second).Format(time.RFC3339))
	rec := f.wait(f.submit(descriptorYAML("api", "prod", "1", url, "", at)), 30*time.Second)
	if rec.State != manent.StateError || !strings.Contains(rec.Error, `"incident"`) || !strings.HasPrefix(rec.Error, `step "config" failed`) {
		t.Fatalf("state %s error %q: want ERROR in config naming the freeze", rec.State, rec.Error)
	}
	if s := step(t, rec, "config"); s.Attempts != 1 {
		t.Errorf("config attempts %d, want 1 (a freeze is permanent)", s.Attempts)
	}
}

// A per-region freeze holds the wave that targets the region until it
// reopens; the status says why the wave waits.
func TestWaveWaitsForRegionFreeze(t *testing.T) {
	now := time.Now().UTC()
	reopens := now.Add(3 * time.Second).Truncate(time.Second).Add(time.Second)
	f := newFixture(t, enginetest.SQLite(t), 2, withRules(t, fmt.Sprintf("freezes:\n  - {name: us-maintenance, environments: [prod], regions: [us-1], from: %s, to: %s}\n",
		now.Add(-time.Minute).Format(time.RFC3339), reopens.Format(time.RFC3339))))
	url, _ := f.artifact("v1", "x")
	yml := descriptorYAML("site", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: eu, targets: [eu-1]}\n    - {name: us, targets: [us-1]}\n")
	id := f.submit(yml)
	enginetest.Eventually(t, 30*time.Second, func() bool {
		for _, w := range f.state(id).Rollout {
			if w.Name == "us" && strings.Contains(w.Message, "us-maintenance") {
				return true
			}
		}
		return false
	}, "wave us to say it waits for the freeze")
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	if s := step(t, rec, "deploy[us]"); s.StartedAt == nil || s.StartedAt.Before(reopens) {
		t.Fatalf("deploy[us] started at %v, before the freeze reopened at %v", s.StartedAt, reopens)
	}
}
