package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/itsm/reference"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
)

// Change management against the reference ITSM (a real HTTP server): the
// deploy waits in AWAITING_APPROVAL for its change, runs once the change is
// approved, and closes it with the outcome; a rejected change is REJECTED.
func TestChangeTicket(t *testing.T) {
	t.Parallel()
	ref := reference.New()
	srv := httptest.NewServer(ref)
	defer srv.Close()
	f := newFixture(t, enginetest.SQLite(t), 2, func(c *node.Config) {
		c.ITSM.URL = srv.URL
		c.ITSM.Poll = 100 * time.Millisecond
	})
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	// It needs no approvals in manent: a verdict here would be recorded and
	// ignored (QA had a 200 for a rejection, then SUCCESS) — refused.
	for _, verdict := range []string{"reject", "approve"} {
		_, err := f.eng.Approve(context.Background(), id, manent.Identity{Subject: "token:ops"}, manent.Approval{Verdict: verdict})
		if manent.ErrorCode(err) != manent.EConflict || !strings.Contains(manent.ErrorMessage(err), "change ticket") {
			t.Errorf("%s of a deploy waiting for its change only: %v, want a 409 naming the ticket", verdict, err)
		}
	}
	if as, err := f.st.Approvals(context.Background(), id); err != nil || len(as) != 0 {
		t.Errorf("verdicts recorded: %+v %v", as, err)
	}
	ref.Set("CHG0001", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		return d.Steps[len(d.Steps)-1].State == manent.StepSuccess
	}, "change:close to run after the conclusion")
	var names []string
	for _, s := range d.Steps {
		names = append(names, s.Name+"="+string(s.State))
	}
	got := strings.Join(names, ",")
	if !strings.HasPrefix(got, "change:open=SUCCESS,config=SUCCESS") || !strings.HasSuffix(got, "cleanup=SUCCESS,change:close=SUCCESS") {
		t.Fatalf("steps %s", got)
	}
	if c, _ := ref.Get("CHG0001"); c.State != itsm.Closed || c.Outcome != "SUCCESS" {
		t.Fatalf("change after the deploy: %+v, want closed with SUCCESS", c)
	}

	id = f.submit(descriptorYAML("erp", "prod", "2", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0002") }, "change CHG0002 to be opened")
	ref.Set("CHG0002", itsm.Rejected)
	d = f.waitState(id, manent.StateRejected)
	if !strings.Contains(d.Error, "CHG0002") {
		t.Errorf("error %q", d.Error)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool { c, _ := ref.Get("CHG0002"); return c.State == itsm.Closed }, "the rejected change to be closed")
	if c, _ := ref.Get("CHG0002"); c.State != itsm.Closed || c.Outcome != "REJECTED" {
		t.Fatalf("rejected change: %+v, want closed with REJECTED", c)
	}
}

// flakyITSM is the reference ITSM behind switches a test flips: the next n
// requests of a kind are answered 500 (n < 0: all of them until reset).
type flakyITSM struct {
	ref  *reference.Server
	mu   sync.Mutex
	fail map[string]int // "open", "get", "close"
	seen map[string]int // the requests of each kind answered 500
}

func newFlakyITSM() *flakyITSM {
	return &flakyITSM{ref: reference.New(), fail: map[string]int{}, seen: map[string]int{}}
}

func (f *flakyITSM) set(kind string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail[kind] = n
}

func (f *flakyITSM) failed(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[kind]
}

func (f *flakyITSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	kind := "get"
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/changes":
		kind = "open"
	case strings.HasSuffix(r.URL.Path, "/close"):
		kind = "close"
	}
	f.mu.Lock()
	n := f.fail[kind]
	if n != 0 {
		f.fail[kind] = n - 1
		if n < 0 {
			f.fail[kind] = n
		}
		f.seen[kind]++
	}
	f.mu.Unlock()
	if n != 0 {
		http.Error(w, "itsm database unavailable", http.StatusInternalServerError)
		return
	}
	f.ref.ServeHTTP(w, r)
}

func changeFixture(t *testing.T, h http.Handler, opts ...func(*node.Config)) *fixture {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return newFixture(t, enginetest.SQLite(t), 2, append([]func(*node.Config){func(c *node.Config) {
		c.ITSM.URL = srv.URL
		c.ITSM.Poll = 20 * time.Millisecond
	}}, opts...)...)
}

