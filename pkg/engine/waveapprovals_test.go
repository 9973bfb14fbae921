package engine_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
)

// restWave is a rollout whose second wave, rest, waits for its approval.
const restWave = "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"

// submitWaitingWave submits a deploy of application app whose approval
// rule asks for count approvals by group:sre, has alice and bob approve
// the deploy (count 2: the gate passes), and waits until its wave rest
// awaits its approvals.
func submitWaitingWave(f *fixture, app string, count int, approvers ...string) string {
	f.t.Helper()
	url, _ := f.artifact("v1", "x")
	rule := &plan.ApprovalRule{Count: count, Approvers: []string{"group:sre"}, Expires: time.Hour}
	id := f.submit(descriptorYAML(app, "prod", "1", url, "", restWave), waits(plan.Waits{Approvals: rule}))
	f.waitState(id, manent.StateAwaitingApproval)
	for _, who := range approvers {
		if _, err := f.eng.ApproveFor(context.Background(), id, sre(who), manent.Approval{Verdict: "approve"}, ""); err != nil {
			f.t.Fatal(err)
		}
	}
	enginetest.Eventually(f.t, 60*time.Second, func() bool {
		return strings.HasPrefix(f.state(id).Reason, "wave rest awaits approval 0/")
	}, "wave rest to wait for its approvals; the reason is %q", stateOfReason{f, id})
	return id
}

// sre is token:who of group sre, as the fixture's tokens are.
func sre(who string) manent.Identity {
	return manent.Identity{Subject: "token:" + who, Groups: []string{"sre"}}
}

// A wave's approval counts while its approver could give it, as the
// deploy's own do: a static token revoked (or no longer an approver) by a
// restart with a new configuration no longer counts towards the wave, and
// the reason names it. QA: a wave approved by a since-revoked token and
// one more went on with one valid approval of the two required.
func TestWaveApprovalOfARevokedApproverLapses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1)
	id := submitWaitingWave(f, "shop", 2, "alice", "bob")
	ctx := context.Background()
	if _, err := f.eng.ApproveFor(ctx, id, sre("alice"), manent.Approval{Verdict: "approve"}, "rest"); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		return strings.HasPrefix(f.state(id).Reason, "wave rest awaits approval 1/2")
	}, "alice's approval of wave rest to count; the reason is %q", stateOfReason{f, id})
	// A restart revokes alice's token.
	f.node.Close(5 * time.Second)
	f.cfg.Auth.Tokens = slices.DeleteFunc(f.cfg.Auth.Tokens, func(c auth.TokenConfig) bool { return c.Name == "alice" })
	f.open()
	// Bob's approval wakes the run: it counts his alone.
	if _, err := f.eng.ApproveFor(ctx, id, sre("bob"), manent.Approval{Verdict: "approve"}, "rest"); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d := f.state(id)
		if d.State.Final() {
			t.Fatalf("the deploy went on with alice's lapsed approval of wave rest: %s", stateOf{&d})
		}
		return strings.HasPrefix(d.Reason, "wave rest awaits approval 1/2") &&
			strings.Contains(d.Reason, "approvals that no longer count: token:alice is no longer a token of this server")
	}, "bob's approval of wave rest to count alone, and the reason to name alice's as lapsed; it is %q", stateOfReason{f, id})
	if w, err := f.eng.WaitingWave(ctx, id); err != nil || w != "rest" {
		t.Fatalf("the wave that waits: %q %v, want rest", w, err)
	}
}
