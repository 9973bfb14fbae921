package notify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	_ "github.com/dbos-inc/dbos-transact-golang/dbos/driver/sqlite"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/notify"
)

const (
	testApp      = "manent-notify-test"
	testVersion  = "notify-test-1"
	testExecutor = "notify-test"
)

func TestMain(m *testing.M) {
	if os.Getenv("NOTIFY_CRASH_HELPER") == "1" {
		if err := crashHelper(); err != nil {
			fmt.Fprintln(os.Stderr, "crash helper:", err)
			os.Exit(2)
		}
		return
	}
	os.Exit(m.Run())
}

// newDBOS opens a DBOS context on the SQLite file path. It is not launched.
func newDBOS(path string) (dbos.Context, error) {
	return dbos.NewContext(context.Background(), dbos.Config{
		AppName:            testApp,
		DatabaseURL:        "sqlite:" + path,
		ExecutorID:         testExecutor,
		ApplicationVersion: testVersion,
		Logger:             slog.New(slog.DiscardHandler),
	})
}

// outboxConfig signs with testSecret, sends to loopback only and polls fast.
func outboxConfig(chat map[string]string) notify.OutboxConfig {
	key, err := notify.ParseSecret(testSecret)
	if err != nil {
		panic(err)
	}
	return notify.OutboxConfig{
		Callbacks:    notify.NewSender(loopback(), key, 2*time.Second),
		Chat:         &notify.Chat{Channels: chat, Sender: notify.NewSender(loopback(), nil, 2*time.Second)},
		PollInterval: 20 * time.Millisecond,
	}
}

// startOutbox opens and launches DBOS with an outbox on a fresh database;
// register, if any, registers more before the launch.
func startOutbox(t *testing.T, cfg notify.OutboxConfig, register ...func(dbos.Context, *notify.Outbox)) (dbos.Context, *notify.Outbox) {
	t.Helper()
	ctx, err := newDBOS(filepath.Join(t.TempDir(), "dbos.db"))
	if err != nil {
		t.Fatal(err)
	}
	ob, err := notify.NewOutbox(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range register {
		r(ctx, ob)
	}
	if err := dbos.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dbos.Shutdown(ctx, 5*time.Second) })
	return ctx, ob
}

