package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// deliveredAll reports the deliveries of a deploy once all are delivered.
func (f *fixture) deliveries(id string) ([]notify.DeliveryStatus, bool) {
	rec, err := f.eng.Refresh(context.Background(), id)
	if err != nil || rec.Deliveries == nil {
		return nil, false
	}
	var ds []notify.DeliveryStatus
	if json.Unmarshal(rec.Deliveries, &ds) != nil || len(ds) == 0 {
		return nil, false
	}
	for _, d := range ds {
		if d.State == notify.DeliveryPending {
			return nil, false
		}
	}
	return ds, true
}

func countType(evs []store.Event, typ string) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// Retention removes a final deploy's DBOS rows after retention.workflows
// while status, steps, logs and deliveries keep working from manent's
// tables; then its log lines after retention.logs; then the deploy itself
// after retention.deploys — never the environment's current release nor
// the release before it (what rollback goes back to), and the audit chain
// still verifies.
func TestRetention(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
		defer recv.Close()
		t.Setenv("TEST_CALLBACK_SECRET", "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
		f := newFixture(t, db, 2, func(c *node.Config) {
			c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
			c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
			c.Retention.Workflows, c.Retention.Logs, c.Retention.Deploys = time.Minute, 2*time.Minute, 3*time.Minute
			c.Retention.Every = time.Hour // this test runs retention by hand
		})
		ctx := context.Background()
		var ids []string
		for _, v := range []string{"1", "2", "3"} {
			url, _ := f.artifact("v"+v, v)
			id := f.submit(descriptorYAML("ret", "prod", v, url, "",
				fmt.Sprintf("callbacks:\n  - url: %s/hook\nsteps:\n  - {name: say, after: deploy, plugin: script, with: {command: [sh, -c, 'echo hello from %s']}}\n", recv.URL, v)))
			if rec := f.wait(id, 30*time.Second); rec.State != manent.StateSuccess {
				t.Fatalf("state %s (%s)", rec.State, rec.Error)
			}
			ids = append(ids, id)
		}
		old, prev, cur := ids[0], ids[1], ids[2]
		var before []notify.DeliveryStatus
		// Every callback delivered, the last one (finished) included: its
		// delivery is created by the deploy's announcement after the
		// deploy ends, so "none pending" alone can be true before it exists.
		finished := func(ds []notify.DeliveryStatus) bool {
			for _, d := range ds {
				if d.Event == notify.EventFinished {
					return true
				}
			}
			return false
		}
		enginetest.Eventually(t, 60*time.Second, func() bool {
			var ok bool
			before, ok = f.deliveries(old)
			ds, ok2 := f.deliveries(cur)
			return ok && ok2 && finished(before) && finished(ds)
		}, "every callback delivered")
		steps, err := f.st.Steps(ctx, old)
		if err != nil {
			t.Fatal(err)
		}
		evs, err := f.st.Events(ctx, old, 0, nil, 10000)
		if err != nil {
			t.Fatal(err)
		}
		if countType(evs, store.EventLog) == 0 {
			t.Fatal("the deploy logged nothing: the test cannot see logs pruned")
		}
		if wfs, err := f.eng.DeployWorkflows(old); err != nil || len(wfs) < 2 {
			t.Fatalf("before retention DBOS holds %v (%v), want the deploy and its deliveries", wfs, err)
		}

		// 1. retention.workflows: DBOS forgets, manent remembers.
		now := time.Now().Add(90 * time.Second)
		if _, err := f.eng.Retain(ctx, now); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if wfs, err := f.eng.DeployWorkflows(id); err != nil || len(wfs) != 0 {
				t.Fatalf("after retention DBOS still holds %v (%v)", wfs, err)
			}
		}
		after, ok := f.deliveries(old)
		if !ok || !reflect.DeepEqual(before, after) {
			t.Fatalf("deliveries after retention:\n%+v\nbefore:\n%+v", after, before)
		}
		if s2, _ := f.st.Steps(ctx, old); !reflect.DeepEqual(steps, s2) {
			t.Fatalf("steps changed by retention")
		}
		if e2, _ := f.st.Events(ctx, old, 0, nil, 10000); len(e2) != len(evs) {
			t.Fatalf("events %d after retention, %d before", len(e2), len(evs))
		}
		if rec, err := f.eng.Refresh(ctx, old); err != nil || rec.State != manent.StateSuccess {
			t.Fatalf("status after retention: %v %v", rec, err)
		}

		// 2. retention.logs: log lines go, the rest of the story stays.
		if _, err := f.eng.Retain(ctx, now.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		e3, _ := f.st.Events(ctx, old, 0, nil, 10000)
		if countType(e3, store.EventLog) != 0 || len(e3) != len(evs)-countType(evs, store.EventLog) {
			t.Fatalf("after log retention: %d events, %d log lines", len(e3), countType(e3, store.EventLog))
		}

		// 3. retention.deploys: the old deploy goes, the current release
		// and the one rollback goes back to stay.
		if _, err := f.eng.Retain(ctx, now.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := f.st.Deployment(ctx, old); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("old deploy after deploy retention: %v", err)
		}
		if rec, err := f.st.Deployment(ctx, cur); err != nil || rec.State != manent.StateSuccess {
			t.Fatalf("the current release was removed: %v", err)
		}
		if rec, err := f.st.Deployment(ctx, prev); err != nil || rec.State != manent.StateSuccess {
			t.Fatalf("the release before the current one was removed: %v", err)
		}
		if rel, err := f.st.Current(ctx, "ret", "prod"); err != nil || rel == nil || rel.DeploymentID != cur {
			t.Fatalf("inventory after retention: %+v %v", rel, err)
		}
		if _, problems, err := f.st.VerifyAudit(ctx); err != nil || len(problems) != 0 {
			t.Fatalf("audit after retention: %v %v", problems, err)
		}
	})
}