// QA: a deploy cancelled while change:open waited for the ITSM ended at
// once; its conclusion found no ticket to close, then change:open got
// CHG0001 and the gate left it open for good. The gate closes it
// (CANCELLED) — also when the worker stops during change:open and the
// step runs again after the restart.
func TestChangeTicketOfACancelledDeployIsClosed(t *testing.T) {
	t.Parallel()
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", crash), func(t *testing.T) {
			ref := reference.New()
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			var first atomic.Bool
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/changes" && first.CompareAndSwap(false, true) {
					// The ITSM creates the change, then is slow to answer.
					ref.ServeHTTP(httptest.NewRecorder(), r)
					arrived <- struct{}{}
					select {
					case <-release:
					case <-r.Context().Done():
					}
					if crash {
						http.Error(w, "gone", http.StatusServiceUnavailable)
						return
					}
					c, _ := ref.Get("CHG0001")
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusCreated)
					_ = json.NewEncoder(w).Encode(c)
					return
				}
				ref.ServeHTTP(w, r)
			})
			f := changeFixture(t, h)
			url, _ := f.artifact("v1", "x")
			id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
			select {
			case <-arrived:
			case <-time.After(30 * time.Second):
				t.Fatal("change:open never reached the ITSM")
			}
			if _, err := f.eng.Cancel(context.Background(), id); err != nil {
				t.Fatal(err)
			}
			f.waitState(id, manent.StateCancelled)
			enginetest.Eventually(t, 30*time.Second, func() bool {
				st, err := f.eng.WorkflowStatus(id + ".finish")
				return err == nil && st == dbos.WorkflowStatusSuccess
			}, "the conclusion to be announced (with no ticket known yet)")
			if crash {
				f.restart() // interrupts change:open; it runs again on recovery
			}
			close(release)
			var c itsm.Change
			enginetest.Eventually(t, 30*time.Second, func() bool {
				c, _ = ref.Get("CHG0001")
				return c.State == itsm.Closed
			}, "change CHG0001 of the cancelled deploy to be closed; it is %+v", &c)
			if c.Outcome != string(manent.StateCancelled) {
				t.Errorf("change closed with %q, want CANCELLED", c.Outcome)
			}
		})
	}
}

// QA: a change closed in the ITSM before it was approved (or in a state
// the protocol does not name) left its deploy AWAITING_APPROVAL, "pending",
// for ever. Closed or cancelled there: REJECTED, naming the change and its
// state; an unknown state: the deploy waits and its reason says so.
func TestChangeTicketClosedOrUnknownInTheITSM(t *testing.T) {
	t.Parallel()
	ref := reference.New()
	f := changeFixture(t, ref)
	url, _ := f.artifact("v1", "x")
	for i, state := range []string{itsm.Closed, "cancelled"} {
		chg := fmt.Sprintf("CHG%04d", i+1)
		id := f.submit(descriptorYAML("erp", "prod", fmt.Sprint(i+1), url, "", ""), waits(plan.Waits{Change: true}))
		enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, chg+" pending") }, "the deploy to wait for change %s", chg)
		ref.Set(chg, state)
		d := f.waitState(id, manent.StateRejected)
		if !strings.Contains(d.Error, chg) || !strings.Contains(d.Error, state) {
			t.Errorf("error %q, want it to name %s and its state %s", d.Error, chg, state)
		}
	}
	id := f.submit(descriptorYAML("erp", "prod", "3", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0003 pending") }, "the deploy to wait for change CHG0003")
	ref.Set("CHG0003", "scheduled")
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		return strings.Contains(d.Reason, `"scheduled"`)
	}, "the reason to name the unknown state; it is %s", stateOf{&d})
	if d.State != manent.StateAwaitingApproval {
		t.Fatalf("deploy %s with its change in an unknown state, want AWAITING_APPROVAL", d.State)
	}
	ref.Set("CHG0003", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
}

// QA: a short ITSM outage while the gate polled the change (GET answering
// 500) ended a waiting deploy ERROR after the poll step's retries. A failed
// poll shows in the reason and the gate asks again; the deploy runs once
// the change is approved.
func TestChangeTicketSurvivesAnITSMOutage(t *testing.T) {
	t.Parallel()
	fl := newFlakyITSM()
	f := changeFixture(t, fl)
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	fl.set("get", -1)
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		return fl.failed("get") >= 12 || d.State.Final()
	}, "a dozen failed polls")
	if d = f.state(id); d.State != manent.StateAwaitingApproval || !strings.Contains(d.Reason, "itsm database unavailable") {
		t.Fatalf("after a dozen failed polls the deploy is %s, want AWAITING_APPROVAL with the failure in its reason", stateOf{&d})
	}
	fl.set("get", 0)
	fl.ref.Set("CHG0001", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
}