func waitResult(t *testing.T, ctx dbos.Context, id string) notify.DeliveryResult {
	t.Helper()
	h, err := dbos.RetrieveWorkflow[notify.DeliveryResult](ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	res, err := h.GetResult(dbos.WithHandleTimeout(30*time.Second), dbos.WithHandlePollingInterval(20*time.Millisecond))
	if err != nil {
		t.Fatalf("delivery %s: %v", id, err)
	}
	return res
}

func callbackDelivery(id, url string) notify.Delivery {
	return notify.Delivery{
		ID: id, DeployID: "dpl_01TEST", Kind: notify.KindCallback, URL: url, Event: sampleEvent(notify.EventStarted),
		MaxAttempts: 4, BackoffBase: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
	}
}

func TestOutboxDelivery(t *testing.T) {
	tests := []struct {
		name         string
		statuses     []int // answer to the n-th attempt; the last repeats
		senderWait   time.Duration
		wantState    notify.DeliveryState
		wantStatuses []int // recorded attempts' statuses (0: no answer)
		wantErr      string
	}{
		{"first attempt", []int{204}, 0, notify.DeliveryDelivered, []int{204}, ""},
		{"retried after failures", []int{500, 503, 200}, 0, notify.DeliveryDelivered, []int{500, 503, 200}, ""},
		{"429 then success", []int{429, 202}, 0, notify.DeliveryDelivered, []int{429, 202}, ""},
		{"permanent 4xx stops", []int{404, 204}, 0, notify.DeliveryFailed, []int{404}, "404"},
		{"gives up after max attempts", []int{502}, 0, notify.DeliveryFailed, []int{502, 502, 502, 502}, "502"},
		{"slow receiver times out, then succeeds", []int{-1, 204}, 100 * time.Millisecond, notify.DeliveryDelivered, []int{0, 204}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, testSecret, func(ctx context.Context, n int, _ hit) int {
				s := tt.statuses[min(n, len(tt.statuses))-1]
				if s == -1 { // hang until the sender gives up
					<-ctx.Done()
					return http.StatusGatewayTimeout
				}
				return s
			})
			cfg := outboxConfig(nil)
			if tt.senderWait > 0 {
				cfg.Callbacks.Timeout = tt.senderWait
			}
			ctx, ob := startOutbox(t, cfg)
			d := callbackDelivery("dpl_01TEST.started.cb0", rcv.url("/hook"))
			if err := ob.Enqueue(ctx, d); err != nil {
				t.Fatal(err)
			}
			res := waitResult(t, ctx, d.ID)
			if res.State != tt.wantState || res.Attempts != len(tt.wantStatuses) {
				t.Fatalf("result = %+v, want %s after %d attempts", res, tt.wantState, len(tt.wantStatuses))
			}
			hits := rcv.all()
			if len(hits) != len(tt.wantStatuses) {
				t.Fatalf("receiver saw %d requests, want %d", len(hits), len(tt.wantStatuses))
			}
			for i, h := range hits {
				if h.ID != d.ID {
					t.Errorf("request %d: webhook-id %q, want %q (the same on every retry)", i+1, h.ID, d.ID)
				}
				if h.VerifyErr != nil {
					t.Errorf("request %d: %v", i+1, h.VerifyErr)
				}
				if !bytes.Equal(h.Body, hits[0].Body) {
					t.Errorf("request %d: body changed between retries", i+1)
				}
			}
			ds, err := notify.Deliveries(ctx, "dpl_01TEST")
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 1 {
				t.Fatalf("Deliveries = %+v, want one", ds)
			}
			got := ds[0]
			if got.State != tt.wantState || got.Kind != notify.KindCallback || got.Event != notify.EventStarted || got.CompletedAt == nil {
				t.Fatalf("delivery status = %+v", got)
			}
			if len(got.Attempts) != len(tt.wantStatuses) {
				t.Fatalf("recorded attempts = %+v, want %d", got.Attempts, len(tt.wantStatuses))
			}
			for i, a := range got.Attempts {
				if a.N != i+1 || a.Status != tt.wantStatuses[i] || a.At.IsZero() {
					t.Errorf("attempt %d = %+v, want status %d", i+1, a, tt.wantStatuses[i])
				}
			}
			last := got.Attempts[len(got.Attempts)-1]
			if tt.wantErr != "" && (!bytes.Contains([]byte(got.Error), []byte(tt.wantErr)) || last.OK()) {
				t.Errorf("error = %q, want it to mention %q", got.Error, tt.wantErr)
			}
			if tt.name == "permanent 4xx stops" && !last.Permanent {
				t.Errorf("the 404 attempt is not marked permanent: %+v", last)
			}
		})
	}
}