// Retention runs by itself as a DBOS scheduled workflow.
func TestRetentionIsScheduled(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2, func(c *node.Config) {
		c.Retention.Workflows, c.Retention.Every = time.Nanosecond, time.Second
	})
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("ret", "prod", "1", url, "", ""))
	if rec := f.wait(id, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		wfs, err := f.eng.DeployWorkflows(id)
		return err == nil && len(wfs) == 0
	}, "the scheduled retention deleting the deploy's workflows")
	if rec, err := f.eng.Refresh(context.Background(), id); err != nil || rec.State != manent.StateSuccess {
		t.Fatalf("status after retention: %v %v", rec, err)
	}
}

// A delivery still running when retention.workflows has passed (set
// shorter than a delivery's retries) keeps its deploy's DBOS rows: it is
// neither deleted under its feet nor lost from status. Once it ends, a
// later run deletes them.
func TestRetentionKeepsRunningDeliveries(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		recv := holdFinishedCallbacks()
		defer recv.stop()
		held, release := recv.held, recv.release
		f := callbackRetentionFixture(t, db)
		ctx := context.Background()
		url, _ := f.artifact("v1", "1")
		id := f.submit(descriptorYAML("ret", "prod", "1", url, "", fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL)))
		if rec := f.wait(id, 30*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s)", rec.State, rec.Error)
		}
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatal("the finished callback never reached its receiver")
		}

		later := time.Now().Add(time.Hour)
		rep, err := f.eng.Retain(ctx, later)
		if err != nil {
			t.Fatal(err)
		}
		wfs, err := f.eng.DeployWorkflows(id)
		if err != nil || rep.Workflows != 0 || len(wfs) < 2 {
			t.Fatalf("retention during a running delivery: report %+v, DBOS holds %v (%v); want the deploy's workflows kept", rep, wfs, err)
		}

		release()
		enginetest.Eventually(t, 60*time.Second, func() bool {
			ds, ok := f.deliveries(id)
			if !ok {
				return false
			}
			for _, d := range ds {
				if d.Event == notify.EventFinished {
					return d.State == notify.DeliveryDelivered
				}
			}
			return false
		}, "the finished callback delivered")
		// The delivery is recorded a moment before its workflow returns:
		// until it has, retention still keeps the deploy's workflows.
		removed := 0
		enginetest.Eventually(t, 60*time.Second, func() bool {
			rep, err = f.eng.Retain(ctx, later)
			if err != nil {
				t.Fatal(err)
			}
			removed += rep.Workflows
			wfs, err = f.eng.DeployWorkflows(id)
			return err == nil && len(wfs) == 0
		}, "retention after the delivery ended to remove the deploy's workflows; DBOS still holds %v (%v)", &wfs, &err)
		if removed != 1 {
			t.Errorf("retention removed the workflows of %d deploys, want 1", removed)
		}
		if ds, ok := f.deliveries(id); !ok || len(ds) < 2 {
			t.Fatalf("deliveries after retention: %+v", ds)
		}
	})
}

