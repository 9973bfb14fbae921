package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/store"
)

// Three waves where the second fails its health gate: the third never
// starts and the started waves are compensated in reverse order.
func TestRolloutSecondWaveFailsHealthGate(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "one")
		marks := filepath.Join(f.dir, "marks")
		cmd := fmt.Sprintf(`echo "$MANENT_STEP" >> %s; [ "$MANENT_STEP" != "health-gate[two]" ]`, marks)
		yml := descriptorYAML("api", "prod", "1", url, "", `rollout:
  waves:
    - {name: one, targets: [eu-1]}
    - {name: two, targets: [eu-2, eu-3], observe: 100ms}
    - {name: three, targets: [us-1]}
`)
		id := f.submit(yml + withRollback + scriptTarget(cmd))
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s), want ERROR with rollback completed", rec.State, rec.Rollback, rec.Error)
		}
		if !strings.HasPrefix(rec.Error, `step "health-gate[two]" failed`) {
			t.Errorf("error %q", rec.Error)
		}
		b, _ := os.ReadFile(marks)
		got := strings.Join(strings.Fields(string(b)), ",")
		want := "deploy[one],post-test[one],activation[one],health-gate[one]," +
			"deploy[two],post-test[two],activation[two],health-gate[two]," +
			"rollback:activation[two],rollback:deploy[two],rollback:activation[one],rollback:deploy[one]"
		if got != want {
			t.Fatalf("actions:\n got %s\nwant %s", got, want)
		}
		full := f.rolloutIs(id, "one=rolled-back,two=rolled-back,three=pending")
		for _, s := range []string{"deploy[three]", "activation[three]"} {
			if st := step(t, full, s); st.State != manent.StepSkipped {
				t.Errorf("%s = %s, want SKIPPED", s, st.State)
			}
		}
		if w := full.Rollout[1]; w.Observe != "100ms" || w.ObserveUntil == nil || w.Gate != engine.GateFailed || w.ObserveLeftSeconds != 0 {
			t.Errorf("wave two: observe %q until %v, gate %q, left %d; want 100ms, a time, failed, 0", w.Observe, w.ObserveUntil, w.Gate, w.ObserveLeftSeconds)
		}
		if w := full.Rollout[0]; w.Gate != engine.GatePassed {
			t.Errorf("wave one: gate %q, want passed", w.Gate)
		}
		evs, _ := f.st.Events(context.Background(), id, 0, []string{"rollout"}, 0)
		var observing bool
		for _, e := range evs {
			observing = observing || strings.Contains(string(e.Data), `"observing"`)
		}
		if !observing {
			t.Error("no rollout event for wave two's observation time")
		}
	})
}