func TestOutboxEnqueueIsIdempotent(t *testing.T) {
	rcv := newReceiver(t, testSecret, nil)
	ctx, ob := startOutbox(t, outboxConfig(nil))
	d := callbackDelivery("dpl_01TEST.started.cb0", rcv.url("/"))
	for range 3 {
		if err := ob.Enqueue(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	waitResult(t, ctx, d.ID)
	if err := ob.Enqueue(ctx, d); err != nil { // after completion too
		t.Fatal(err)
	}
	if res := waitResult(t, ctx, d.ID); res.Attempts != 1 {
		t.Fatalf("result = %+v", res)
	}
	if n := rcv.count(d.ID); n != 1 {
		t.Fatalf("receiver saw %s %d times, want once", d.ID, n)
	}
	wfs, err := dbos.ListWorkflows(ctx, dbos.WithFilterName(notify.WorkflowName))
	if err != nil || len(wfs) != 1 {
		t.Fatalf("workflows = %d (%v), want 1", len(wfs), err)
	}
}

func TestOutboxRefusesBadDeliveries(t *testing.T) {
	ctx, ob := startOutbox(t, outboxConfig(nil))
	for _, d := range []notify.Delivery{
		{Kind: notify.KindCallback, URL: "http://127.0.0.1/"},
		{ID: "a.b.c", Kind: notify.KindCallback},
		{ID: "a.b.c", Kind: notify.KindChat},
		{ID: "a.b.c", Kind: "smoke-signal", URL: "x"},
	} {
		if err := ob.Enqueue(ctx, d); err == nil {
			t.Errorf("Enqueue(%+v) succeeded", d)
		}
	}
}

// A deploy's whole life: every event reaches every callback that asked
// for it, signed, and chat gets the start and the end.
func TestOutboxDeployEvents(t *testing.T) {
	all := newReceiver(t, testSecret, nil)
	finishedOnly := newReceiver(t, testSecret, nil)
	chat := newReceiver(t, "", nil)
	ctx, ob := startOutbox(t, outboxConfig(map[string]string{"deploys-prod": chat.url("/services/x")}))

	callbacks := []notify.Callback{
		{URL: all.url("/all")},
		{URL: finishedOnly.url("/finished"), Events: []string{"finished"}},
	}
	channels := []string{"deploys-prod"}
	base := sampleEvent(notify.EventStarted)
	step := func(name string, state manent.StepState) notify.Event {
		ev := base
		ev.Type = notify.EventStep
		ev.Step = &notify.StepRef{Name: name, State: state, Attempts: 1}
		return ev
	}
	finished := base
	finished.Type = notify.EventFinished
	finished.Deployment.State, finished.Deployment.Error, finished.Deployment.Rollback = manent.StateError, `step "post-test" failed`, "completed"

	events := []struct {
		key string
		ev  notify.Event
	}{
		{"started", base},
		{"step.deploy", step("deploy", manent.StepSuccess)},
		{"step.post-test", step("post-test", manent.StepError)},
		{"step.rollback:deploy", step("rollback:deploy", manent.StepSuccess)},
		{"finished", finished},
	}
	var ids []string
	for _, e := range events {
		ds := notify.Fanout(e.ev, e.key, callbacks, channels)
		if err := ob.EnqueueAll(ctx, ds); err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
	}
	if len(ids) != 5+1+2 {
		t.Fatalf("fan-out made %d deliveries: %v", len(ids), ids)
	}
	for _, id := range ids {
		if res := waitResult(t, ctx, id); res.State != notify.DeliveryDelivered {
			t.Fatalf("%s: %+v", id, res)
		}
	}

	seen := map[string]bool{}
	for _, h := range all.all() {
		if h.VerifyErr != nil {
			t.Errorf("%s: %v", h.ID, h.VerifyErr)
		}
		key := string(h.Event.Type)
		if h.Event.Step != nil {
			key += ":" + h.Event.Step.Name
		}
		seen[key] = true
	}
	for _, want := range []string{"started", "step:deploy", "step:post-test", "step:rollback:deploy", "finished"} {
		if !seen[want] {
			t.Errorf("the all-events receiver did not see %s (saw %v)", want, seen)
		}
	}
	if hits := finishedOnly.all(); len(hits) != 1 || hits[0].Event.Type != notify.EventFinished ||
		hits[0].VerifyErr != nil || hits[0].Event.Deployment.Rollback != "completed" {
		t.Errorf("finished-only receiver saw %+v", hits)
	}
	if hits := chat.all(); len(hits) != 2 {
		t.Errorf("chat saw %d messages, want 2 (start and finish)", len(hits))
	}

	ds, err := notify.Deliveries(ctx, "dpl_01TEST")
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != len(ids) {
		t.Fatalf("Deliveries lists %d, want %d", len(ds), len(ids))
	}
	for _, d := range ds {
		if d.State != notify.DeliveryDelivered || len(d.Attempts) != 1 {
			t.Errorf("%+v", d)
		}
		if d.Kind == notify.KindChat && (d.Channel != "deploys-prod" || d.URL != "") {
			t.Errorf("chat delivery shows %+v", d)
		}
	}
	if other, err := notify.Deliveries(ctx, "dpl_OTHER"); err != nil || len(other) != 0 {
		t.Fatalf("another deploy's deliveries = %v, %v", other, err)
	}
}

// The two ways a deploy workflow enqueues: from the workflow between steps,
// and from inside a step with the root context. Either way, a deploy
// workflow run twice with the same id (a replay) delivers once.
func TestOutboxEnqueueFromAWorkflow(t *testing.T) {
	tests := []struct {
		name   string
		inStep bool
	}{
		{"between steps, with the workflow context", false},
		{"inside a step, with the root context", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, testSecret, nil)
			var root dbos.Context
			var outbox *notify.Outbox
			deployWF := func(ctx dbos.Context, url string) (string, error) {
				d := callbackDelivery("dpl_01WF.started.cb0", url)
				d.DeployID = "dpl_01WF"
				if !tt.inStep {
					return "ok", outbox.Enqueue(ctx, d)
				}
				return dbos.RunAsStep(ctx, func(context.Context) (string, error) {
					return "ok", outbox.Enqueue(root, d)
				}, dbos.WithStepName("notify:started"))
			}
			ctx, _ := startOutbox(t, outboxConfig(nil), func(ctx dbos.Context, ob *notify.Outbox) {
				root, outbox = ctx, ob
				dbos.RegisterWorkflow(ctx, deployWF, dbos.WithWorkflowName("test.deploy"))
			})
			for range 2 {
				h, err := dbos.RunWorkflow(ctx, deployWF, rcv.url("/"), dbos.WithWorkflowID("dpl_01WF"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := h.GetResult(dbos.WithHandleTimeout(30 * time.Second)); err != nil {
					t.Fatal(err)
				}
			}
			if res := waitResult(t, ctx, "dpl_01WF.started.cb0"); res.State != notify.DeliveryDelivered {
				t.Fatalf("result = %+v", res)
			}
			if n := rcv.count("dpl_01WF.started.cb0"); n != 1 {
				t.Fatalf("delivered %d times", n)
			}
		})
	}
}

func TestDeliveryBackoff(t *testing.T) {
	d := notify.Delivery{BackoffBase: time.Second, BackoffMax: 10 * time.Second}
	tests := []struct {
		n          int
		retryAfter time.Duration
		want       time.Duration
	}{
		{1, 0, time.Second},
		{2, 0, 2 * time.Second},
		{3, 0, 4 * time.Second},
		{4, 0, 8 * time.Second},
		{5, 0, 10 * time.Second},
		{50, 0, 10 * time.Second},
		{1, 5 * time.Second, 5 * time.Second},
		{1, time.Hour, 10 * time.Second},
	}
	for _, tt := range tests {
		if got := d.Backoff(tt.n, tt.retryAfter); got != tt.want {
			t.Errorf("Backoff(%d, %s) = %s, want %s", tt.n, tt.retryAfter, got, tt.want)
		}
	}
	if got := (notify.Delivery{}).Backoff(1, 0); got != notify.DefaultBackoffBase {
		t.Errorf("default first backoff = %s", got)
	}
}

func TestDeliveryIDAndFanout(t *testing.T) {
	if got := notify.DeliveryID("dpl_1", "step.rollback:deploy", "chat-deploys prod/x"); got != "dpl_1.step.rollback:deploy.chat-deploys%20prod%2Fx" {
		t.Fatalf("DeliveryID = %q", got)
	}
	ev := sampleEvent(notify.EventStep)
	ds := notify.Fanout(ev, "step.deploy", []notify.Callback{{URL: "a"}, {URL: "b", Events: []string{"started", "finished"}}, {URL: "c", Events: []string{"step"}}}, []string{"ops"})
	var got []string
	for _, d := range ds {
		got = append(got, d.ID+"="+d.URL)
	}
	want := []string{"dpl_01TEST.step.deploy.cb0=a", "dpl_01TEST.step.deploy.cb2=c"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Fanout = %v, want %v (no chat for step events)", got, want)
	}
}

// TestDeliveryIDIsOnePerEvent: two events of a deploy never share a
// webhook-id. A shared one is one delivery (DBOS keeps the first workflow
// of an id): the waves "eu 1" and "eu_1" are distinct steps, and the
// second's callbacks were never sent. Names written only in letters,
// digits and "._:-" keep the id they always had.
func TestDeliveryIDIsOnePerEvent(t *testing.T) {
	distinct := []struct{ a, b [2]string }{
		{[2]string{"step.deploy[eu 1]", "cb0"}, [2]string{"step.deploy[eu_1]", "cb0"}},
		{[2]string{"step.deploy[eu/1]", "cb0"}, [2]string{"step.deploy[eu 1]", "cb0"}},
		{[2]string{"step.deploy[canary]", "cb0"}, [2]string{"step.deploy_canary_", "cb0"}},
		{[2]string{"step.health-gate[a%20b]", "cb0"}, [2]string{"step.health-gate[a b]", "cb0"}},
		{[2]string{"started", "chat-deploys prod"}, [2]string{"started", "chat-deploys_prod"}},
		{[2]string{"step.deploy[é]", "cb0"}, [2]string{"step.deploy[è]", "cb0"}},
	}
	for _, c := range distinct {
		a := notify.DeliveryID("dpl_1", c.a[0], c.a[1])
		b := notify.DeliveryID("dpl_1", c.b[0], c.b[1])
		if a == b {
			t.Errorf("events %q/%q and %q/%q share the webhook-id %q", c.a[0], c.a[1], c.b[0], c.b[1], a)
		}
	}
	for _, key := range []string{"started", "finished", "step.deploy", "step.smoke_test", "step.rollback:deploy", "step.checkpoint:deploy"} {
		if got, want := notify.DeliveryID("dpl_1", key, "cb3"), "dpl_1."+key+".cb3"; got != want {
			t.Errorf("DeliveryID(%q) = %q, want %q (unchanged)", key, got, want)
		}
	}
}

// crashHelper is the child process of TestOutboxSurvivesCrash: it enqueues
// one delivery and works on it until it is killed.
func crashHelper() error {
	ctx, err := newDBOS(os.Getenv("NOTIFY_CRASH_DB"))
	if err != nil {
		return err
	}
	ob, err := notify.NewOutbox(ctx, outboxConfig(nil))
	if err != nil {
		return err
	}
	if err := dbos.Launch(ctx); err != nil {
		return err
	}
	backoff, _ := time.ParseDuration(os.Getenv("NOTIFY_CRASH_BACKOFF"))
	d := callbackDelivery("dpl_01CRASH.finished.cb0", os.Getenv("NOTIFY_CRASH_URL"))
	d.DeployID, d.Event.Deployment.ID = "dpl_01CRASH", "dpl_01CRASH"
	d.BackoffBase, d.BackoffMax = backoff, backoff
	if err := ob.Enqueue(ctx, d); err != nil {
		return err
	}
	select {} // until killed
}

// A worker killed with SIGKILL, during an attempt or while waiting between
// attempts: a restarted worker with the same executor id resumes the
// delivery with the same webhook-id, and the receiver gets the event.
func TestOutboxSurvivesCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a worker process")
	}
	const id = "dpl_01CRASH.finished.cb0"
	tests := []struct {
		name string
		// hang makes the first attempt hang, so the kill lands during it;
		// otherwise the first attempt fails and the kill lands in the wait.
		hang         bool
		wantAttempts int // recorded attempts after the restart
		wantRequests int
	}{
		{"killed while waiting to retry", false, 2, 2},
		{"killed during an attempt", true, 1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var healthy atomic.Bool
			rcv := newReceiver(t, testSecret, func(ctx context.Context, n int, _ hit) int {
				if healthy.Load() {
					return http.StatusNoContent
				}
				if tt.hang {
					<-ctx.Done()
				}
				return http.StatusServiceUnavailable
			})
			dbPath := filepath.Join(t.TempDir(), "dbos.db")
			var childOut bytes.Buffer
			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(),
				"NOTIFY_CRASH_HELPER=1", "NOTIFY_CRASH_DB="+dbPath, "NOTIFY_CRASH_URL="+rcv.url("/hook"),
				"NOTIFY_CRASH_BACKOFF=2s")
			child.Stdout, child.Stderr = &childOut, &childOut
			// It runs until killed: with the test binary too, however that
			// dies.
			childProc, err := childproc.Start(child)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = child.Process.Kill(); _ = childProc.Wait() })

			first := rcv.next(t, 60*time.Second)
			if first.ID != id || first.VerifyErr != nil {
				t.Fatalf("first request: id %q, %v", first.ID, first.VerifyErr)
			}

			// The restarted worker: registered now, launched after the kill.
			ctx, err := newDBOS(dbPath)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := notify.NewOutbox(ctx, outboxConfig(nil)); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = dbos.Shutdown(ctx, 5*time.Second) })
			if !tt.hang {
				// Kill only once the failed attempt is recorded: the child
				// is then in its durable sleep.
				waitFor(t, 30*time.Second, func() bool {
					steps, err := dbos.GetWorkflowSteps(ctx, id, dbos.WithStepsLoadOutput(true))
					return err == nil && len(steps) >= 1 && steps[0].StepName == "attempt-1"
				})
			}
			if err := child.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = childProc.Wait()
			healthy.Store(true)

			if err := dbos.Launch(ctx); err != nil { // recovers the PENDING delivery
				t.Fatal(err)
			}
			res := waitResult(t, ctx, id)
			if res.State != notify.DeliveryDelivered || res.Attempts != tt.wantAttempts {
				t.Fatalf("result = %+v, want delivered after %d recorded attempts\nchild output:\n%s", res, tt.wantAttempts, childOut.String())
			}
			hits := rcv.all()
			if len(hits) != tt.wantRequests {
				t.Fatalf("receiver saw %d requests, want %d", len(hits), tt.wantRequests)
			}
			for i, h := range hits {
				if h.ID != id || h.VerifyErr != nil {
					t.Errorf("request %d: webhook-id %q, verify %v", i+1, h.ID, h.VerifyErr)
				}
			}
			ds, err := notify.Deliveries(ctx, "dpl_01CRASH")
			if err != nil || len(ds) != 1 || ds[0].State != notify.DeliveryDelivered {
				t.Fatalf("Deliveries = %+v, %v", ds, err)
			}
		})
	}
}

