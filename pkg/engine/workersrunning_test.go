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
)

// A worker's running count is the deploys that hold one of its slots: a
// deploy waiting between rollout waves (here, for a wave's approval) holds
// none and is counted apart, as waiting. With workers.slots 1, one deploy
// running a step and one waiting for its wave's approval read running 2,
// past the slots (GET /api/v1/workers, manent-server admin workers).
func TestWorkersRunningCountsSlotsHeld(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("v1", "one")
		started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
		waves := "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"
		waiting := f.submit(descriptorYAML("shop", "prod", "1", url, "", waves) + scriptTarget("true"))
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(waiting).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")
		hold := fmt.Sprintf("touch %s && while [ ! -e %s ]; do sleep 0.05; done", started, release)
		holder := f.submit(descriptorYAML("ledger", "prod", "1", url, "", fmt.Sprintf("steps:\n  - {name: hold, after: qa, plugin: script, with: {command: [sh, -c, %q]}}\n", hold)))
		enginetest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "the holder's step to start")

		var got string
		enginetest.Eventually(t, 30*time.Second, func() bool {
			ws, err := f.eng.Workers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got = fmt.Sprintf("%+v", ws)
			return len(ws) == 1 && ws[0].Running == 1 && ws[0].Waiting == 1
		}, "the worker to read running 1 (the holder), waiting 1 (the deploy between waves): %s", lazyString(func() string { return got }))

		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := f.eng.Approve(context.Background(), waiting, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{holder, waiting} {
			if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
				t.Fatalf("deploy %s: %s (%s)", id, rec.State, rec.Error)
			}
		}
		// A deploy reads SUCCESS a moment before its workflow returns and
		// gives its slot back (and the counts are those the worker last
		// recorded): wait for them.
		enginetest.Eventually(t, 30*time.Second, func() bool {
			ws, err := f.eng.Workers(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			got = fmt.Sprintf("%+v", ws)
			return len(ws) == 1 && ws[0].Running == 0 && ws[0].Waiting == 0
		}, "all ended: the worker to read running 0, waiting 0: %s", lazyString(func() string { return got }))
	})
}