// A wave whose health gate fails says why on its status line, as the
// step's error does: with the last lines the gate's command printed,
// masked — the target's with.env credential it printed never shows.
func TestFailedGateSaysWhy(t *testing.T) {
	t.Parallel()
	const secret = "gate-tok-51c0e7"
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	cmd := `case "$MANENT_STEP" in health-gate\[two\]) echo "error rate 12% > 5% (checked with token=$API_TOKEN)" >&2; exit 1;; esac`
	b, _ := json.Marshal(map[string]any{"plugin": "script", "with": map[string]any{"command": []string{"sh", "-c", cmd}, "env": map[string]any{"API_TOKEN": secret}}})
	id := f.submit(descriptorYAML("api", "prod", "1", url, "", `rollout:
  waves:
    - {name: one, targets: [eu-1]}
    - {name: two, targets: [eu-2]}
`) + withRollback + "target: " + string(b) + "\n")
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateError {
		t.Fatalf("state %s (%s), want ERROR at the second gate", rec.State, rec.Error)
	}
	full := f.rolloutIs(id, "one=rolled-back,two=rolled-back")
	const why = "script sh exited with status 1; last output: error rate 12% > 5% (checked with token=***)"
	if msg := full.Rollout[1].Message; !strings.Contains(msg, why) || strings.Contains(msg, secret) {
		t.Errorf("wave two's message %q, want %q", msg, why)
	}
	if !strings.Contains(rec.Error, why) || strings.Contains(rec.Error, secret) {
		t.Errorf("the deploy's error %q, want %q", rec.Error, why)
	}

	// An external target's own answer is masked on the wave's line too.
	bin := t.TempDir()
	plugin := `#!/bin/sh
cat >/dev/null
case "$MANENT_STEP" in
health-gate\[two\]) printf '{"ok": false, "error": "gate refused: token %s lacks scope metrics:read"}\n' "$API_TOKEN";;
*) echo '{"ok": true}';;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "manent-plugin-gated"), []byte(plugin), 0o755); err != nil {
		t.Fatal(err)
	}
	g := newFixture(t, enginetest.SQLite(t), 2, func(c *node.Config) { c.Plugins.Path = []string{bin} })
	url, _ = g.artifact("v1", "one")
	id = g.submit(descriptorYAML("api", "prod", "1", url, "", `rollout:
  waves:
    - {name: one, targets: [eu-1]}
    - {name: two, targets: [eu-2]}
`) + withRollback + `target: {plugin: gated, with: {env: {API_TOKEN: "` + secret + `"}}}` + "\n")
	if rec := g.wait(id, 60*time.Second); rec.State != manent.StateError {
		t.Fatalf("state %s (%s), want ERROR at the second gate", rec.State, rec.Error)
	}
	full = g.rolloutIs(id, "one=rolled-back,two=rolled-back")
	if msg := full.Rollout[1].Message; !strings.Contains(msg, "gate refused: token *** lacks scope") || strings.Contains(msg, secret) {
		t.Errorf("the external gate's wave message %q, want its refusal masked", msg)
	}
}

// The local plugin deploys each wave's targets into <dir>/<target>.
func TestRolloutLocalTargets(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	yml := descriptorYAML("site", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: a, targets: [eu-1]}\n    - {name: b, targets: [eu-2, us-1]}\n")
	id := f.submit(yml + withRollback)
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	for _, target := range []string{"eu-1", "eu-2", "us-1"} {
		b, err := os.ReadFile(filepath.Join(f.targets, "site", "prod", target, "current", "index.html"))
		if err != nil || string(b) != "one" {
			t.Errorf("%s: %q %v", target, b, err)
		}
	}
	full, _ := f.eng.Refresh(context.Background(), id)
	for _, w := range full.Rollout {
		if w.State != engine.WaveHealthy {
			t.Errorf("wave %s = %s, want healthy", w.Name, w.State)
		}
	}
}

// A wave with approval: true waits (the deploy stays PENDING, its status
// says why) until another identity approves it; a rejection fails the
// deploy at that wave and compensates the waves already started.
func TestApprovalBetweenWaves(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "one")
		yml := descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n")
		submit := func() string {
			return f.submit(yml + withRollback)
		}
		ctx := context.Background()
		id := submit()
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")
		if st := f.state(id); st.State != manent.StatePending {
			t.Fatalf("state %s while a wave waits, want PENDING", st.State)
		}
		if _, err := f.eng.Approve(ctx, id, manent.Identity{Subject: "token:test"}, manent.Approval{Verdict: "approve"}); manent.ErrorCode(err) != manent.EForbidden {
			t.Fatalf("the submitter approving a wave: %v, want forbidden", err)
		}
		// A verdict its caller judged for something else (the deploy's own
		// approval, another wave: the deploy moved on between the caller's
		// read and this one) is refused, nothing recorded.
		for _, pin := range []string{"", "canary"} {
			_, err := f.eng.ApproveFor(ctx, id, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}, pin)
			if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(err.Error(), `the approval of wave "rest" waits now`) {
				t.Fatalf("a verdict judged for %q while wave rest waits: %v, want a 409 saying what waits", pin, err)
			}
		}
		if d, err := f.eng.Decided(ctx, id, "token:lead", "approve"); err != nil || len(d) != 0 {
			t.Fatalf("recorded after the refusals: %v %v, want nothing", d, err)
		}
		if _, err := f.eng.ApproveFor(ctx, id, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}, "rest"); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s)", rec.State, rec.Error)
		}
		if s := step(t, rec, "approval[rest]"); s.State != manent.StepSuccess {
			t.Fatalf("approval[rest] = %s", s.State)
		}

		id = submit()
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "awaits approval") }, "the second deploy's wave to wait")
		if _, err := f.eng.Approve(ctx, id, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "reject", Comment: "error rate"}); err != nil {
			t.Fatal(err)
		}
		rec = f.wait(id, 60*time.Second)
		if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted || !strings.Contains(rec.Error, "error rate") {
			t.Fatalf("state %s rollback %q error %q: want ERROR, rollback completed, the rejection named", rec.State, rec.Rollback, rec.Error)
		}
		if s := step(t, rec, "rollback:deploy[canary]"); s.State != manent.StepSuccess {
			t.Fatalf("the canary wave was not compensated: %s", s.State)
		}

		// Cancel while a wave waits: CANCELLED promptly, the wave never runs.
		id = submit()
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "awaits approval") }, "the third deploy's wave to wait")
		if _, err := f.eng.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		rec = f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled {
			t.Fatalf("state %s, want CANCELLED", rec.State)
		}
		if s := step(t, rec, "deploy[rest]"); s.StartedAt != nil {
			t.Fatal("wave rest ran after the cancel")
		}
		// The canary wave it had activated is compensated: a CANCELLED
		// deploy leaves no target on its release, and the inventory still
		// names the release that runs everywhere.
		if rec.Rollback != manent.RollbackCompleted {
			t.Errorf("rollback %q, want completed", rec.Rollback)
		}
		for _, n := range []string{"rollback:activation[canary]", "rollback:deploy[canary]"} {
			if s := step(t, rec, n); s.State != manent.StepSuccess {
				t.Errorf("%s = %s, want SUCCESS", n, s.State)
			}
		}
		if cur, err := f.st.Current(ctx, "shop", "prod"); err != nil || cur == nil || cur.DeploymentID == id {
			t.Errorf("current = %+v, %v: the cancelled deploy is named current", cur, err)
		}

		// Rollback disabled: the canary stays on the release, and both the
		// deploy's error and the inventory say so.
		id = f.submit(yml + "rollback: {enabled: false}\n")
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "awaits approval") }, "the fourth deploy's wave to wait")
		if _, err := f.eng.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		rec = f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled || !strings.Contains(rec.Error, "the release stays live on the waves activated before the cancel (rollback is disabled)") {
			t.Errorf("state %s error %q: want CANCELLED, saying the canary keeps the release", rec.State, rec.Error)
		}
		if cur, err := f.st.Current(ctx, "shop", "prod"); err != nil || cur == nil || cur.DeploymentID != id || !strings.Contains(cur.Error, "stays live") {
			t.Errorf("current = %+v, %v: want the cancelled deploy, live on its canary, with its error", cur, err)
		}
	})
}

// Each wave runs the target with its rollout context: a script target gets
// MANENT_ROLLOUT_WAVE, _INDEX, _TARGETS and _PERCENT in its environment and
// `rollout` on stdin, for every action of the wave (rollbacks included);
// the waves' status shows each gate's outcome.
func TestRolloutContextReachesScript(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	marks := filepath.Join(f.dir, "marks")
	cmd := fmt.Sprintf(`stdin=$(cat); case "$stdin" in *'"rollout":{"wave":"'"$MANENT_ROLLOUT_WAVE"'"'*) in=yes;; *) in=no;; esac