// An ITSM that fails every poll for itsm.give_up_after ends the waiting
// deploy ERROR, saying since when and the last error once.
func TestChangeTicketGivesUpOnALongITSMOutage(t *testing.T) {
	t.Parallel()
	fl := newFlakyITSM()
	f := changeFixture(t, fl, func(c *node.Config) { c.ITSM.GiveUpAfter = 500 * time.Millisecond })
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	fl.set("get", -1)
	d := f.waitState(id, manent.StateError)
	if !strings.Contains(d.Error, "change CHG0001") || !strings.Contains(d.Error, "itsm.give_up_after") || strings.Count(d.Error, "itsm database unavailable") != 1 {
		t.Errorf("error %q, want the change, the setting and the last error once", d.Error)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool { c, _ := fl.ref.Get("CHG0001"); return c.State == itsm.Closed },
		"the change to be closed once the ITSM answers again (it still fails polls only)")
}

// QA: a change:close that failed past its retries (the ITSM answering 500)
// left the ticket open for good. The close is its own durable workflow
// that tries again for itsm.give_up_after, the failures on the step's log.
func TestChangeCloseIsTriedAgain(t *testing.T) {
	t.Parallel()
	fl := newFlakyITSM()
	f := changeFixture(t, fl)
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	fl.set("close", 8)
	fl.ref.Set("CHG0001", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
	var c itsm.Change
	enginetest.Eventually(t, 60*time.Second, func() bool { c, _ = fl.ref.Get("CHG0001"); return c.State == itsm.Closed },
		"the change to be closed after 8 failed attempts; it is %+v", &c)
	if c.Outcome != "SUCCESS" || fl.failed("close") != 8 {
		t.Errorf("change %+v after %d failed closes, want closed with SUCCESS after 8", c, fl.failed("close"))
	}
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		return d.Steps[len(d.Steps)-1].State == manent.StepSuccess
	}, "change:close to show SUCCESS")
	if st := d.Steps[len(d.Steps)-1]; st.Name != manent.StepChangeClose || st.Attempts != 9 {
		t.Errorf("last step %s after %d attempts, want change:close after 9", st.Name, st.Attempts)
	}
	logs, err := f.st.Logs(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(logs); !strings.Contains(text, "attempt 8 failed; trying again in") {
		t.Errorf("change:close log %s, want each failed attempt", text)
	}
}

// QA: a change:open that failed past its retries repeated the ITSM's error
// six times in the deploy's error; it reads once, with the attempts.
func TestChangeOpenFailureReadsOnce(t *testing.T) {
	t.Parallel()
	fl := newFlakyITSM()
	fl.set("open", -1)
	f := changeFixture(t, fl)
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	d := f.waitState(id, manent.StateError)
	if strings.Count(d.Error, "itsm database unavailable") != 1 || !strings.Contains(d.Error, "(after 6 attempts)") {
		t.Errorf("error %q, want the ITSM's error once and the number of attempts", d.Error)
	}
}

// A step's error read back from DBOS (the sweeper's "the deploy's workflow
// failed") keeps only the message: identical attempts' errors read once.
func TestStepFailureReadBack(t *testing.T) {
	t.Parallel()
	e500 := "itsm: GET /changes/CHG0013: HTTP 500: boom"
	for _, tc := range []struct{ joined, want string }{
		{strings.Repeat(e500+"\n", 5) + e500, e500 + " (after 6 attempts)"},
		{strings.Repeat("a\n", 5) + "b", "DBOS Error MaxStepRetriesExceeded: Step gate:change-2 has exceeded its maximum of 5 retries: " + strings.Repeat("a\n", 5) + "b"},
	} {
		err := &dbos.Error{Code: dbos.ErrorCodeMaxStepRetriesExceeded, StepName: "gate:change-2", MaxRetries: 5,
			Message: "Step gate:change-2 has exceeded its maximum of 5 retries: " + tc.joined}
		if got := engine.StepFailure(err); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if got := engine.StepFailure(fmt.Errorf("plain")); got != "plain" {
		t.Errorf("got %q", got)
	}
}

// strictCloseITSM is the reference ITSM answering 409 to closing a change
// that is already closed, as ServiceNow-like ITSMs do.
type strictCloseITSM struct{ ref *reference.Server }

func (s strictCloseITSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/changes/"), "/close"); ok && r.Method == http.MethodPost {
		if c, found := s.ref.Get(id); found && (c.State == itsm.Closed || c.State == itsm.Cancelled) {
			http.Error(w, `{"error": "change is closed"}`, http.StatusConflict)
			return
		}
	}
	s.ref.ServeHTTP(w, r)
}

