package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

func openStore(t *testing.T, url string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

func insertDeploy(t *testing.T, st *store.Store, id string, steps ...string) {
	t.Helper()
	ctx := context.Background()
	err := st.Tx(ctx, func(tx *sql.Tx) error {
		rec := &store.Record{Deployment: manent.Deployment{ID: id, Application: "app", Environment: "env", Version: "1",
			State: manent.StateEnqueued, Requester: "token:t", CreatedAt: time.Now()}, Input: []byte(`{}`)}
		if err := st.InsertDeployment(ctx, tx, rec); err != nil {
			return err
		}
		return st.PlanSteps(ctx, tx, id, steps)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Each resumption of a step counts, once per execution however often it
// is sent; an unknown step counts none.
func TestStepResumed(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1", "deploy", "smoke")
		for want := 1; want <= 3; want++ {
			by := fmt.Sprintf("w1#%d", want+1)
			if n, err := st.StepResumed(ctx, "dpl_1", "deploy", by); err != nil || n != want {
				t.Fatalf("resumption %d: got %d %v", want, n, err)
			}
			// Sent again by the same execution (its commit's answer lost
			// with the connection): counted once.
			if n, err := st.StepResumed(ctx, "dpl_1", "deploy", by); err != nil || n != want {
				t.Fatalf("resumption %d sent again: got %d %v, want %d", want, n, err, want)
			}
		}
		if n, err := st.StepResumed(ctx, "dpl_1", "smoke", "w1#2"); err != nil || n != 1 {
			t.Fatalf("another step: got %d %v, want 1", n, err)
		}
		if n, err := st.StepResumed(ctx, "dpl_1", "rollback:deploy", "w1#2"); err != nil || n != 0 {
			t.Fatalf("a step not in the table: got %d %v, want 0", n, err)
		}
	})
}

// A plan is written in one statement and a page of the list reads its
// deploys' steps in one query: each deploy gets its own, in plan order;
// one without steps gets an empty list; an unknown id an empty list.
func TestPlanStepsAndStepsOf(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_a", "config", "deploy", "smoke")
		insertDeploy(t, st, "dpl_b", "deploy", "deploy") // a repeated name is written once
		insertDeploy(t, st, "dpl_c")
		got, err := st.StepsOf(ctx, []string{"dpl_a", "dpl_b", "dpl_c", "dpl_none"})
		if err != nil {
			t.Fatal(err)
		}
		names := func(id string) []string {
			var out []string
			for _, s := range got[id] {
				out = append(out, s.Name+":"+string(s.State))
			}
			return out
		}
		for id, want := range map[string][]string{
			"dpl_a": {"config:PENDING", "deploy:PENDING", "smoke:PENDING"}, "dpl_b": {"deploy:PENDING"},
			"dpl_c": nil, "dpl_none": nil,
		} {
			if g := names(id); len(g) != len(want) || (len(want) > 0 && strings.Join(g, ",") != strings.Join(want, ",")) {
				t.Errorf("%s: steps %v, want %v", id, g, want)
			}
			if got[id] == nil {
				t.Errorf("%s: nil steps, want an empty list", id)
			}
		}
		one, err := st.Steps(ctx, "dpl_a")
		if err != nil || len(one) != 3 || one[1].Name != "deploy" {
			t.Fatalf("Steps(dpl_a) = %v, %v", one, err)
		}
	})
}

// The transaction that records a step's end reads the deploy's cancel flag
// for the engine, and its events keep one gapless sequence with those
// appended one at a time (a log line, the cancel request).
func TestStepFinishedReadsCancel(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1", "deploy", "smoke")
		var cancel bool
		end := store.StepEnd{State: manent.StepSuccess, StartedAt: time.Now(), CancelRequested: &cancel,
			Logs: []store.LogEntry{{Time: time.Now(), Text: "one"}, {Time: time.Now(), Text: "two"}}}
		if _, err := st.StepFinished(ctx, "dpl_1", "deploy", end); err != nil || cancel {
			t.Fatalf("before cancel: cancel %v, err %v; want false, nil", cancel, err)
		}
		if _, _, err := st.RequestCancel(ctx, "dpl_1", store.CancelRequest{Reason: "cancelled"}); err != nil {
			t.Fatal(err)
		}
		end.Logs = nil
		if _, err := st.StepFinished(ctx, "dpl_1", "smoke", end); err != nil || !cancel {
			t.Fatalf("after cancel: cancel %v, err %v; want true, nil", cancel, err)
		}
		evs, err := st.Events(ctx, "dpl_1", 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		// state, log one, log two, step deploy, log "cancel requested", step smoke.
		want := []string{store.EventState, store.EventLog, store.EventLog, store.EventStep, store.EventLog, store.EventStep}
		if len(evs) != len(want) {
			t.Fatalf("%d events, want %d: %+v", len(evs), len(want), evs)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) || e.Type != want[i] {
				t.Errorf("event %d: seq %d type %s, want seq %d type %s", i, e.Seq, e.Type, i+1, want[i])
			}
		}
		if _, err := st.StepFinished(ctx, "dpl_none", "deploy", end); err == nil {
			t.Error("a step of a deploy that does not exist was recorded")
		}
	})
}

