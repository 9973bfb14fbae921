package engine_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// faultOnce makes the first read of each of ops fail with a storage fault
// (the database going away at that instant: engine.SetReadFault), until t
// ends; hit reports which ops failed.
func faultOnce(t *testing.T, ops ...string) (hit func() []string) {
	t.Helper()
	return faultN(t, 1, ops...)
}

// faultN is faultOnce for the first n reads of each of ops: an outage
// longer than a DBOS step's own retries (5, from 100 ms doubling).
func faultN(t *testing.T, n int, ops ...string) (hit func() []string) {
	t.Helper()
	var mu sync.Mutex
	done := map[string]int{}
	engine.SetReadFault(func(op string) error {
		mu.Lock()
		defer mu.Unlock()
		want := false
		for _, o := range ops {
			want = want || o == op
		}
		if !want || done[op] >= n {
			return nil
		}
		done[op]++
		return &store.Fault{Reason: "the database cannot be reached", RetryAfter: 5 * time.Second, Err: io.ErrUnexpectedEOF}
	})
	t.Cleanup(func() { engine.SetReadFault(nil) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for _, o := range ops {
			if done[o] >= n {
				out = append(out, o)
			}
		}
		return out
	}
}

// A deploy resumed after its worker stopped, cancelled meanwhile, whose
// new execution finds the database away at each read before the step
// runs again: it waits for it. The resumption is counted (it was not, the
// failed read taken for "no resumption": a worker crashing in a loop
// during outages resumed its deploy forever, past
// workers.max_recovery_attempts), once although the answer to its commit
// was lost; and the interrupted step runs again to its end instead of
// failing on its read, the deploy ending CANCELLED.
func TestResumedStepWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		id, marks, gate := heldAt(t, f, manent.StepDeploy)
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}

		f.node.Close(5 * time.Second)
		f.cfg.ExecutorID = "rescuer"
		ops := []string{"list workflows", "step resumed", "step", "append log"}
		hit := faultOnce(t, ops...)
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		f.open()
		if _, err := f.eng.Recover([]string{"test"}); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateCancelled {
			t.Fatalf("state %s (%s), want CANCELLED", rec.State, rec.Error)
		}
		if got := hit(); len(got) != len(ops) {
			t.Errorf("faults injected at %v, want %v", got, ops)
		}
		logs, err := f.st.Logs(context.Background(), id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		text := fmt.Sprint(logs)
		for _, want := range []string{"step resumed on rescuer after its worker stopped (resumption 1 of at most",
			"the deploy was cancelled while this step ran on a worker that stopped"} {
			if strings.Count(text, want) != 1 {
				t.Errorf("log %s\nwant once: %q", text, want)
			}
		}
		b, _ := os.ReadFile(marks)
		if n := slices.Index(strings.Split(string(b), "\n"), "rollback:deploy"); n != 2 || strings.Count(string(b), "deploy") != 3 {
			t.Errorf("ran %q, want the deploy step twice (before the stop, then to its end), then its rollback", b)
		}
	})
}

// The config step's reads (the environment's current release, whether a
// newer deploy overtook this one, the deploys governance judges with) wait
// for a database that is away instead of spending one of the step's
// attempts on it.
func TestConfigStepWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		ops := []string{"current release", "overtaken", "reconfigure"}
		hit := faultOnce(t, ops...)
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("api", "prod", "1", url, "", scriptTarget("true")))
		if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s), want SUCCESS", rec.State, rec.Error)
		}
		if got := hit(); len(got) != len(ops) {
			t.Errorf("faults injected at %v, want %v", got, ops)
		}
		for _, st := range f.state(id).Steps {
			if st.Name == manent.StepConfig && st.Attempts != 1 {
				t.Errorf("config step took %d attempts, want 1 (%s)", st.Attempts, st.Error)
			}
		}
	})
}

