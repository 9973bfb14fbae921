package engine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

func (f *fixture) state(id string) *manent.Deployment {
	f.t.Helper()
	rec, err := f.eng.Refresh(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return &rec.Deployment
}

// waitState waits up to a minute for deploy id to be in state want; if it
// does not get there, the failure says where it stands.
func (f *fixture) waitState(id string, want manent.State) *manent.Deployment {
	f.t.Helper()
	var d *manent.Deployment
	enginetest.Eventually(f.t, 60*time.Second, func() bool { d = f.state(id); return d.State == want }, "deploy %s to be %s; it is %s", id, want, stateOf{&d})
	return d
}

// stateOf prints a deploy's state, reason, error and steps when formatted:
// the last one a wait read, at the moment the wait gives up.
type stateOf struct{ d **manent.Deployment }

func (s stateOf) String() string {
	d := *s.d
	if d == nil {
		return "unknown"
	}
	var steps []string
	for _, st := range d.Steps {
		steps = append(steps, fmt.Sprintf("%s:%s", st.Name, st.State))
	}
	return fmt.Sprintf("%s (reason %q, error %q, steps %s)", d.State, d.Reason, d.Error, strings.Join(steps, " "))
}

func noStepRan(t *testing.T, d *manent.Deployment) {
	t.Helper()
	for _, s := range d.Steps {
		if s.StartedAt != nil {
			t.Errorf("step %s ran; nothing should have", s.Name)
		}
	}
}

func waits(w plan.Waits) func(*plan.Input) { return func(in *plan.Input) { in.Waits = w } }

// SUBMITTED → DELAYED → ENQUEUED at schedule.at → SUCCESS, surviving a restart.
// The test needs the submit and the restart to happen before schedule.at:
// on a loaded machine they may not, and it tries again with a longer wait
// (a new version, so the deploys do not meet); a deploy not DELAYED while
// schedule.at is still ahead is a failure at once.
func TestDelayedThenEnqueued(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "x")
		for i, wait := range []time.Duration{3 * time.Second, 8 * time.Second, 20 * time.Second} {
			at := time.Now().Add(wait)
			id := f.submit(descriptorYAML("d", "prod", fmt.Sprint(i+1), url, "", ""), waits(plan.Waits{At: &at}))
			if d := f.state(id); d.State != manent.StateDelayed {
				if time.Now().Before(at) {
					t.Fatalf("state %s, want DELAYED", d.State)
				}
				t.Logf("the submit ended after schedule.at (%s ahead): again with a longer wait", wait)
				f.waitState(id, manent.StateSuccess)
				continue
			}
			f.restart()
			restarted := time.Now()
			d := f.waitState(id, manent.StateSuccess)
			if d.StartedAt == nil || d.StartedAt.Before(at) {
				t.Fatalf("started at %v, before schedule.at %v", d.StartedAt, at)
			}
			if restarted.Before(at) {
				return
			}
			t.Logf("the restart ended after schedule.at (%s ahead): again with a longer wait", wait)
		}
		t.Fatal("the machine never submitted and restarted within 20 s")
	})
}

// A waiting deploy is cancelled at once and never runs.
func TestCancelWaitingIsImmediate(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "x")
	at := time.Now().Add(time.Hour)
	id := f.submit(descriptorYAML("d", "prod", "1", url, "", ""), waits(plan.Waits{At: &at}))
	// It says what it waits for (status, activity).
	if rec, err := f.eng.Store().Deployment(context.Background(), id); err != nil || rec.State != manent.StateDelayed ||
		rec.Reason != "schedule.at "+at.UTC().Format(time.RFC3339) {
		t.Fatalf("waiting: %v %s %q", err, rec.State, rec.Reason)
	}
	rec, err := f.eng.Cancel(context.Background(), id)
	if err != nil || rec.State != manent.StateCancelled {
		t.Fatalf("cancel: %v %+v", err, rec)
	}
	noStepRan(t, &rec.Deployment)
}