// More log lines than one INSERT takes keep the sequence gapless, and the
// SSE heads report the last event's seq.
func TestManyEventsOneSequence(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1", "deploy")
		var lines []store.LogEntry
		for i := 0; i < 120; i++ {
			lines = append(lines, store.LogEntry{Time: time.Now(), Text: "line"})
		}
		if err := st.AppendLog(ctx, "dpl_1", "deploy", lines); err != nil {
			t.Fatal(err)
		}
		if _, err := st.StepFinished(ctx, "dpl_1", "deploy", store.StepEnd{State: manent.StepSuccess, StartedAt: time.Now(), Logs: lines[:3]}); err != nil {
			t.Fatal(err)
		}
		evs, err := st.Events(ctx, "dpl_1", 0, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != 1+120+3+1 {
			t.Fatalf("%d events, want %d", len(evs), 1+120+3+1)
		}
		for i, e := range evs {
			if e.Seq != int64(i+1) {
				t.Fatalf("event %d has seq %d", i, e.Seq)
			}
		}
		heads, err := st.Heads(ctx, []string{"dpl_1"}, false, time.Time{})
		if err != nil || len(heads) != 1 || heads[0].LastSeq != int64(len(evs)) {
			t.Fatalf("heads %+v %v, want last seq %d", heads, err, len(evs))
		}
	})
}

// UnfinishedBrief lists what Unfinished does, without the saved inputs
// (most of a row): the same deploys, in the same order, each input empty.
func TestUnfinishedBriefLeavesOutTheInput(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1")
		insertDeploy(t, st, "dpl_2")
		full, err := st.Unfinished(ctx)
		if err != nil {
			t.Fatal(err)
		}
		brief, err := st.UnfinishedBrief(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(full) != 2 || len(brief) != 2 || string(full[0].Input) != "{}" {
			t.Fatalf("unfinished %d, brief %d (input %q), want 2 each with {} in full", len(full), len(brief), full[0].Input)
		}
		for i := range brief {
			if brief[i].ID != full[i].ID || brief[i].State != full[i].State || len(brief[i].Input) != 0 || brief[i].Decision != nil {
				t.Errorf("brief %d: %s %s input %q decision %v; want %s %s without input or decision",
					i, brief[i].ID, brief[i].State, brief[i].Input, brief[i].Decision, full[i].ID, full[i].State)
			}
		}
	})
}

// A step between two attempts reads RUNNING with its error, when the next
// attempt is due and its most attempts; the next attempt's start and any
// end clear them — max_attempts too, which a finished step does not show
// (docs/descriptor.md) — and so does a deploy ending while the step waits,
// which shows it ERROR with its last error. A row an earlier release left
// with next_attempt_at on a step it ended (its writes do not clear it)
// reads without it.
func TestStepBetweenAttempts(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		st := openStore(t, db)
		ctx := context.Background()
		insertDeploy(t, st, "dpl_1", "deploy", "smoke")
		now := time.Now()
		next := now.Add(4 * time.Second)
		retry := store.StepEnd{State: manent.StepRunning, Error: "exit 1", StartedAt: now, NextAttemptAt: &next, MaxAttempts: 4}
		s, err := st.StepFinished(ctx, "dpl_1", "deploy", retry)
		if err != nil {
			t.Fatal(err)
		}
		if !s.Retrying() || s.Error != "exit 1" || s.MaxAttempts != 4 || s.FinishedAt != nil || s.Attempts != 1 ||
			s.NextAttemptAt.Unix() != next.Unix() {
			t.Fatalf("between attempts: %+v", s)
		}
		if s, err = st.StepStarted(ctx, "dpl_1", "deploy", now); err != nil || s.Retrying() || s.Error != "" || s.Attempts != 2 {
			t.Fatalf("the next attempt started: %+v %v", s, err)
		}
		if s, err = st.StepFinished(ctx, "dpl_1", "deploy", store.StepEnd{State: manent.StepSuccess, StartedAt: now, Counted: true}); err != nil ||
			s.NextAttemptAt != nil || s.MaxAttempts != 0 || s.State != manent.StepSuccess {
			t.Fatalf("the step succeeded: %+v %v", s, err)
		}
		// A release before next_attempt_at ended the step without clearing it.
		if err := st.Tx(ctx, func(tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE manent_steps SET next_attempt_at = '2026-12-06T10:00:00Z', max_attempts = 4 WHERE name = 'deploy'`)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if s, err = st.Step(ctx, "dpl_1", "deploy"); err != nil || s.NextAttemptAt != nil || s.MaxAttempts != 0 {
			t.Fatalf("a step an earlier release ended: %+v %v", s, err)
		}
		// Ended while waiting between attempts.
		if _, err := st.StepFinished(ctx, "dpl_1", "smoke", retry); err != nil {
			t.Fatal(err)
		}
		if err := st.Finish(ctx, "dpl_1", store.Outcome{State: manent.StateCancelled, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		s, err = st.Step(ctx, "dpl_1", "smoke")
		if err != nil || s.State != manent.StepError || s.Error != "exit 1" || s.NextAttemptAt != nil || s.FinishedAt == nil {
			t.Fatalf("after the deploy ended: %+v %v", s, err)
		}
	})
}