// The work directories a worker holds for deploys that ended elsewhere
// (taken over when it died: their cleanup step ran on another worker) or
// are gone are removed by its sweeper; a deploy not final keeps its own.
func TestWorkDirsOfEndedDeploysAreRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 2)
	url, _ := f.artifact("v1", "x")
	done := f.submit(descriptorYAML("pay", "prod", "1", url, "", ""))
	if rec := f.wait(done, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	waiting := f.submit(descriptorYAML("pay", "qa", "1", url, "", ""), waits(plan.Waits{Approvals: &plan.ApprovalRule{Count: 1, Approvers: []string{"*"}}}))
	f.waitState(waiting, manent.StateAwaitingApproval)
	gone := manent.NewDeploymentID()
	for _, id := range []string{done, waiting, gone} {
		if err := os.MkdirAll(filepath.Join(f.eng.WorkDir(id), "artifact"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f.eng.SweepWorkDirs(context.Background())
	for id, keep := range map[string]bool{done: false, gone: false, waiting: true} {
		if _, err := os.Stat(f.eng.WorkDir(id)); (err == nil) != keep {
			t.Errorf("work directory of %s: %v, want kept %v", id, err, keep)
		}
	}
}

// A deploy that comes after one retention.deploys removed between its
// admission and its submission is refused (409, naming it) — accepted, it
// would wait for its schedule.at and then end DEPENDENCY_FAILED "does not
// exist".
func TestSubmitRefusesAnAfterRetentionRemoved(t *testing.T) {
	t.Parallel()
	f := newFixture(t, enginetest.SQLite(t), 1)
	url, sum := f.artifact("a", "x")
	d, err := descriptor.Parse([]byte(descriptorYAML("app", "prod", "1", url, sum, "")))
	if err != nil {
		t.Fatal(err)
	}
	adm, err := f.node.Admitter.Admit(context.Background(), admit.Request{Descriptor: d, Identity: manent.Identity{Subject: "token:test"}})
	if err != nil {
		t.Fatal(err)
	}
	in := adm.Input
	at := time.Now().Add(time.Hour).UTC()
	in.Waits.At, in.Waits.After = &at, []string{"dpl_removed"}
	_, err = f.eng.Submit(context.Background(), in, adm.Decision)
	if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(err.Error(), "after: deploy dpl_removed no longer exists") {
		t.Fatalf("submit after a removed deploy: %v, want a conflict naming dpl_removed", err)
	}
	if _, err := f.eng.Store().Deployment(context.Background(), in.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused deploy was kept: %v", err)
	}
	// A success its promotion was judged on, removed: refused too.
	in = adm.Input
	in.Successes = []string{"dpl_staging_gone"}
	_, err = f.eng.Submit(context.Background(), in, adm.Decision)
	if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(err.Error(), "deploy dpl_staging_gone, a success of version 1 the governance policy judged promotion on, no longer exists") {
		t.Fatalf("submit after a removed success: %v, want a conflict naming dpl_staging_gone", err)
	}
}

// Deploys whose callback deliveries still retry do not stall retention:
// with more of them than a batch takes, oldest first, a batch looks past
// them and deletes the workflows of the newer deploys.
func TestRetentionLooksPastRunningDeliveries(t *testing.T) {
	defer engine.SetRetentionBatch(1, 10)()
	recv := holdFinishedCallbacks()
	defer recv.stop()
	held := recv.held
	f := callbackRetentionFixture(t, enginetest.SQLite(t))
	ctx := context.Background()
	url, _ := f.artifact("v1", "1")
	stuck := f.submit(descriptorYAML("ret", "prod", "1", url, "", fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL)))
	if rec := f.wait(stuck, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the finished callback never reached its receiver")
	}
	newer := f.submit(descriptorYAML("ret", "prod", "2", url, "", ""))
	if rec := f.wait(newer, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	later := time.Now().Add(time.Hour)
	var rep engine.RetentionReport
	enginetest.Eventually(t, 30*time.Second, func() bool {
		var err error
		rep, err = f.eng.Retain(ctx, later)
		if err != nil {
			t.Fatal(err)
		}
		return rep.Workflows == 1
	}, "a batch deleting the newer deploy's workflows past the one whose delivery still runs")
	if wfs, err := f.eng.DeployWorkflows(newer); err != nil || len(wfs) != 0 {
		t.Fatalf("the newer deploy's workflows after retention: %v (%v)", wfs, err)
	}
	if wfs, err := f.eng.DeployWorkflows(stuck); err != nil || len(wfs) < 2 {
		t.Fatalf("the deploy whose delivery runs lost its workflows: %v (%v)", wfs, err)
	}
}

// TestRetentionMakesProgressPastAnyNumberOfRunningDeliveries: more deploys
// whose deliveries still run than one batch looks past (retentionScan) do
// not stall retention.workflows: the next batches look on from where the
// last one stopped, and reach the newer deploys.
func TestRetentionMakesProgressPastAnyNumberOfRunningDeliveries(t *testing.T) {
	defer engine.SetRetentionBatch(1, 1)()
	recv := holdFinishedCallbacks()
	defer recv.stop()
	held, release := recv.held, recv.release
	f := callbackRetentionFixture(t, enginetest.SQLite(t))
	ctx := context.Background()
	url, _ := f.artifact("v1", "1")
	var stuck []string
	for _, v := range []string{"1", "2", "3"} {
		id := f.submit(descriptorYAML("ret", "prod", v, url, "", fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL)))
		if rec := f.wait(id, 30*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s)", rec.State, rec.Error)
		}
		select {
		case <-held:
		case <-time.After(60 * time.Second):
			t.Fatal("the finished callback never reached its receiver")
		}
		stuck = append(stuck, id)
	}
	newer := f.submit(descriptorYAML("ret", "prod", "4", url, "", ""))
	if rec := f.wait(newer, 30*time.Second); rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s)", rec.State, rec.Error)
	}
	later := time.Now().Add(time.Hour)
	deleted := 0
	for i := 0; i < 10 && deleted == 0; i++ {
		rep, err := f.eng.Retain(ctx, later)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 && rep.LookedPast != 1 {
			// The scheduled run goes on with another batch only if
			// the batch says it stopped with more to look at.
			t.Errorf("the first batch looked past %d deploys whose delivery runs, want 1 (it stopped at the scan bound)", rep.LookedPast)
		}
		deleted = rep.Workflows
	}
	if deleted != 1 {
		t.Fatalf("10 batches that each look past 1 deploy whose delivery runs deleted %d deploys' workflows behind 3 such deploys, want 1: retention stalls behind them", deleted)
	}
	if wfs, err := f.eng.DeployWorkflows(newer); err != nil || len(wfs) != 0 {
		t.Fatalf("the newer deploy's workflows after retention: %v (%v)", wfs, err)
	}
	for _, id := range stuck {
		if wfs, err := f.eng.DeployWorkflows(id); err != nil || len(wfs) < 2 {
			t.Fatalf("the deploy %s whose delivery runs lost its workflows: %v (%v)", id, wfs, err)
		}
	}
	// Once their deliveries end, the next batches take them too.
	release()
	enginetest.Eventually(t, 30*time.Second, func() bool {
		if _, err := f.eng.Retain(ctx, later); err != nil {
			t.Fatal(err)
		}
		for _, id := range stuck {
			if wfs, err := f.eng.DeployWorkflows(id); err != nil || len(wfs) != 0 {
				return false
			}
		}
		return true
	}, "the deploys whose deliveries ended are retained by later batches")
}