// A rollout's waits between waves (a wave's approval, its observation)
// read the database in DBOS steps of 5 retries (about 3 s): a database
// away for longer failed the deploy's workflow, the deploy left PENDING.
// They wait for it now.
func TestWaveWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		ops := []string{"wave approvals", "observation"}
		hit := faultN(t, 7, ops...)
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1], observe: 1s}\n    - {name: rest, targets: [eu-2], approval: true}\n") + withRollback)
		enginetest.Eventually(t, 60*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")
		if _, err := f.eng.Approve(context.Background(), id, manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}); err != nil {
			t.Fatal(err)
		}
		if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s), want SUCCESS", rec.State, rec.Error)
		}
		if got := hit(); len(got) != len(ops) {
			t.Errorf("faults injected at %v, want %v", got, ops)
		}
	})
}

// hookReceiver is a callback receiver on loopback that keeps the events it
// is sent, as "started", "step:<name>:<state>", "finished:<state>"; opts
// allow it and sign for it.
func hookReceiver(t *testing.T) (hook string, got func() []string, opts func(*node.Config)) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Type       string `json:"type"`
			Deployment struct {
				State string `json:"state"`
			} `json:"deployment"`
			Step *struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"step"`
		}
		b, _ := io.ReadAll(r.Body)
		if json.Unmarshal(b, &ev) == nil {
			name := ev.Type
			switch {
			case ev.Step != nil:
				name = "step:" + ev.Step.Name + ":" + ev.Step.State
			case ev.Type == "finished":
				name += ":" + ev.Deployment.State
			}
			mu.Lock()
			seen = append(seen, name)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(recv.Close)
	t.Setenv("TEST_CALLBACK_SECRET", "whsec_"+base64.StdEncoding.EncodeToString([]byte("read-fault-callback-secret")))
	return fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL), func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(seen)
		}, func(c *node.Config) {
			c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
			c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
		}
}

// notify:started queues the started callback in the outbox, a write to
// the database: one that finds it away waits for it instead of spending
// the step's attempts (4, all of them here, failed the deploy ERROR).
func TestNotifyStartedWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		hook, got, opts := hookReceiver(t)
		f := newFixture(t, dbURL, 2, opts)
		hit := faultN(t, 4, "notify:started")
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("api", "prod", "1", url, "", hook+scriptTarget("true")))
		if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s), want SUCCESS", rec.State, rec.Error)
		}
		if len(hit()) != 1 {
			t.Errorf("notify:started did not meet the whole outage (4 failed writes)")
		}
		for _, st := range f.state(id).Steps {
			if st.Name == manent.StepNotifyStarted && st.Attempts != 1 {
				t.Errorf("notify:started took %d attempts, want 1 (%s)", st.Attempts, st.Error)
			}
		}
		enginetest.Eventually(t, 60*time.Second, func() bool { return slices.Contains(got(), "started") }, "the started callback")
	})
}

// A deploy's conclusion reads the step that failed, for the deploy's
// error and that step's callback: a database away at that read was taken
// for a step without an error — the deploy ended `step "deploy" failed:
// failed` for good, and the callback of the failed step was never sent.
// It waits for the database now.
func TestFinishWaitsForTheFailedStep(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		hook, got, opts := hookReceiver(t)
		f := newFixture(t, dbURL, 2, opts)
		hit := faultN(t, 2, "failed step")
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("api", "prod", "1", url, "", hook+scriptTarget(`[ "$MANENT_STEP" != deploy ] || exit 3`)))
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateError {
			t.Fatalf("state %s (%s), want ERROR", rec.State, rec.Error)
		}
		if len(hit()) != 1 {
			t.Errorf("the read of the failed step did not meet the whole outage (2 failed reads)")
		}
		st, err := f.st.Step(context.Background(), id, manent.StepDeploy)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("step %q failed: %s", manent.StepDeploy, st.Error); st.Error == "" || rec.Error != want {
			t.Errorf("deploy error %q, want %q", rec.Error, want)
		}
		enginetest.Eventually(t, 60*time.Second, func() bool {
			return slices.Contains(got(), "step:deploy:"+string(manent.StepError))
		}, "the callback of the failed step")
	})
}