// QA: a change closed in the ITSM before it was approved ended its deploy
// REJECTED, then closing it got the ITSM's 409 and change:close ended
// ERROR, its log telling the operator to close by hand a change that was
// closed. A close refused for a change the ITSM shows closed is done.
func TestChangeAlreadyClosedInTheITSM(t *testing.T) {
	t.Parallel()
	ref := reference.New()
	f := changeFixture(t, strictCloseITSM{ref})
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	ref.Set("CHG0001", "cancelled")
	f.waitState(id, manent.StateRejected)
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		st := d.Steps[len(d.Steps)-1]
		return st.Name == manent.StepChangeClose && (st.State == manent.StepSuccess || st.State == manent.StepError)
	}, "change:close to end; the deploy is %s", stateOf{&d})
	if st := d.Steps[len(d.Steps)-1]; st.State != manent.StepSuccess {
		t.Errorf("change:close %s (%s), want SUCCESS: the change is closed in the ITSM", st.State, st.Error)
	}
	logs, err := f.st.Logs(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if text := fmt.Sprint(logs); !strings.Contains(text, "CHG0001 was already closed in the ITSM") || strings.Contains(text, "close it there") {
		t.Errorf("change:close log %s, want it to say the change was already closed, not to close it by hand", text)
	}
}

// lostOpenITSM is the reference ITSM that opens the change asked for, then
// drops the connection before answering, while lose is set: every answer
// to POST /changes is lost.
type lostOpenITSM struct {
	ref   *reference.Server
	lose  atomic.Bool
	opens atomic.Int32
}

func (l *lostOpenITSM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/changes" {
		l.opens.Add(1)
		if l.lose.Load() {
			l.ref.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
	}
	l.ref.ServeHTTP(w, r)
}

// QA: an ITSM that opened the change but whose answer was lost on every
// attempt (a proxy timing out, a connection reset) left the change open in
// the ITSM for good: the deploy ended ERROR at change:open without a change
// id, so nothing closed it. The deploy's error says a change may exist and
// that manent closes it; the change-close workflow asks the ITSM again with
// the same Idempotency-Key, which answers the same change, and closes it
// ERROR — no second change is opened.
func TestChangeOpenedButEveryAnswerLost(t *testing.T) {
	t.Parallel()
	l := &lostOpenITSM{ref: reference.New()}
	l.lose.Store(true)
	f := changeFixture(t, l, func(c *node.Config) { c.Workers.RetryBase = 10 * time.Millisecond })
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	d := f.waitState(id, manent.StateError)
	if !strings.Contains(d.Error, "change:open") || !strings.Contains(d.Error, "may have opened") {
		t.Errorf("error %q, want change:open's failure and that the ITSM may have opened a change", d.Error)
	}
	if c, ok := l.ref.Get("CHG0001"); !ok || c.State != itsm.Pending {
		t.Fatalf("CHG0001 %+v %v: the ITSM was to have opened it", c, ok)
	}
	l.lose.Store(false)
	var c itsm.Change
	enginetest.Eventually(t, 30*time.Second, func() bool { c, _ = l.ref.Get("CHG0001"); return c.State == itsm.Closed },
		"the change opened for the failed deploy to be closed; it is %+v", &c)
	if c.Outcome != string(manent.StateError) {
		t.Errorf("change closed with %q, want ERROR", c.Outcome)
	}
	if c2, ok := l.ref.Get("CHG0002"); ok {
		t.Errorf("a second change was opened: %+v", c2)
	}
	var text string
	enginetest.Eventually(t, 10*time.Second, func() bool {
		logs, err := f.st.Logs(context.Background(), id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		text = fmt.Sprint(logs)
		return strings.Contains(text, "CHG0001") && strings.Contains(text, "Idempotency-Key")
	}, "change:close log to say how CHG0001 was found")
}

// A change:open the ITSM refused (a 4xx) opened nothing: the change-close
// workflow does not ask the ITSM again (it would open a change to close it).
func TestChangeOpenRefusedIsNotLookedUp(t *testing.T) {
	t.Parallel()
	var opens atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/changes" {
			opens.Add(1)
		}
		http.Error(w, `{"error": "forbidden"}`, http.StatusForbidden)
	})
	f := changeFixture(t, h)
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	d := f.waitState(id, manent.StateError)
	if strings.Contains(d.Error, "may have opened") {
		t.Errorf("error %q: a refused open opened nothing", d.Error)
	}
	enginetest.Eventually(t, 30*time.Second, func() bool {
		st, err := f.eng.WorkflowStatus(id + ".finish")
		return err == nil && st == dbos.WorkflowStatusSuccess
	}, "the conclusion to be announced")
	if _, err := f.eng.WorkflowStatus(id + ".change-close"); err == nil {
		t.Errorf("a change-close workflow runs for a deploy whose change the ITSM refused to open")
	}
	if n := opens.Load(); n != 1 {
		t.Errorf("%d opens, want 1 (a 403 is not retried, nor looked up)", n)
	}
}