echo "$MANENT_STEP wave=$MANENT_ROLLOUT_WAVE index=$MANENT_ROLLOUT_INDEX targets=$MANENT_ROLLOUT_TARGETS percent=$MANENT_ROLLOUT_PERCENT stdin=$in" >> %s
[ "$MANENT_STEP" != "health-gate[100%%]" ]`, marks)
	id := f.submit(descriptorYAML("api", "prod", "1", url, "", "rollout: {percentages: [25, 100]}\n") + withRollback + scriptTarget(cmd))
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateError || rec.Rollback != manent.RollbackCompleted {
		t.Fatalf("state %s rollback %q (%s), want ERROR at the last gate, rolled back", rec.State, rec.Rollback, rec.Error)
	}
	b, _ := os.ReadFile(marks)
	got := strings.TrimSpace(string(b))
	want := strings.Join([]string{
		"deploy[25%] wave=25% index=1 targets= percent=25 stdin=yes",
		"post-test[25%] wave=25% index=1 targets= percent=25 stdin=yes",
		"activation[25%] wave=25% index=1 targets= percent=25 stdin=yes",
		"health-gate[25%] wave=25% index=1 targets= percent=25 stdin=yes",
		"deploy[100%] wave=100% index=2 targets= percent=100 stdin=yes",
		"post-test[100%] wave=100% index=2 targets= percent=100 stdin=yes",
		"activation[100%] wave=100% index=2 targets= percent=100 stdin=yes",
		"health-gate[100%] wave=100% index=2 targets= percent=100 stdin=yes",
		"rollback:activation[100%] wave=100% index=2 targets= percent=100 stdin=yes",
		"rollback:deploy[100%] wave=100% index=2 targets= percent=100 stdin=yes",
		"rollback:activation[25%] wave=25% index=1 targets= percent=25 stdin=yes",
		"rollback:deploy[25%] wave=25% index=1 targets= percent=25 stdin=yes",
	}, "\n")
	if got != want {
		t.Fatalf("actions:\n got %s\nwant %s", got, want)
	}
	var gates []string
	for _, w := range rec.Rollout {
		gates = append(gates, fmt.Sprintf("%s %d%% %s gate=%s", w.Name, w.Percent, w.State, w.Gate))
	}
	if g := strings.Join(gates, ", "); g != "25% 25% rolled-back gate=passed, 100% 100% rolled-back gate=failed" {
		t.Errorf("rollout status: %s", g)
	}
	if !strings.Contains(rec.Rollout[1].Message, "exited with status 1") {
		t.Errorf("the failed gate's message %q, want the script's failure", rec.Rollout[1].Message)
	}
}

// A deploy whose worker stops mid-wave resumes in that wave: the waves
// already done are not run again, the interrupted action runs again with
// the same rollout context, and the rollout ends as if nothing happened.
func TestRolloutResumesInItsWave(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	marks := filepath.Join(f.dir, "marks")
	release := filepath.Join(f.dir, "release")
	cmd := fmt.Sprintf(`echo "$MANENT_STEP $MANENT_ROLLOUT_PERCENT" >> %s
