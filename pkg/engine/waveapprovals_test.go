package engine_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
)

// restWave is a rollout whose second wave, rest, waits for its approval.
const restWave = "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"

// submitWaitingWave submits a deploy of application app with the approval
// rule (the deploy's and its waves'), has approvers approve the deploy
// (as many as the rule asks: the gate passes), and waits until its wave
// rest awaits its approvals.
func submitWaitingWave(f *fixture, app string, rule *plan.ApprovalRule, approvers ...string) string {
	f.t.Helper()
	url, _ := f.artifact("v1", "x")
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
	rule := &plan.ApprovalRule{Count: 2, Approvers: []string{"group:sre"}, Expires: time.Hour}
	id := submitWaitingWave(f, "shop", rule, "alice", "bob")
	ctx := context.Background()
	if _, err := f.eng.ApproveFor(ctx, id, sre("alice"), manent.Approval{Verdict: "approve"}, "rest"); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		return strings.HasPrefix(f.state(id).Reason, "wave rest awaits approval 1/2")
	}, "alice's approval of wave rest to count; the reason is %q", stateOfReason{f, id})
	f.restartRevoking("alice")
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

// Approvals of a wave arriving while the run counts never leave a reason
// that counts fewer than the approvals recorded: each one writes the
// recounted reason under the deploy's row lock, and the run counts under
// that lock too, in the transaction that writes its reason. QA: right
// after `manent approve --wave`, status still said "awaits approval 0/2"
// for about half a second.
func TestWaveApprovalCountNeverGoesBack(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		ctx := context.Background()
		// The wave asks for one approval more than the four given: it waits.
		approvers := []string{"alice", "bob", "ops", "lead"}
		rule := &plan.ApprovalRule{Count: len(approvers) + 1, Approvers: []string{"*"}, Expires: time.Hour}
		for round := range 2 {
			id := submitWaitingWave(f, fmt.Sprintf("count%d", round), rule, append(slices.Clone(approvers), "dev")...)
			wrong := approveWhileWatching(t, f, id, approvers, func(who string) error {
				_, err := f.eng.ApproveFor(ctx, id, manent.Identity{Subject: "token:" + who}, manent.Approval{Verdict: "approve"}, "rest")
				return err
			}, waveApprovalCount, func() bool {
				// The run, woken by each approval, counts again for a
				// moment: the watcher goes on reading until it has.
				steps, err := f.eng.RunSteps(id)
				return err == nil && waveCountSteps(steps) > len(approvers)
			})
			if wrong != "" {
				t.Fatalf("round %d: %s", round, wrong)
			}
			if r := f.state(id).Reason; waveApprovalCount(r) != int64(len(approvers)) {
				t.Fatalf("round %d: reason %q, want wave rest awaits approval %d/%d", round, r, len(approvers), rule.Count)
			}
		}
	})
}

// waveCountSteps is how many times a run counted wave rest's approvals.
func waveCountSteps(steps []dbos.StepInfo) int {
	n := 0
	for _, s := range steps {
		if rest, ok := strings.CutPrefix(s.StepName, "approval[rest]-"); ok {
			if _, err := strconv.Atoi(rest); err == nil {
				n++
			}
		}
	}
	return n
}

// waveApprovalCount is the count "wave rest awaits approval n/m …" says,
// -1 for another reason.
func waveApprovalCount(reason string) int64 {
	return countAfter(reason, "wave rest awaits approval ")
}

// A restart with a new configuration wakes the deploys that wait for a
// wave's approval, as it wakes the gates of waiting deploys: the run
// counts again at once, and the reason no longer counts an approval that
// lapsed — without an approval, a cancel or the 5-minute poll to wake it.
func TestRestartRecountsWaitingWaveApprovals(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		rule := &plan.ApprovalRule{Count: 2, Approvers: []string{"group:sre"}, Expires: time.Hour}
		id := submitWaitingWave(f, "shop", rule, "alice", "bob")
		if _, err := f.eng.ApproveFor(context.Background(), id, sre("alice"), manent.Approval{Verdict: "approve"}, "rest"); err != nil {
			t.Fatal(err)
		}
		// The run counted alice's approval after its wake (its second
		// count runs after its first receive): no message waits for it,
		// only its poll would wake it.
		waitCounted(t, f, id, f.eng.RunSteps, "approval[rest]-1", "wave rest awaits approval 1/2, ", "the run to count alice's approval of wave rest after its wake")
		f.restartRevoking("alice")
		enginetest.Eventually(t, 30*time.Second, func() bool {
			r := f.state(id).Reason
			return strings.HasPrefix(r, "wave rest awaits approval 0/2, ") && strings.Contains(r, "token:alice is no longer a token of this server")
		}, "the restart to wake the run, and the reason to name alice's approval of wave rest as lapsed; it is %q", stateOfReason{f, id})
		if d := f.state(id); d.State != manent.StatePending {
			t.Fatalf("with no approval of wave rest that counts: %s, want PENDING", stateOf{&d})
		}
	})
}