// delayWaits returns the deadlines of the waits deploy id's gate recorded
// (DBOS records each Recv's deadline as a DBOS.sleep step before it waits)
// and how many times it read the time left to schedule.at.
func (f *fixture) delayWaits(id string) (deadlines []time.Time, reads int) {
	f.t.Helper()
	steps, err := f.eng.GateSteps(id)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, s := range steps {
		switch {
		case strings.HasPrefix(s.StepName, "gate:delay-"):
			reads++
		case s.StepName == "DBOS.sleep":
			ms, err := strconv.ParseFloat(strings.Trim(fmt.Sprint(s.Output), `"`), 64)
			if err != nil {
				f.t.Fatalf("the deadline a DBOS.sleep step recorded: %v (%T %v)", err, s.Output, s.Output)
			}
			deadlines = append(deadlines, time.UnixMilli(int64(ms)))
		}
	}
	return deadlines, reads
}

// near reports whether a and b are less than a second apart.
func near(a, b time.Time) bool { d := a.Sub(b); return d > -time.Second && d < time.Second }

// A deploy scheduled a year ahead waits in one durable wait until
// schedule.at — it woke every 5 minutes, ~105,000 wakes of DBOS steps and
// rows over the year — that a restart resumes (the same wait, no new one)
// and a cancel ends at once.
func TestLongDelayIsOneWait(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "x")
		at := time.Now().Add(365 * 24 * time.Hour)
		id := f.submit(descriptorYAML("d", "prod", "1", url, "", ""), waits(plan.Waits{At: &at}))
		var deadlines []time.Time
		enginetest.Eventually(t, 60*time.Second, func() bool { deadlines, _ = f.delayWaits(id); return len(deadlines) > 0 },
			"the gate of %s to wait", id)
		if !near(deadlines[0], at) {
			t.Fatalf("the gate waits until %s, want schedule.at %s", deadlines[0].UTC().Format(time.RFC3339), at.UTC().Format(time.RFC3339))
		}
		f.restart()
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 60*time.Second, func() bool {
			ws, err := f.eng.WorkflowStatus(id + ".gate")
			return err == nil && ws == dbos.WorkflowStatusSuccess
		}, "the gate of the cancelled %s to end", id)
		if deadlines, reads := f.delayWaits(id); len(deadlines) != 1 || reads != 1 {
			t.Errorf("the gate waited %d times (%v) and read the time left %d times; want once each", len(deadlines), deadlines, reads)
		}
		if d := f.state(id); d.State != manent.StateCancelled {
			t.Errorf("state %s, want CANCELLED", d.State)
		}
	})
}

// A gate that waited under a release that woke every gatePoll (steps
// gate:delay-0, its wait, gate:delay-1, …) finishes under this release:
// a restart replays its recorded wakes, it waits once for the rest, and
// the deploy starts at schedule.at.
func TestDelayOfThePreviousReleaseFinishes(t *testing.T) {
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "x")
	engine.SetDelayPoll(100 * time.Millisecond)
	t.Cleanup(func() { engine.SetDelayPoll(0) })
	at := time.Now().Add(10 * time.Second)
	id := f.submit(descriptorYAML("d", "prod", "1", url, "", ""), waits(plan.Waits{At: &at}))
	enginetest.Eventually(t, 60*time.Second, func() bool { _, reads := f.delayWaits(id); return reads >= 3 },
		"the gate of %s to wake twice", id)
	engine.SetDelayPoll(0)
	f.restart()
	restarted := time.Now()
	d := f.waitState(id, manent.StateSuccess)
	if d.StartedAt == nil || d.StartedAt.Before(at) {
		t.Fatalf("started at %v, before schedule.at %v", d.StartedAt, at)
	}
	// Unless the machine restarted only after schedule.at, the rest was
	// one wait until schedule.at — not the default poll's, minutes past it,
	// nor one past it by the time between the step reading the time left
	// and the wait (1.5 s on a loaded machine). A gate that resumed only
	// after schedule.at (a slow recovery) waited no more: its last wait is
	// one of the 100 ms waits from before the restart.
	if deadlines, _ := f.delayWaits(id); restarted.Before(at.Add(-time.Second)) {
		if end := deadlines[len(deadlines)-1]; end.After(restarted.Add(500*time.Millisecond)) && !near(end, at) {
			t.Errorf("the last wait ended at %s, want schedule.at %s", end, at)
		}
	}
}