// A cancelled deploy ends with its cancel request's reason ("superseded
// by …" for a schedule's tick a later one replaced): a database away when
// the conclusion read it was taken for no reason, and the deploy ended
// "cancelled" for good. It waits for the database now.
func TestFinishWaitsForTheCancelReason(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		id, _, gate := heldAt(t, f, manent.StepDeploy)
		hit := faultN(t, 2, "cancel reason")
		const why = "superseded by dpl_later"
		if _, _, err := f.st.RequestCancel(context.Background(), id, store.CancelRequest{Reason: why}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(gate, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 60*time.Second)
		if rec.State != manent.StateCancelled || rec.Error != why {
			t.Fatalf("state %s (%q), want CANCELLED (%q)", rec.State, rec.Error, why)
		}
		if len(hit()) != 1 {
			t.Errorf("the read of the cancel reason did not meet the whole outage (2 failed reads)")
		}
	})
}

// A rollout cancelled while a wave awaits its approval settles that wave
// failed as it concludes: a database away when it read the waves left the
// wave awaiting approval for ever in `status`. It waits for the database
// now.
func TestFinishWaitsForTheWaves(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		hit := faultN(t, 2, "waves")
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"))
		enginetest.Eventually(t, 60*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		d := f.waitState(id, manent.StateCancelled)
		if len(hit()) != 1 {
			t.Errorf("the read of the waves did not meet the whole outage (2 failed reads)")
		}
		for _, w := range d.Rollout {
			if w.Name == "rest" && w.State != engine.WaveFailed {
				t.Errorf("wave rest %s (%s), want failed: the deploy was cancelled during it", w.State, w.Message)
			}
		}
	})
}

// delayedCancelledFor submits a deploy that waits in its gate for an hour
// (DELAYED) and flags it for cancel with a reason, as a schedule's later
// tick does; it returns the deploy and that reason.
func delayedCancelledFor(t *testing.T, f *fixture) (id, why string) {
	t.Helper()
	url, _ := f.artifact("v1", "x")
	at := time.Now().Add(time.Hour)
	id = f.submit(descriptorYAML("d", "prod", "1", url, "", ""), waits(plan.Waits{At: &at}))
	f.waitState(id, manent.StateDelayed)
	why = "superseded by dpl_later"
	if _, _, err := f.st.RequestCancel(context.Background(), id, store.CancelRequest{Reason: why}); err != nil {
		t.Fatal(err)
	}
	return id, why
}

// A cancel of a deploy waiting in its gate ends it with the reason of the
// request that flagged it first ("superseded by …", a schedule's later
// tick): a database away when the cancel read it was taken for no reason,
// and the deploy ended "cancelled" for good. The cancel fails with the
// storage fault now (a 503 to the client), and asking again ends it with
// its reason.
func TestCancelOfAWaitingDeployKeepsItsReason(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		id, why := delayedCancelledFor(t, f)
		hit := faultOnce(t, "cancel reason")
		if _, err := f.eng.Cancel(context.Background(), id); store.AsFault(err) == nil {
			t.Errorf("cancel while the database is away: %v, want its storage fault", err)
		}
		if len(hit()) != 1 {
			t.Errorf("no fault injected at the read of the cancel reason")
		}
		rec, err := f.eng.Cancel(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != manent.StateCancelled || rec.Error != why {
			t.Errorf("state %s (%q), want CANCELLED (%q)", rec.State, rec.Error, why)
		}
	})
}

// The sweeper concludes a waiting deploy whose gate DBOS cancelled with the
// reason its cancel request gave: a database away when it read the reason
// was taken for none, and the deploy ended "cancelled" for good. That
// sweep fails now, and the next concludes it with its reason.
func TestSweepKeepsTheCancelReason(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		id, why := delayedCancelledFor(t, f)
		hit := faultOnce(t, "cancel reason")
		if err := f.eng.CancelGateWorkflow(id); err != nil {
			t.Fatal(err)
		}
		d := f.waitState(id, manent.StateCancelled)
		if d.Error != why {
			t.Errorf("concluded by the sweeper with %q, want %q", d.Error, why)
		}
		if len(hit()) != 1 {
			t.Errorf("no fault injected at the sweeper's read of the cancel reason")
		}
	})
}