// QA: a deploy cancelled while change:open waited for the ITSM, whose
// open then failed with every answer lost, left the change the ITSM had
// opened for good: the conclusion had been announced before change:open
// was marked "may have opened", and ending the gate changed nothing. The
// gate starts the change-close workflow itself, which finds the change by
// its Idempotency-Key and closes it CANCELLED.
func TestChangeOfACancelledDeployWhoseOpenWasLostIsClosed(t *testing.T) {
	t.Parallel()
	l := &lostOpenITSM{ref: reference.New()}
	l.lose.Store(true)
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	var first atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/changes" && first.CompareAndSwap(false, true) {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		l.ServeHTTP(w, r)
	})
	f := changeFixture(t, h, func(c *node.Config) { c.Workers.RetryBase = 10 * time.Millisecond })
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Fatal("change:open never reached the ITSM")
	}
	if _, err := f.eng.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	f.waitState(id, manent.StateCancelled)
	enginetest.Eventually(t, 30*time.Second, func() bool {
		st, err := f.eng.WorkflowStatus(id + ".finish")
		return err == nil && st == dbos.WorkflowStatusSuccess
	}, "the conclusion to be announced (with no ticket known yet)")
	close(release)
	enginetest.Eventually(t, 30*time.Second, func() bool {
		st, err := f.eng.WorkflowStatus(id + ".gate")
		return err == nil && st == dbos.WorkflowStatusSuccess
	}, "the gate to end after change:open failed")
	if c, ok := l.ref.Get("CHG0001"); !ok || c.State != itsm.Pending {
		t.Fatalf("CHG0001 %+v %v: the ITSM was to have opened it", c, ok)
	}
	l.lose.Store(false)
	var c itsm.Change
	enginetest.Eventually(t, 30*time.Second, func() bool { c, _ = l.ref.Get("CHG0001"); return c.State == itsm.Closed },
		"the change opened for the cancelled deploy to be closed; it is %+v", &c)
	if c.Outcome != string(manent.StateCancelled) {
		t.Errorf("change closed with %q, want CANCELLED", c.Outcome)
	}
	if c2, ok := l.ref.Get("CHG0002"); ok {
		t.Errorf("a second change was opened: %+v", c2)
	}
}

// QA: change:close read its deploy's change:open with the database away
// as "no change was opened": the step ended SUCCESS with no change and
// the ticket stayed open in the ITSM for good. The read waits for the
// database; the change is closed with the outcome.
func TestChangeCloseWaitsForTheDatabase(t *testing.T) {
	ref := reference.New()
	f := changeFixture(t, ref)
	url, _ := f.artifact("v1", "x")
	hit := faultN(t, 3, "change:close")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	ref.Set("CHG0001", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
	var st manent.Step
	enginetest.Eventually(t, 60*time.Second, func() bool {
		st, _ = f.st.Step(context.Background(), id, manent.StepChangeClose)
		return st.State == manent.StepSuccess || st.State == manent.StepError
	}, "change:close to end")
	if c, _ := ref.Get("CHG0001"); c.State != itsm.Closed || c.Outcome != "SUCCESS" {
		t.Errorf("change after the outage: %+v, want closed with SUCCESS", c)
	}
	if st.State != manent.StepSuccess || !strings.Contains(string(st.Output), "CHG0001") {
		t.Errorf("change:close %s, output %s: want SUCCESS closing CHG0001", st.State, st.Output)
	}
	if len(hit()) != 1 {
		t.Errorf("change:close's read did not meet the whole outage (3 failed reads)")
	}
}