// A graceful restart (dbos.Shutdown) while a delivery waits to retry: the
// next start resumes it.
func TestOutboxSurvivesRestart(t *testing.T) {
	var healthy atomic.Bool
	rcv := newReceiver(t, testSecret, func(context.Context, int, hit) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusBadGateway
	})
	dbPath := filepath.Join(t.TempDir(), "dbos.db")
	open := func() dbos.Context {
		ctx, err := newDBOS(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		ob, err := notify.NewOutbox(ctx, outboxConfig(nil))
		if err != nil {
			t.Fatal(err)
		}
		if err := dbos.Launch(ctx); err != nil {
			t.Fatal(err)
		}
		if len(rcv.all()) == 0 {
			d := callbackDelivery("dpl_01RESTART.started.cb0", rcv.url("/"))
			d.BackoffBase, d.BackoffMax = time.Second, time.Second
			if err := ob.Enqueue(ctx, d); err != nil {
				t.Fatal(err)
			}
		}
		return ctx
	}
	first := open()
	rcv.next(t, 30*time.Second)
	waitFor(t, 30*time.Second, func() bool {
		steps, err := dbos.GetWorkflowSteps(first, "dpl_01RESTART.started.cb0")
		return err == nil && len(steps) >= 1
	})
	if err := dbos.Shutdown(first, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	healthy.Store(true)
	second := open()
	t.Cleanup(func() { _ = dbos.Shutdown(second, 5*time.Second) })
	res := waitResult(t, second, "dpl_01RESTART.started.cb0")
	if res.State != notify.DeliveryDelivered || res.Attempts != 2 {
		t.Fatalf("result = %+v, want delivered at the second attempt", res)
	}
	for _, h := range rcv.all() {
		if h.ID != "dpl_01RESTART.started.cb0" || h.VerifyErr != nil {
			t.Errorf("request: id %q, %v", h.ID, h.VerifyErr)
		}
	}
}

// waitFor polls cond until it holds, failing the test after within.
func waitFor(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s", within)
		}
		<-tick.C
	}
}