// heldCallbacks is a callback receiver that answers every callback at
// once but a finished one, which it holds until release: a delivery
// still running.
type heldCallbacks struct {
	URL string
	// held gets a value for each finished callback that arrives.
	held    chan struct{}
	release func()
	stop    func() // release, then close the receiver
}

func holdFinishedCallbacks() *heldCallbacks {
	hold := make(chan struct{})
	var once sync.Once
	h := &heldCallbacks{held: make(chan struct{}, 16), release: func() { once.Do(func() { close(hold) }) }}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev notify.Event
		_ = json.NewDecoder(r.Body).Decode(&ev)
		if ev.Type == notify.EventFinished {
			h.held <- struct{}{}
			<-hold // answered only when told
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	h.URL = srv.URL
	h.stop = func() { h.release(); srv.Close() } // Close waits for a held handler
	return h
}

// callbackRetentionFixture is a fixture that signs callbacks to loopback
// and runs retention only by hand (Retain), past a minute.
func callbackRetentionFixture(t *testing.T, db string) *fixture {
	t.Setenv("TEST_CALLBACK_SECRET", "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	return newFixture(t, db, 2, func(c *node.Config) {
		c.Callbacks.Allow = []string{"http://127.0.0.1:*/**"}
		c.Callbacks.SecretEnv = "TEST_CALLBACK_SECRET"
		c.Retention.Workflows = time.Minute
		c.Retention.Every = time.Hour
	})
}