// gated submits a deploy whose custom step waits for a file, and returns
// its id and the file that releases it.
func (f *fixture) gated(app, env, version string, fail bool) (string, string) {
	url, _ := f.artifact(app+version, "x")
	release := filepath.Join(f.dir, "release-"+app+env+version)
	status := "0"
	if fail {
		status = "1"
	}
	cmd := fmt.Sprintf(`i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; exit %s`, release, status)
	id := f.submit(descriptorYAML(app, env, version, url, "", fmt.Sprintf("max_retries: 0\nsteps:\n  - {name: gate, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n", cmd)))
	return id, release
}

// WAITING_DEPENDENCY → ENQUEUED when the dependency succeeds (woken by it),
// → DEPENDENCY_FAILED when it fails; both survive a restart.
func TestDependencies(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 4)
		url, _ := f.artifact("b", "x")
		a, releaseA := f.gated("a", "prod", "1", false)
		b := f.submit(descriptorYAML("b", "prod", "1", url, "", ""), waits(plan.Waits{After: []string{a}}))
		f.waitState(b, manent.StateWaitingDependency)
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(b).Reason, a) }, "the reason to name %s", a)
		a2, releaseA2 := f.gated("a", "qa", "2", true)
		c := f.submit(descriptorYAML("c", "prod", "1", url, "", ""), waits(plan.Waits{After: []string{a, a2}}))
		f.waitState(c, manent.StateWaitingDependency)

		f.restart()
		_ = os.WriteFile(releaseA, nil, 0o644)
		_ = os.WriteFile(releaseA2, nil, 0o644)
		f.waitState(a, manent.StateSuccess)
		start := time.Now()
		f.waitState(b, manent.StateSuccess)
		t.Logf("dependent finished %s after its dependency", time.Since(start))
		d := f.waitState(c, manent.StateDependencyFailed)
		if !strings.Contains(d.Error, a2) || !strings.Contains(d.Error, "ERROR") {
			t.Errorf("error %q: want the failed dependency named", d.Error)
		}
		noStepRan(t, d)
	})
}

// AWAITING_APPROVAL: the submitter cannot approve, an identity counts once,
// an approval for another plan does not count; enough approvals → ENQUEUED
// with the same id; survives a restart.
func TestApprovals(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "x")
		rule := &plan.ApprovalRule{Count: 2, Approvers: []string{"group:sre", "oidc:lead@example.com"}, Expires: time.Hour}
		id := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
		f.waitState(id, manent.StateAwaitingApproval)
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "approvals 0/2") }, "the reason to count approvals")
		d := f.state(id)
		ctx := context.Background()
		approve := func(who string, groups []string, digest string) error {
			_, err := f.eng.Approve(ctx, id, manent.Identity{Subject: who, Groups: groups}, manent.Approval{Verdict: "approve", PlanDigest: digest})
			return err
		}
		if err := approve("token:test", []string{"sre"}, ""); manent.ErrorCode(err) != manent.EForbidden {
			t.Fatalf("the submitter approving: %v, want forbidden", err)
		}
		if err := approve("token:dev", []string{"dev"}, ""); manent.ErrorCode(err) != manent.EForbidden {
			t.Fatalf("a non-approver approving: %v, want forbidden", err)
		}
		if err := approve("token:alice", []string{"sre"}, "0000"); manent.ErrorCode(err) != manent.EConflict {
			t.Fatalf("approving another plan: %v, want conflict", err)
		}
		if err := approve("token:alice", []string{"sre"}, d.PlanDigest); err != nil {
			t.Fatal(err)
		}
		if err := approve("token:alice", []string{"sre"}, ""); manent.ErrorCode(err) != manent.EConflict {
			t.Fatalf("alice approving twice: %v, want conflict", err)
		}
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "approvals 1/2") }, "one approval counted")
		f.restart()
		if d := f.state(id); d.State != manent.StateAwaitingApproval {
			t.Fatalf("after restart: %s", d.State)
		}
		if err := approve("oidc:lead@example.com", nil, ""); err != nil {
			t.Fatal(err)
		}
		d = f.waitState(id, manent.StateSuccess)
		if len(d.Approvals) != 2 {
			t.Errorf("approvals %+v", d.Approvals)
		}
	})
}