// An approval of a rollout's wave reads which wave the deploy waits on: a
// database away at that read was taken for "no wave waits", and the
// approver was told 409 (the deploy PENDING, "not AWAITING_APPROVAL nor
// waiting for a wave's approval") — a refusal a client does not retry.
// The approval fails with the storage fault now (a 503), and succeeds once
// the database is back.
func TestWaveApprovalWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2], approval: true}\n"))
		enginetest.Eventually(t, 60*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "wave rest awaits approval 0/1") }, "wave rest to wait for its approval")
		hit := faultOnce(t, "waiting wave")
		lead, ok := manent.Identity{Subject: "token:lead"}, manent.Approval{Verdict: "approve"}
		if _, err := f.eng.Approve(context.Background(), id, lead, ok); store.AsFault(err) == nil {
			t.Errorf("approval while the database is away: %v, want its storage fault", err)
		}
		if len(hit()) != 1 {
			t.Errorf("no fault injected at the read of the waiting wave")
		}
		if _, err := f.eng.Approve(context.Background(), id, lead, ok); err != nil {
			t.Fatal(err)
		}
		if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s), want SUCCESS", rec.State, rec.Error)
		}
	})
}

// A tick run again (a crash after it created its deploy) finds that deploy
// and supersedes the earlier ticks still waiting. A database away at that
// read was taken for "not created yet": the tick submitted its deploy a
// second time, was refused (the id exists), recorded that refusal as the
// schedule's last error, and left the earlier tick waiting. The tick step
// waits for the database now, then finds its deploy.
func TestTickRunAgainWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		sch, t0, old, later := ticksLeftByACrash(t, f)
		hit := faultOnce(t, "tick deploy")
		if id, err := f.eng.Tick(context.Background(), sch, t0.Add(time.Hour)); err != nil || id != later {
			t.Errorf("tick while the database is away at its read of its deploy: %q, %v; want %s", id, err, later)
		}
		if len(hit()) != 1 {
			t.Errorf("no fault injected at the tick's read of its deploy")
		}
		if d := f.state(old); d.State != manent.StateCancelled || d.Error != "superseded by "+later {
			t.Errorf("earlier tick: %s %q, want CANCELLED \"superseded by %s\"", d.State, d.Error, later)
		}
		sc, err := f.st.GetSchedule(context.Background(), sch)
		if err != nil {
			t.Fatal(err)
		}
		if sc.LastError != "" {
			t.Errorf("schedule's last error %q, want none", sc.LastError)
		}
	})
}

// A tick whose outcome could not be recorded on the schedule (the
// database away at that write) records it when run again. The run again
// found the deploy and only superseded the earlier ticks: the schedule
// kept showing the tick before as its LAST TICK and LAST DEPLOY. The
// outcome is now written in the submit's transaction, which the fault
// rolls back: the tick run again creates the deploy once, with its
// outcome.
func TestTickRunAgainRecordsItsOutcome(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("app", "x")
		sch := f.schedule(descriptorYAML("web", "prod", "1", url, "", ""))
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		first := f.tick(sch, t0)
		hit := faultOnce(t, "tick outcome")
		at := t0.Add(time.Hour)
		id, err := f.eng.Tick(context.Background(), sch, at)
		if want := engine.TickDeployID(sch, at); err != nil || id != want {
			t.Fatalf("tick while the database is away at its outcome: %q, %v; want %s", id, err, want)
		}
		if len(hit()) != 1 {
			t.Errorf("no fault injected at the write of the tick's outcome")
		}
		sc, err := f.st.GetSchedule(context.Background(), sch)
		if err != nil {
			t.Fatal(err)
		}
		if sc.LastDeploy != id || sc.LastTick == nil || !sc.LastTick.Equal(at) || sc.LastError != "" {
			t.Errorf("schedule shows last deploy %q, last tick %v, last error %q; want %s at %s (the tick before was %s)",
				sc.LastDeploy, sc.LastTick, sc.LastError, id, at, first)
		}
		for _, d := range []string{first, id} {
			if rec := f.wait(d, 60*time.Second); rec.State != manent.StateSuccess && rec.State != manent.StateCancelled {
				t.Errorf("%s: %s (%s), want SUCCESS or CANCELLED (superseded)", d, rec.State, rec.Error)
			}
		}
	})
}