// TestRetentionBatchSortsRunningFromFinished: one batch asks DBOS about
// all its deploys at once (busyDeploys); deploys whose finished callback
// still runs, interleaved with deploys that have nothing running, all older
// than retention.workflows, are told apart: the batch deletes the
// workflows of every one with nothing running and of none whose delivery
// runs. On SQLite and PostgreSQL (a C.UTF-8 database: the ID-prefix filter
// is a range of the primary key, patch 14), and with the same answers on
// PostgreSQL where it stays a LIKE: an ICU database, whose order is not
// the bytes', and a user that may not read pg_collation (DBOS cannot tell
// the collation, and still starts).
func TestRetentionBatchSortsRunningFromFinished(t *testing.T) {
	enginetest.Databases(t, batchSortsRunningFromFinished)
	t.Run("postgres-icu", func(t *testing.T) {
		batchSortsRunningFromFinished(t, enginetest.PostgresCreatedWith(t, "LOCALE_PROVIDER icu ICU_LOCALE 'en-US' TEMPLATE template0"))
	})
	t.Run("postgres-no-catalogue", func(t *testing.T) {
		batchSortsRunningFromFinished(t, enginetest.PostgresAs(t, enginetest.Postgres(t),
			"REVOKE SELECT ON pg_catalog.pg_collation FROM PUBLIC"))
	})
}

func batchSortsRunningFromFinished(t *testing.T, db string) {
	recv := holdFinishedCallbacks()
	defer recv.stop()
	f := callbackRetentionFixture(t, db)
	ctx := context.Background()
	url, _ := f.artifact("v1", "1")
	callback := fmt.Sprintf("callbacks:\n  - url: %s/hook\n", recv.URL)
	var running, finished []string
	for i, v := range []string{"1", "2", "3", "4", "5"} {
		extra := ""
		if i%2 == 0 {
			extra = callback
		}
		id := f.submit(descriptorYAML("ret", "prod", v, url, "", extra))
		if rec := f.wait(id, 30*time.Second); rec.State != manent.StateSuccess {
			t.Fatalf("state %s (%s)", rec.State, rec.Error)
		}
		if extra == "" {
			finished = append(finished, id)
			continue
		}
		select {
		case <-recv.held:
		case <-time.After(60 * time.Second):
			t.Fatal("the finished callback never reached its receiver")
		}
		running = append(running, id)
	}
	// A deploy reads SUCCESS a moment before its workflow returns: wait
	// for those with nothing running to have returned.
	enginetest.Eventually(t, 30*time.Second, func() bool {
		ids, err := f.eng.RunningWorkflowIDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ids {
			for _, id := range finished {
				if w == id || strings.HasPrefix(w, id+".") {
					return false
				}
			}
		}
		return true
	}, "the deploys without a callback to have returned")
	rep, err := f.eng.Retain(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Workflows != len(finished) {
		t.Errorf("one batch deleted the workflows of %d deploys, want the %d with nothing running", rep.Workflows, len(finished))
	}
	for _, id := range finished {
		if wfs, err := f.eng.DeployWorkflows(id); err != nil || len(wfs) != 0 {
			t.Errorf("deploy %s, finished with nothing running and older than retention.workflows, kept its workflows: %v (%v)", id, wfs, err)
		}
	}
	for _, id := range running {
		if wfs, err := f.eng.DeployWorkflows(id); err != nil || len(wfs) < 2 {
			t.Errorf("deploy %s, whose finished callback still runs, lost its workflows: %v (%v)", id, wfs, err)
		}
	}
}
