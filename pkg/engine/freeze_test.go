package engine_test

import (
	"context"
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

// ladder is a row of freeze windows, one per scope, a second apart. The
// rules are read when the node opens, which takes from under a second to
// several on a loaded machine; a test that needs a freeze to begin or end a
// few seconds after a point it reaches picks, once the node is up, the
// first rung still far enough ahead, instead of betting on a window fixed
// before the node opened.
type ladder struct{ base time.Time }

const (
	ladderGap   = time.Second
	ladderRungs = 180 // three minutes: longer than any fixture takes to open
)

func newLadder() ladder {
	return ladder{base: time.Now().UTC().Truncate(time.Second).Add(time.Second)}
}

// at is the time of rung k.
func (l ladder) at(k int) time.Time { return l.base.Add(time.Duration(k) * ladderGap) }

// rules writes one freeze per rung with rung(k, at(k)).
func (l ladder) rules(rung func(k int, at time.Time) string) string {
	var b strings.Builder
	b.WriteString("freezes:\n")
	for k := range ladderRungs {
		b.WriteString("  - " + rung(k, l.at(k)) + "\n")
	}
	return b.String()
}

// pick returns the first rung at least lead from now.
func (l ladder) pick(t *testing.T, lead time.Duration) int {
	t.Helper()
	for k := range ladderRungs {
		if time.Until(l.at(k)) >= lead {
			return k
		}
	}
	t.Fatalf("no rung is %s ahead: the fixture took longer than %s to open", lead, ladderRungs*ladderGap)
	return 0
}

// A deploy accepted before a freeze that starts before it runs fails in its
// config step, naming the freeze; nothing is deployed. (The deploy waits
// for a deploy to another environment scheduled past the freeze's start:
// one scheduled into the freeze itself is refused at submission.)
func TestConfigStepRechecksFreeze(t *testing.T) {
	// Environment prod-k is frozen from rung k on; the deploy goes to the
	// first one whose freeze has not begun a while after the node is up,
	// so that its admission surely comes before the freeze.
	l := newLadder()
	f := newFixture(t, enginetest.SQLite(t), 2, withRules(t, l.rules(func(k int, at time.Time) string {
		return fmt.Sprintf("{name: incident-%d, environments: [prod-%d], from: %s, to: %s}", k, k, at.Format(time.RFC3339), at.Add(time.Hour).Format(time.RFC3339))
	})))
	k := l.pick(t, 3*time.Second)
	url, _ := f.artifact("v1", "x")
	at := fmt.Sprintf("schedule: {at: %s}\n", l.at(k).Add(time.Second).Format(time.RFC3339))
	dep := f.submit(descriptorYAML("api", "qa", "1", url, "", at))
	rec := f.wait(f.submit(descriptorYAML("api", fmt.Sprintf("prod-%d", k), "1", url, "", "after: ["+dep+"]\n")), 60*time.Second)
	if rec.State != manent.StateError || !strings.Contains(rec.Error, fmt.Sprintf(`"incident-%d"`, k)) || !strings.HasPrefix(rec.Error, `step "config" failed`) {
		t.Fatalf("state %s error %q: want ERROR in config naming the freeze incident-%d", rec.State, rec.Error, k)
	}
	if s := step(t, rec, "config"); s.Attempts != 1 {
		t.Errorf("config attempts %d, want 1 (a freeze is permanent)", s.Attempts)
	}
}

// A per-region freeze holds the wave that targets the region until it
// reopens; the status says why the wave waits.
func TestWaveWaitsForRegionFreeze(t *testing.T) {
	// Region us-k is frozen until rung k; wave us targets the first region
	// whose freeze still has a while to run once the node is up, so that
	// the wave surely gets there before it reopens.
	l := newLadder()
	from := l.base.Add(-time.Minute).Format(time.RFC3339)
	f := newFixture(t, enginetest.SQLite(t), 2, withRules(t, l.rules(func(k int, at time.Time) string {
		return fmt.Sprintf("{name: us-maintenance-%d, environments: [prod], regions: [us-%d], from: %s, to: %s}", k, k, from, at.Format(time.RFC3339))
	})))
	k := l.pick(t, 5*time.Second)
	reopens, freeze := l.at(k), fmt.Sprintf("%q", fmt.Sprintf("us-maintenance-%d", k))
	url, _ := f.artifact("v1", "x")
	yml := descriptorYAML("site", "prod", "1", url, "", fmt.Sprintf("rollout:\n  waves:\n    - {name: eu, targets: [eu-1]}\n    - {name: us, targets: [us-%d]}\n", k))
	id := f.submit(yml)
	enginetest.Eventually(t, 60*time.Second, func() bool {
		for _, w := range f.state(id).Rollout {
			if w.Name == "us" && strings.Contains(w.Message, freeze) {
				return true
			}
		}
		return false
	}, "wave us to say it waits for the freeze %s", freeze)
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	if s := step(t, rec, "deploy[us]"); s.StartedAt == nil || s.StartedAt.Before(reopens) {
		t.Fatalf("deploy[us] started at %v, before the freeze reopened at %v", s.StartedAt, reopens)
	}
}

// A cancel while a wave waits for its region's freeze ends the wait at
// once — it slept for up to an hour at a time, holding a worker slot for
// the freeze's whole length — and compensates the waves already started.
func TestCancelWhileAWaveWaitsForAFreeze(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		from := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		to := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339)
		f := newFixture(t, db, 2, withRules(t, fmt.Sprintf("freezes:\n  - {name: us-night, environments: [prod], regions: [us-1], from: %s, to: %s}\n", from, to)))
		url, _ := f.artifact("v1", "x")
		id := f.submit(descriptorYAML("site", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: eu, targets: [eu-1]}\n    - {name: us, targets: [us-1]}\n") + withRollback)
		enginetest.Eventually(t, 60*time.Second, func() bool {
			for _, w := range f.state(id).Rollout {
				if w.Name == "us" && strings.Contains(w.Message, `"us-night"`) {
					return true
				}
			}
			return false
		}, "wave us to wait for the freeze")
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled || rec.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s): want CANCELLED, rolled back", rec.State, rec.Rollback, rec.Error)
		}
		if s := step(t, rec, "deploy[us]"); s.StartedAt != nil {
			t.Error("deploy[us] ran after the cancel")
		}
		if s := step(t, rec, "rollback:activation[eu]"); s.State != manent.StepSuccess {
			t.Errorf("rollback:activation[eu] = %s, want SUCCESS", s.State)
		}
	})
}