// A receiver shared by many deploys serves them in turn: with one delivery
// at a time to it (partition concurrency 1), the first event of a deploy
// that arrives while another deploy has a backlog there goes next, not
// after the backlog. Before, one submission with many callbacks to a
// receiver and many step events held every other deploy's callbacks to
// it for hours. A deploy's own events still arrive in order.
func TestSharedReceiverServesDeploysInTurn(t *testing.T) {
	release := make(chan struct{})
	rcv := newReceiver(t, testSecret, func(ctx context.Context, n int, h hit) int {
		if h.ID == "dpl_A.step.0.cb0" {
			select { // the backlog builds up behind the first delivery
			case <-release:
			case <-ctx.Done():
			}
		}
		return http.StatusNoContent
	})
	cfg := outboxConfig(nil)
	cfg.ReceiverConcurrency = 1
	ctx, ob := startOutbox(t, cfg)
	event := func(deploy string, seq int) notify.Delivery {
		ds := notify.Fanout(sampleEvent(notify.EventStep), fmt.Sprintf("step.%d", seq), []notify.Callback{{URL: rcv.url("/hook")}}, nil)
		for i := range ds {
			ds[i].ID, ds[i].DeployID = fmt.Sprintf("dpl_%s.step.%d.cb0", deploy, seq), "dpl_"+deploy
		}
		notify.Rank(ds, seq, 1)
		return ds[0]
	}
	if err := ob.Enqueue(ctx, event("A", 0)); err != nil {
		t.Fatal(err)
	}
	if h := rcv.next(t, 30*time.Second); h.ID != "dpl_A.step.0.cb0" {
		t.Fatalf("first request %s", h.ID)
	}
	for seq := 1; seq <= 10; seq++ {
		if err := ob.Enqueue(ctx, event("A", seq)); err != nil {
			t.Fatal(err)
		}
	}
	b := event("B", 0)
	if err := ob.Enqueue(ctx, b); err != nil {
		t.Fatal(err)
	}
	close(release)
	var order []string
	for range 11 {
		order = append(order, rcv.next(t, 30*time.Second).ID)
	}
	if order[0] != b.ID {
		t.Errorf("after A's first event the receiver got %v; want B's first event next", order)
	}
	last := -1
	for _, id := range order {
		var seq int
		if _, err := fmt.Sscanf(id, "dpl_A.step.%d.cb0", &seq); err == nil {
			if seq < last {
				t.Errorf("A's events out of order: %v", order)
			}
			last = seq
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for the outbox's concurrent logging.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A delivery that fails for good says so in the server's log, once, with
// its attempts and last error: each failed attempt was logged, the last
// one as not permanent, and nothing told the operator that manent had
// stopped trying. The URL's query (a receiver's token) is in no line.
func TestOutboxLogsADeliveryThatFailedForGood(t *testing.T) {
	r := newReceiver(t, testSecret, func(context.Context, int, hit) int { return http.StatusInternalServerError })
	var logs lockedBuffer
	cfg := outboxConfig(nil)
	cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	ctx, ob := startOutbox(t, cfg)
	d := callbackDelivery("dpl_01TEST.finished.cb0", r.url("/hook?token=RECEIVER-TOKEN"))
	d.MaxAttempts = 2
	if err := ob.Enqueue(ctx, d); err != nil {
		t.Fatal(err)
	}
	if res := waitResult(t, ctx, d.ID); res.State != notify.DeliveryFailed || res.Attempts != 2 {
		t.Fatalf("result %+v, want failed after 2 attempts", res)
	}
	var failed []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["msg"] == "delivery failed" {
			failed = append(failed, rec)
		}
	}
	if len(failed) != 1 {
		t.Fatalf("%d 'delivery failed' lines, want 1; log:\n%s", len(failed), logs.String())
	}
	if f := failed[0]; f["level"] != "ERROR" || f["delivery"] != d.ID || f["attempts"] != float64(2) ||
		!strings.Contains(fmt.Sprint(f["error"]), "500") {
		t.Errorf("'delivery failed' line %v, want level ERROR, the delivery's id, 2 attempts and the 500", f)
	}
	if strings.Contains(logs.String(), "RECEIVER-TOKEN") {
		t.Errorf("the log holds the URL's query:\n%s", logs.String())
	}
}