// AWAITING_APPROVAL → REJECTED and → EXPIRED: nothing runs.
func TestRejectedAndExpired(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}, Expires: time.Hour}}))
	f.waitState(id, manent.StateAwaitingApproval)
	if _, err := f.eng.Approve(context.Background(), id, manent.Identity{Subject: "token:bob"}, manent.Approval{Verdict: "reject", Comment: "not on a Friday"}); err != nil {
		t.Fatal(err)
	}
	d := f.waitState(id, manent.StateRejected)
	if !strings.Contains(d.Error, "token:bob") || !strings.Contains(d.Error, "not on a Friday") {
		t.Errorf("error %q", d.Error)
	}
	noStepRan(t, d)

	id = f.submit(descriptorYAML("pay", "prod", "2", url, "", ""), waits(plan.Waits{Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}, Expires: 2 * time.Second}}))
	d = f.waitState(id, manent.StateExpired)
	if !strings.HasSuffix(d.Error, " without 1 approval") {
		t.Errorf("error %q, want it to end \"without 1 approval\"", d.Error)
	}
	noStepRan(t, d)
}

// WAITING_DEPENDENCY → AWAITING_APPROVAL → ENQUEUED.
func TestDependencyThenApproval(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 4)
	url, _ := f.artifact("b", "x")
	a, release := f.gated("a", "prod", "1", false)
	b := f.submit(descriptorYAML("b", "prod", "1", url, "", ""), waits(plan.Waits{After: []string{a}, Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}}}))
	f.waitState(b, manent.StateWaitingDependency)
	_ = os.WriteFile(release, nil, 0o644)
	f.waitState(b, manent.StateAwaitingApproval)
	if _, err := f.eng.Approve(context.Background(), b, manent.Identity{Subject: "token:ops"}, manent.Approval{Verdict: "approve"}); err != nil {
		t.Fatal(err)
	}
	f.waitState(b, manent.StateSuccess)
}