// A wave's checkpoint shows the wave deploying before its deploy step
// changes anything. A database away at that write left the wave shown
// pending: a deploy step that then failed, not rolled back, left the wave
// pending in `status` for good (the conclusion settles only the waves
// shown in progress), although its deploy ran. The checkpoint waits for
// the database now, the wave is shown deploying, then failed.
func TestCheckpointWaitsForTheDatabase(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		f := newFixture(t, dbURL, 2)
		hit := faultN(t, 2, "checkpoint:deploy[rest]")
		url, _ := f.artifact("v1", "one")
		id := f.submit(descriptorYAML("shop", "prod", "1", url, "", "rollout:\n  waves:\n    - {name: canary, targets: [eu-1]}\n    - {name: rest, targets: [eu-2]}\nrollback: {enabled: false}\n") +
			scriptTarget(`[ "$MANENT_STEP" != "deploy[rest]" ] || exit 3`))
		if rec := f.wait(id, 60*time.Second); rec.State != manent.StateError {
			t.Fatalf("state %s (%s), want ERROR", rec.State, rec.Error)
		}
		if len(hit()) != 1 {
			t.Errorf("the checkpoint of wave rest did not meet the whole outage (2 failed writes)")
		}
		d := f.state(id)
		for _, w := range d.Rollout {
			if w.Name == "rest" && w.State != engine.WaveFailed {
				t.Errorf("wave rest %s (%s), want failed: its deploy step failed", w.State, w.Message)
			}
		}
		for _, st := range d.Steps {
			if st.Name == "checkpoint:deploy[rest]" && st.Attempts != 1 {
				t.Errorf("checkpoint:deploy[rest] took %d attempts, want 1 (%s)", st.Attempts, st.Error)
			}
		}
	})
}

// faultFor makes every read of ops fail with a storage fault for d from
// now (the database away that long), until t ends; hit reports how many
// reads failed.
func faultFor(t *testing.T, d time.Duration, ops ...string) (hit func() int) {
	t.Helper()
	var mu sync.Mutex
	n, until := 0, time.Now().Add(d)
	engine.SetReadFault(func(op string) error {
		if !slices.Contains(ops, op) || time.Now().After(until) {
			return nil
		}
		mu.Lock()
		n++
		mu.Unlock()
		return &store.Fault{Reason: "the database cannot be reached", RetryAfter: 5 * time.Second, Err: io.ErrUnexpectedEOF}
	})
	t.Cleanup(func() { engine.SetReadFault(nil) })
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return n
	}
}

// A schedule's tick that finds the database away waits for it and
// submits its deploy once. Its step kept DBOS's 3 retries (0.7 s in all):
// an outage longer than that ended the tick workflow in error, and the
// tick's deploy was never submitted; the database away only at the
// submit (the admission's reads, the insert) was taken for a refusal,
// shown as the schedule's LAST ERROR, and the tick was lost too.
func TestTickWaitsOutAnOutage(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("app", "x")
		t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for _, c := range []struct {
			name  string
			ops   []string
			away  time.Duration
			reads int // at least this many failed reads
		}{
			{"every read, 2s", []string{"tick schedule", "tick deploy", "tick admission"}, 2 * time.Second, 5},
			{"the submit, 300ms", []string{"tick admission"}, 300 * time.Millisecond, 1},
		} {
			sch := f.schedule(descriptorYAML("web", "prod", "1", url, "", ""))
			hit := faultFor(t, c.away, c.ops...)
			id, terr := f.eng.RunTick(context.Background(), sch, t0)
			if terr != nil || id != engine.TickDeployID(sch, t0) {
				t.Errorf("%s away: tick %q, %v; want its deploy %s", c.name, id, terr, engine.TickDeployID(sch, t0))
			}
			if hit() < c.reads {
				t.Errorf("%s away: %d failed reads, want at least %d", c.name, hit(), c.reads)
			}
			engine.SetReadFault(nil)
			sc, err := f.st.GetSchedule(context.Background(), sch)
			if err != nil {
				t.Fatal(err)
			}
			if sc.LastError != "" || sc.LastDeploy != engine.TickDeployID(sch, t0) {
				t.Errorf("%s away: schedule's last deploy %q, last error %q; want %s and none", c.name, sc.LastDeploy, sc.LastError, engine.TickDeployID(sch, t0))
			}
			if terr == nil && id != "" {
				if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
					t.Errorf("%s away: the tick's deploy %s (%s), want SUCCESS", c.name, rec.State, rec.Error)
				}
			}
		}
	})
}