if [ "$MANENT_STEP" = "deploy[100%%]" ]; then i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; fi`, marks, release)
	id := f.submit(descriptorYAML("api", "prod", "1", url, "", "rollout: {percentages: [50, 100]}\n") + withRollback + scriptTarget(cmd))
	enginetest.Eventually(t, 60*time.Second, func() bool {
		b, _ := os.ReadFile(marks)
		return strings.Contains(string(b), "deploy[100%] 100")
	}, "wave 100%% to start deploying")
	f.restart() // the running deploy[100%] is interrupted; recovery runs it again
	if err := os.WriteFile(release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	b, _ := os.ReadFile(marks)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	count := map[string]int{}
	for _, l := range lines {
		count[l]++
	}
	for l, want := range map[string]int{"deploy[50%] 50": 1, "activation[50%] 50": 1, "health-gate[50%] 50": 1,
		"deploy[100%] 100": 2, "activation[100%] 100": 1, "health-gate[100%] 100": 1} {
		if count[l] != want {
			t.Errorf("%q ran %d times, want %d (actions: %v)", l, count[l], want, lines)
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "rollback:") {
			t.Errorf("a rollback ran: %v", lines)
		}
	}
}

// A wave whose deploy failed and whose rollback failed too ends `failed`,
// saying so, instead of `deploying` for ever; the wave before it, which
// the rollback never reached, stays healthy (its release is still live).
func TestRolloutWaveSettledWhenItsRollbackFails(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "one")
	cmd := `case "$MANENT_STEP" in "deploy[two]"|"rollback:deploy[two]") exit 1;; esac`
	yml := descriptorYAML("api", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: one, targets: [eu-1]}\n    - {name: two, targets: [eu-2]}\n")
	id := f.submit(yml + withRollback + scriptTarget(cmd))
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateError || rec.Rollback != manent.RollbackFailed {
		t.Fatalf("state %s rollback %q (%s), want ERROR with rollback failed", rec.State, rec.Rollback, rec.Error)
	}
	full := f.rolloutIs(id, "one=healthy,two=failed")
	if msg := full.Rollout[1].Message; !strings.Contains(msg, `step "deploy[two]" failed`) || !strings.Contains(msg, "the rollback failed") {
		t.Errorf("wave two's message %q: want the failed step and the failed rollback", msg)
	}
}

// rolloutIs checks the waves' states of deploy id, "name=state,…" in order,
// and returns the deploy.
func (f *fixture) rolloutIs(id, want string) *store.Record {
	f.t.Helper()
	full, err := f.eng.Refresh(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	var states []string
	for _, w := range full.Rollout {
		states = append(states, w.Name+"="+w.State)
	}
	if got := strings.Join(states, ","); got != want {
		f.t.Fatalf("rollout status %s, want %s", got, want)
	}
	return full
}

// A cancel while a wave is observed does not wait out the observation: the
// deploy ends CANCELLED at once, its activated canary rolled back. Before,
// an operator cancelling a bad canary with observe: 10m waited ten minutes
// for the compensation. (The observation here is an hour: the test would
// time out if the cancel waited for it.)
func TestCancelDuringObservation(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1], observe: 1h}\n    - {name: rest, targets: [eu-2]}\n") + withRollback)
		enginetest.Eventually(t, 30*time.Second, func() bool {
			full, err := f.eng.Refresh(context.Background(), id)
			return err == nil && len(full.Rollout) > 0 && full.Rollout[0].State == engine.WaveObserving
		}, "the canary to be observed")
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled || rec.Rollback != manent.RollbackCompleted {
			t.Fatalf("state %s rollback %q (%s): want CANCELLED, rolled back", rec.State, rec.Rollback, rec.Error)
		}
		for _, n := range []string{"health-gate[canary]", "deploy[rest]"} {
			if s := step(t, rec, n); s.StartedAt != nil {
				t.Errorf("%s ran after the cancel", n)
			}
		}
		if s := step(t, rec, "rollback:activation[canary]"); s.State != manent.StepSuccess {
			t.Errorf("rollback:activation[canary] = %s, want SUCCESS", s.State)
		}
	})
}

// A rollback that fails part way leaves the waves it did not reach on the
// release: the second wave's activation was undone, its deploy's rollback
// failed, the first wave was never compensated. The inventory names the
// failed deploy as what runs (it ran the release only before the undo of
// the second wave's activation made it look undone).
func TestRolloutRollbackFailedLeavesFirstWaveLive(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	ctx := context.Background()
	url, _ := f.artifact("v1", "one")
	cmd := `case "$MANENT_STEP" in "health-gate[two]"|"rollback:deploy[two]") exit 1;; esac`
	yml := descriptorYAML("api", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: one, targets: [eu-1]}\n    - {name: two, targets: [eu-2]}\n") +
		"rollback: {enabled: true, on: [post-test]}\nmax_retries: 0\n" + scriptTarget(cmd)
	id := f.submit(yml)
	rec := f.wait(id, 60*time.Second)
	if rec.State != manent.StateError || rec.Rollback != manent.RollbackFailed {
		t.Fatalf("state %s rollback %q (%s), want ERROR with rollback failed", rec.State, rec.Rollback, rec.Error)
	}
	for n, want := range map[string]manent.StepState{"rollback:activation[two]": manent.StepSuccess, "rollback:deploy[two]": manent.StepError} {
		if s := step(t, rec, n); s.State != want {
			t.Errorf("%s = %s, want %s", n, s.State, want)
		}
	}
	cur, err := f.st.Current(ctx, "api", "prod")
	if err != nil || cur == nil || cur.DeploymentID != id {
		t.Errorf("current = %+v, %v: wave one still runs deploy %s, whose rollback failed before reaching it", cur, err, id)
	}
}

// A deploy waiting between waves (for an approval, a freeze, an
// observation) leaves its worker slot: on a worker with workers.slots 1,
// another application's deploy runs meanwhile, where it waited in the
// queue until the approval came. Approved, the waiting deploy takes a slot
// again before its next wave: it waits while another deploy holds the only
// one, so no more deploys run at once than slots.
func TestWaveWaitLeavesItsSlot(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("v1", "one")
		lock, overlap := filepath.Join(f.dir, "running"), filepath.Join(f.dir, "overlap")
		started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
		waves := "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"
		target := scriptTarget(fmt.Sprintf(`if [ -d %s ]; then echo "$MANENT_STEP" >> %s; fi`, lock, overlap))
		waiting := f.submit(descriptorYAML("shop", "prod", "1", url, "", waves) + target)
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(waiting).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")

		other := f.submit(descriptorYAML("billing", "prod", "1", url, "", "steps:\n  - {name: quick, after: qa, plugin: script, with: {command: [\"true\"]}}\n"))
		if rec := f.wait(other, 30*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("another application's deploy: %s (%s)", rec.State, rec.Error)
		}

		hold := fmt.Sprintf("mkdir %s && touch %s && while [ ! -e %s ]; do sleep 0.05; done; rmdir %s", lock, started, release, lock)
		holder := f.submit(descriptorYAML("ledger", "prod", "1", url, "", fmt.Sprintf("steps:\n  - {name: hold, after: qa, plugin: script, with: {command: [sh, -c, %q]}}\n", hold)))
		enginetest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "the holder's step to start")
		if _, err := f.eng.Approve(context.Background(), waiting, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}); err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 30*time.Second, func() bool {
			r, err := f.eng.Refresh(context.Background(), waiting)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range r.Steps {
				if s.Name == "approval[rest]" {
					return s.State == manent.StepSuccess
				}
			}
			return false
		}, "the approval to be recorded")
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{holder, waiting} {
			if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
				t.Fatalf("deploy %s: %s (%s)", id, rec.State, rec.Error)
			}
		}
		if b, err := os.ReadFile(overlap); err == nil {
			t.Fatalf("the approved deploy ran its wave while another held the only slot: %s", b)
		}
	})
}

// A deploy approved between waves while another deploy holds the worker's
// only slot waits for that slot, and its status says so — it showed the
// wave's last reason (none) and stayed PENDING with no word of why it did
// not go on. Once it has its slot, the reason is gone.
func TestSlotWaitSaysWhy(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("v1", "one")
		started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
		restStarted, restGo := filepath.Join(f.dir, "rest-started"), filepath.Join(f.dir, "rest-go")
		waves := "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"
		target := scriptTarget(fmt.Sprintf(`if [ "$MANENT_ROLLOUT_WAVE" = rest ]; then touch %s; while [ ! -e %s ]; do sleep 0.05; done; fi`, restStarted, restGo))
		waiting := f.submit(descriptorYAML("shop", "prod", "1", url, "", waves) + target)
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(waiting).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")

		hold := fmt.Sprintf("touch %s && while [ ! -e %s ]; do sleep 0.05; done", started, release)
		holder := f.submit(descriptorYAML("ledger", "prod", "1", url, "", fmt.Sprintf("steps:\n  - {name: hold, after: qa, plugin: script, with: {command: [sh, -c, %q]}}\n", hold)))
		enginetest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "the holder's step to start")
		if _, err := f.eng.Approve(context.Background(), waiting, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}); err != nil {
			t.Fatal(err)
		}
		want := "waiting for a free worker slot on test (workers.slots 1) to start wave rest"
		var last string
		enginetest.Eventually(t, 30*time.Second, func() bool {
			d := f.state(waiting)
			last = string(d.State) + ": " + d.Reason
			return d.State == manent.StatePending && strings.HasPrefix(d.Reason, want)
		}, "the approved deploy to say it waits for a worker slot (last: %v)", lazyString(func() string { return last }))
		if _, err := os.Stat(restStarted); err == nil {
			t.Fatalf("wave rest started while the holder held the only slot (%s)", last)
		}

		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(restStarted); return err == nil }, "wave rest to start once the slot is free")
		if d := f.state(waiting); d.Reason != "" {
			t.Errorf("reason once wave rest runs = %q, want none", d.Reason)
		}
		if err := os.WriteFile(restGo, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{holder, waiting} {
			if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
				t.Fatalf("deploy %s: %s (%s)", id, rec.State, rec.Error)
			}
		}
	})
}

// lazyString is a failure message's argument read when the message is
// printed, not when the call is made.
type lazyString func() string

func (l lazyString) String() string { return l() }