// Two deploys of one environment approved one after the other run in that
// order, however their gates race to the queue: the second waits in its
// gate, saying for which deploy, until the first is queued. Before, the
// second could run first and the first then ended ERROR at config,
// claiming a newer release became current "while it waited for its
// approval". The hook holds the first gate at the queue's door until the
// second has decided what to do (or for 10 s).
func TestApprovedDeploysRunInApprovalOrder(t *testing.T) {
	f := newFixture(t, enginetest.SQLite(t), 4)
	url, _ := f.artifact("v", "x")
	rule := &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}}
	a := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
	b := f.submit(descriptorYAML("pay", "prod", "2", url, "", ""), waits(plan.Waits{Approvals: rule}))
	f.waitState(a, manent.StateAwaitingApproval)
	f.waitState(b, manent.StateAwaitingApproval)
	engine.SetGateEnqueueHook(func(id string) {
		if id != a {
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			d := f.state(b)
			if d.State != manent.StateAwaitingApproval || strings.Contains(d.Reason, "queued after "+a) {
				return
			}
			<-time.After(20 * time.Millisecond) // polling the other gate's progress
		}
	})
	t.Cleanup(func() { engine.SetGateEnqueueHook(nil) })
	ops := manent.Identity{Subject: "token:ops"}
	if _, err := f.eng.Approve(context.Background(), a, ops, manent.Approval{Verdict: "approve"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Approve(context.Background(), b, ops, manent.Approval{Verdict: "approve"}); err != nil {
		t.Fatal(err)
	}
	da := f.waitState(a, manent.StateSuccess)
	db := f.waitState(b, manent.StateSuccess)
	if da.StartedAt == nil || db.StartedAt == nil || !da.StartedAt.Before(*db.StartedAt) {
		t.Errorf("started at %v (%s) and %v (%s): want the first approved first", da.StartedAt, a, db.StartedAt, b)
	}
	cur, err := f.st.Current(context.Background(), "pay", "prod")
	if err != nil || cur == nil || cur.DeploymentID != b {
		t.Errorf("current = %+v, %v; want %s, approved last", cur, err, b)
	}
}

// A deploy whose approvals are complete, waiting in its gate for an older
// approved deploy to be queued first, cannot be rejected any more (409:
// cancel it instead) — before, the rejection was recorded and ignored, and
// the deploy ran. A rejection that raced the last approval (recorded
// before Approve could see the count reached; written here directly) still
// ends it REJECTED before it is queued.
func TestRejectionDuringTheOrderWait(t *testing.T) {
	f := newFixture(t, enginetest.SQLite(t), 4)
	url, _ := f.artifact("v", "x")
	rule := &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}}
	a := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
	b := f.submit(descriptorYAML("pay", "prod", "2", url, "", ""), waits(plan.Waits{Approvals: rule}))
	f.waitState(a, manent.StateAwaitingApproval)
	f.waitState(b, manent.StateAwaitingApproval)
	ctx := context.Background()
	var refusal error
	engine.SetGateEnqueueHook(func(id string) {
		if id != a {
			return
		}
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) && !strings.Contains(f.state(b).Reason, "queued after "+a) {
			<-time.After(20 * time.Millisecond) // polling the other gate's progress
		}
		_, refusal = f.eng.Approve(ctx, b, manent.Identity{Subject: "token:bob"}, manent.Approval{Verdict: "reject", Comment: "too late"})
		if err := f.st.AddApproval(ctx, b, manent.Approval{Identity: "token:carol", Verdict: "reject", Comment: "raced", Time: time.Now()}, nil); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(func() { engine.SetGateEnqueueHook(nil) })
	ops := manent.Identity{Subject: "token:ops"}
	if _, err := f.eng.Approve(ctx, a, ops, manent.Approval{Verdict: "approve"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.eng.Approve(ctx, b, ops, manent.Approval{Verdict: "approve"}); err != nil {
		t.Fatal(err)
	}
	f.waitState(a, manent.StateSuccess)
	d := f.waitState(b, manent.StateRejected)
	if manent.ErrorCode(refusal) != manent.EConflict || !strings.Contains(manent.ErrorMessage(refusal), "already has its 1 approval and is on its way to the queue: cancel it to stop it") {
		t.Errorf("a rejection after the approvals were complete: %v, want a 409 saying to cancel", refusal)
	}
	if !strings.Contains(d.Error, "rejected by token:carol: raced") {
		t.Errorf("error %q, want the raced rejection", d.Error)
	}
	noStepRan(t, d)
}

// A rejection that passed Approve's checks while the last approval was
// being given commits after the gate saw the deploy approved but before it
// queued it: the gate finds it when it queues the deploy, which ends
// REJECTED without running. Once the deploy is queued, a verdict is refused
// (409) and not recorded.
func TestRejectionJustBeforeTheQueue(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v", "x")
		rule := &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}}
		a := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
		b := f.submit(descriptorYAML("pay", "qa", "1", url, "", ""), waits(plan.Waits{Approvals: rule}))
		f.waitState(a, manent.StateAwaitingApproval)
		f.waitState(b, manent.StateAwaitingApproval)
		ctx := context.Background()
		engine.SetGateEnqueueHook(func(id string) {
			if id != a {
				return
			}
			// What Approve records after its checks passed (the raced
			// rejection): straight into the store.
			if err := f.st.AddApproval(ctx, a, manent.Approval{Identity: "token:carol", Verdict: "reject", Comment: "raced", Time: time.Now()}, nil); err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(func() { engine.SetGateEnqueueHook(nil) })
		ops := manent.Identity{Subject: "token:ops"}
		for _, id := range []string{a, b} {
			if _, err := f.eng.Approve(ctx, id, ops, manent.Approval{Verdict: "approve"}); err != nil {
				t.Fatal(err)
			}
		}
		d := f.waitState(a, manent.StateRejected)
		if !strings.Contains(d.Error, "rejected by token:carol: raced") {
			t.Errorf("error %q, want the raced rejection", d.Error)
		}
		noStepRan(t, d)
		// b was queued: a verdict now is refused by the store, even past
		// Approve's own checks, and not recorded.
		f.waitState(b, manent.StateSuccess)
		err := f.st.AddApproval(ctx, b, manent.Approval{Identity: "token:carol", Verdict: "reject", Time: time.Now()}, nil)
		if !errors.Is(err, store.ErrNotAwaitingApproval) {
			t.Errorf("a verdict on a finished deploy: %v, want ErrNotAwaitingApproval", err)
		}
		as, err := f.st.Approvals(ctx, b)
		if err != nil || len(as) != 1 {
			t.Errorf("b's verdicts: %+v %v, want only the approval", as, err)
		}
	})
}

