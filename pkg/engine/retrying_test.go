package engine_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// A step between two attempts is RUNNING with its last attempt's error
// and when the next one is due — not ERROR, its result — and a cancel that
// comes then stops the deploy without running the step again: its last
// attempt ended, nothing of it is left half done (a RUNNING step a worker
// stopped in runs again to its end; this one must not). The deploy's end
// shows the step ERROR with its last error.
func TestCancelBetweenAttemptsRunsTheStepNoMore(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2, func(c *node.Config) {
			c.Workers.RetryBase, c.Workers.RetryMax = 3*time.Second, 3*time.Second
		})
		url, _ := f.artifact("app", "x")
		counter := filepath.Join(f.dir, "count")
		fails := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); echo $((n+1)) > %[1]s; echo broken >&2; exit 1`, counter)
		id := f.submit(descriptorYAML("shop", "qa", "2", url, "", fmt.Sprintf(`steps:
  - name: flaky
    before: deploy
    plugin: script
    max_retries: 2
    with: {command: ["sh", "-c", %q]}
`, fails)))
		var st manent.Step
		enginetest.Eventually(t, 30*time.Second, func() bool {
			for _, s := range f.state(id).Steps {
				if s.Name == "flaky" {
					st = s
				}
			}
			return st.Retrying()
		}, "step flaky to wait between attempts; it reads %+v", &st)
		if st.Error == "" || st.MaxAttempts != 3 || st.FinishedAt != nil || !st.NextAttemptAt.After(time.Now()) {
			t.Fatalf("a step between attempts reads %+v, want its error, max_attempts 3, no finished_at, the next attempt ahead", st)
		}
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled {
			t.Fatalf("state = %s (%s), want CANCELLED", rec.State, rec.Error)
		}
		if b, _ := os.ReadFile(counter); strings.TrimSpace(string(b)) != "1" {
			t.Errorf("the step ran %s times, want 1: a cancel between attempts runs it no more", strings.TrimSpace(string(b)))
		}
		if s := step(t, rec, "flaky"); s.State != manent.StepError || s.Retrying() || s.Error == "" || s.FinishedAt == nil {
			t.Errorf("after the cancel the step reads %+v, want ERROR with its last error, ended", s)
		}
	})
}

// change:open retries an ITSM that fails too: between its attempts it is
// RUNNING with the failure and the next attempt's time, never ERROR until
// its last attempt failed.
func TestChangeOpenBetweenAttemptsIsNotShownFailed(t *testing.T) {
	fl := newFlakyITSM()
	fl.set("open", 2)
	f := changeFixture(t, fl, func(c *node.Config) { c.Workers.RetryBase = 500 * time.Millisecond })
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	retrying := 0
	var d *manent.Deployment
	enginetest.Eventually(t, 30*time.Second, func() bool {
		d = f.state(id)
		for _, s := range d.Steps {
			if s.Name != engine.StepChangeOpen {
				continue
			}
			if s.State == manent.StepError {
				t.Fatalf("change:open reads ERROR after attempt %d while it is retried: %s", s.Attempts, s.Error)
			}
			if s.Retrying() {
				retrying++
				if !strings.Contains(s.Error, "itsm database unavailable") || s.MaxAttempts != 6 {
					t.Fatalf("change:open between attempts reads %+v, want the ITSM's error and max_attempts 6", s)
				}
			}
		}
		return strings.Contains(d.Reason, "CHG0001 pending") || d.State.Final()
	}, "the deploy to wait for change CHG0001: %s", stateOf{&d})
	if retrying == 0 {
		t.Errorf("change:open was never read between two attempts")
	}
	if s := step(t, &store.Record{Deployment: *f.state(id)}, engine.StepChangeOpen); s.State != manent.StepSuccess || s.Attempts != 3 {
		t.Errorf("change:open reads %s after %d attempts, want SUCCESS after 3", s.State, s.Attempts)
	}
}

// change:close, tried again for itsm.give_up_after after its deploy ended,
// is RUNNING with the ITSM's failure and the next attempt's time between
// its attempts — it read ERROR, for hours on a long ITSM outage, while it
// would be tried again.
func TestChangeCloseBetweenAttemptsIsNotShownFailed(t *testing.T) {
	fl := newFlakyITSM()
	f := changeFixture(t, fl, func(c *node.Config) { c.ITSM.Poll = 400 * time.Millisecond })
	url, _ := f.artifact("v1", "x")
	id := f.submit(descriptorYAML("erp", "prod", "1", url, "", ""), waits(plan.Waits{Change: true}))
	enginetest.Eventually(t, 30*time.Second, func() bool { return strings.Contains(f.state(id).Reason, "CHG0001 pending") }, "the deploy to wait for change CHG0001")
	fl.set("close", 2)
	fl.ref.Set("CHG0001", itsm.Approved)
	f.waitState(id, manent.StateSuccess)
	retrying := 0
	var last manent.Step
	enginetest.Eventually(t, 30*time.Second, func() bool {
		for _, s := range f.state(id).Steps {
			if s.Name != engine.StepChangeClose {
				continue
			}
			last = s
			// The attempt records its end with the decision: a poll never
			// catches ERROR before another attempt.
			if s.State == manent.StepError {
				t.Fatalf("change:close reads ERROR while another attempt follows: %+v", s)
			}
			if s.Retrying() {
				retrying++
				if !strings.Contains(s.Error, "itsm database unavailable") || s.FinishedAt != nil {
					t.Fatalf("change:close between attempts reads %+v, want the ITSM's error and no end", s)
				}
			}
		}
		return last.State == manent.StepSuccess
	}, "change:close to succeed; it reads %+v", &last)
	if retrying == 0 {
		t.Errorf("change:close was never read between two attempts")
	}
	if last.Attempts != 3 || last.Retrying() {
		t.Errorf("change:close reads %+v, want SUCCESS after 3 attempts", last)
	}
}