// A deploy whose wave is observed, or waits for a freeze of its regions,
// says so in its own reason — status and activity showed it "running",
// with no step running and no word of what it waited for (only the wave's
// row said it) — and the reason is gone once the deploy goes on.
func TestWaveWaitsSayWhyInTheDeploysReason(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		from := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
		to := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
		f := newFixture(t, db, 2, withRules(t, fmt.Sprintf("freezes:\n  - {name: us-night, environments: [prod], regions: [us-1], from: %s, to: %s}\n", from, to.Format(time.RFC3339))))
		url, _ := f.artifact("v1", "x")

		frozen := f.submit(descriptorYAML("site", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: eu, targets: [eu-1]}\n    - {name: us, targets: [us-1]}\n"))
		want := fmt.Sprintf("wave us waits for freeze \"us-night\" of its regions until %s", to.Format(time.RFC3339))
		var last string
		enginetest.Eventually(t, 60*time.Second, func() bool {
			d := f.state(frozen)
			last = string(d.State) + ": " + d.Reason
			return d.State == manent.StatePending && d.Reason == want
		}, "the deploy to say its wave waits for the freeze (last: %v)", lazyString(func() string { return last }))
		if _, err := f.eng.Cancel(context.Background(), frozen); err != nil {
			t.Fatal(err)
		}
		if rec := f.wait(frozen, 30*time.Second); rec.State != manent.StateCancelled {
			t.Fatalf("frozen deploy: %s (%s)", rec.State, rec.Error)
		}

		restStarted, restGo := filepath.Join(f.dir, "rest-started"), filepath.Join(f.dir, "rest-go")
		target := scriptTarget(fmt.Sprintf(`if [ "$MANENT_ROLLOUT_WAVE" = rest ]; then touch %s; while [ ! -e %s ]; do sleep 0.05; done; fi`, restStarted, restGo))
		observed := f.submit(descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1], observe: 4s}\n    - {name: rest, targets: [eu-2]}\n") + target)
		enginetest.Eventually(t, 60*time.Second, func() bool {
			d := f.state(observed)
			last = string(d.State) + ": " + d.Reason
			return d.State == manent.StatePending && strings.HasPrefix(d.Reason, "wave canary is observed until ") && strings.HasSuffix(d.Reason, ", then its health gate runs")
		}, "the deploy to say its wave is observed (last: %v)", lazyString(func() string { return last }))
		enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(restStarted); return err == nil }, "wave rest to start after the observation")
		if d := f.state(observed); d.Reason != "" {
			t.Errorf("reason once wave rest runs = %q, want none", d.Reason)
		}
		if err := os.WriteFile(restGo, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if rec := f.wait(observed, 60*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("observed deploy: %s (%s)", rec.State, rec.Error)
		}
	})
}