// QA: an approval that arrived as the deploy's approval window expired —
// after the gate counted none, before it ended the deploy — was accepted
// (200, recorded, an `approval` event) and the deploy then ended EXPIRED
// "without 1 approval". The gate decides the expiry in the transaction
// that ends the deploy, under its row lock: a verdict recorded before is
// counted (here the deploy runs), one after is refused (409).
func TestApprovalAsTheWindowExpires(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "x")
		var approveErr error
		var once sync.Once
		approved := make(chan struct{})
		engine.SetGateExpireHook(func(id string) {
			once.Do(func() {
				_, approveErr = f.eng.Approve(context.Background(), id, manent.Identity{Subject: "token:ops"}, manent.Approval{Verdict: "approve"})
				close(approved)
			})
		})
		t.Cleanup(func() { engine.SetGateExpireHook(nil) })
		id := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""), waits(plan.Waits{Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}, Expires: time.Second}}))
		select {
		case <-approved:
		case <-time.After(30 * time.Second):
			t.Fatal("the approval window never expired")
		}
		var d *manent.Deployment
		enginetest.Eventually(t, 30*time.Second, func() bool { d = f.state(id); return d.State.Final() }, "the deploy to end")
		switch {
		case approveErr == nil && d.State != manent.StateSuccess:
			t.Errorf("the approval was accepted and the deploy ended %s (%s), want it to run", d.State, d.Error)
		case approveErr != nil && (d.State != manent.StateExpired || manent.ErrorCode(approveErr) != manent.EConflict):
			t.Errorf("approval %v and the deploy %s, want a 409 and EXPIRED", approveErr, d.State)
		}
	})
}

// Verdicts racing on two workers sharing PostgreSQL: three approvals and a
// rejection of a deploy needing one approval, sent at once through both
// engines. Exactly one outcome: an accepted rejection ends it REJECTED
// (nothing ran), else it runs once; every accepted verdict is recorded
// once with one `approval` event, a refused one not at all.
func TestVerdictsRaceOnTwoWorkers(t *testing.T) {
	t.Parallel()
	db := enginetest.Postgres(t)
	f1 := newFixture(t, db, 2)
	f2 := newFixture(t, db, 2, func(c *node.Config) { c.ExecutorID = "test-2" })
	url, _ := f1.artifact("v1", "x")
	for round := range 3 {
		id := f1.submit(descriptorYAML("pay", "prod", fmt.Sprint(round+1), url, "", ""), waits(plan.Waits{Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}, Expires: time.Hour}}))
		f1.waitState(id, manent.StateAwaitingApproval)
		verdicts := []string{"approve", "reject", "approve", "approve"}
		errs := make([]error, len(verdicts))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, v := range verdicts {
			eng := f1.eng
			if i%2 == 1 {
				eng = f2.eng
			}
			wg.Go(func() {
				<-start
				_, errs[i] = eng.Approve(context.Background(), id, manent.Identity{Subject: fmt.Sprintf("token:u%d", i)}, manent.Approval{Verdict: v})
			})
		}
		close(start)
		wg.Wait()
		var d *manent.Deployment
		enginetest.Eventually(t, 30*time.Second, func() bool { d = f2.state(id); return d.State.Final() }, "deploy %s to end", id)
		accepted, rejected := 0, false
		for i, err := range errs {
			switch {
			case err == nil:
				accepted++
				rejected = rejected || verdicts[i] == "reject"
			case manent.ErrorCode(err) != manent.EConflict:
				t.Errorf("verdict %d (%s): %v, want accepted or 409", i, verdicts[i], err)
			}
		}
		if rejected && d.State != manent.StateRejected || !rejected && d.State != manent.StateSuccess {
			t.Errorf("round %d: accepted %d verdicts (a rejection: %v), the deploy %s (%s)", round, accepted, rejected, d.State, d.Error)
		}
		as, err := f1.st.Approvals(context.Background(), id)
		if err != nil || len(as) != accepted {
			t.Errorf("round %d: recorded %+v (%v), want the %d accepted", round, as, err, accepted)
		}
		evs, err := f1.st.Events(context.Background(), id, 0, []string{store.EventApproval}, 100)
		if err != nil || len(evs) != accepted {
			t.Errorf("round %d: %d approval events (%v), want %d", round, len(evs), err, accepted)
		}
		for _, s := range d.Steps {
			if s.Name == manent.StepDeploy && s.Attempts > 1 {
				t.Errorf("round %d: deploy step ran %d times", round, s.Attempts)
			}
		}
	}
}
