package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/retry"
	"github.com/manent-io/manent/pkg/store"
)

// Every deploy ends through conclude, whatever ends it — its own workflow
// (SUCCESS, ERROR, CANCELLED, MAX_RECOVERY_ATTEMPTS_EXCEEDED when it gives
// itself up), its gate (REJECTED, EXPIRED, DEPENDENCY_FAILED), a cancel
// before it ran, or the sweeper (a workflow DBOS stopped running). conclude
// records the final state (with the inventory, the `done` event and the
// `deployment.finish` audit entry) and enqueues the deploy's announce
// workflow in the same transaction; the announce workflow sends the
// `finished` callback and chat message, has the change ticket closed and
// wakes the deploys waiting on this one. A crash at any instant loses none of it
// and repeats none of it.

// AnnounceWorkflow is the DBOS name of the workflow that announces a
// deploy's ending.
const AnnounceWorkflow = "manent.announce"

func announceID(id string) string { return id + ".finish" }

// conclusion says what else a conclude does.
type conclusion struct {
	// quiet: the deploy has nothing to announce but the wake of its
	// dependents (no callback, no chat, no change ticket). No announce
	// workflow is enqueued; the dependents are woken and the work
	// directory removed after the commit — a wake lost to a crash costs
	// a dependent at most gatePoll, and the cleanup step removed the work
	// directory already.
	quiet bool
	// also runs in the transaction after the deploy's writes, whether or
	// not the deploy changed (the finish step records its DBOS checkpoint
	// there), before the audit entry.
	also func(tx *sql.Tx) error
}

// conclude records a deploy's ending and enqueues its announcements, in one
// transaction. Concluding a deploy that is already final changes nothing.
func (e *Engine) conclude(ctx context.Context, id string, o store.Outcome, how ...conclusion) error {
	var c conclusion
	if len(how) > 0 {
		c = how[0]
	}
	if o.At.IsZero() {
		o.At = time.Now()
	}
	woke := false
	err := e.st.Tx(ctx, func(tx *sql.Tx) error {
		woke = false
		// The announcement and also run before the audit entry, which
		// FinishTx writes last (the audit head's lock, PostgreSQL).
		_, err := e.st.FinishTx(ctx, tx, id, o, func(changed bool) error {
			if changed && !c.quiet {
				if _, err := dbos.Enqueue[Result](e.dbos, GateQueue, AnnounceWorkflow, id,
					dbos.WithEnqueueWorkflowID(announceID(id)),
					dbos.WithEnqueueApplicationVersion(WorkflowVersion),
					dbos.WithEnqueueTransaction(tx)); err != nil {
					return err
				}
			}
			woke = changed && c.quiet
			if c.also != nil {
				return c.also(tx)
			}
			return nil
		})
		return err
	})
	if err != nil {
		return err
	}
	if woke {
		e.wakeDependents(ctx, id)
		if err := e.removeWorkDir(id); err != nil {
			e.log.Warn("remove the work directory", "deploy", id, "error", err)
		}
	}
	return nil
}

// announceWorkflow announces a final deploy: the `finished` callback and
// chat message, the change-close workflow when a change ticket was opened,
// the deploys waiting on it woken, its work directory removed.
func (e *Engine) announceWorkflow(ctx dbos.Context, id string) (Result, error) {
	rec, err := dbos.RunAsStep(ctx, func(sctx context.Context) (Result, error) {
		r, err := e.st.Deployment(sctx, id)
		if err != nil {
			return Result{}, err
		}
		return Result{State: r.State, Error: r.Error, Rollback: r.Rollback, SHA256: r.ArtifactSHA256}, nil
	}, dbos.WithStepName("announce:outcome"), dbos.WithStepMaxRetries(10), dbos.WithStepBaseInterval(e.cfg.RetryBase))
	if err != nil {
		return Result{}, err
	}
	in, err := e.input(ctx, id)
	if err != nil {
		return Result{}, err
	}
	r := &run{e: e, in: in, outputs: map[string]json.RawMessage{}, waves: map[string]*plan.Wave{}}
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (int, error) {
		return r.notify(sctx, notify.EventFinished, "finished", nil, rec.State, rec.Error, rec.Rollback)
	}, dbos.WithStepName("announce:finished"), dbos.WithStepMaxRetries(10), dbos.WithStepBaseInterval(e.cfg.RetryBase)); err != nil {
		return Result{}, err
	}
	opened, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		return e.changeToClose(sctx, id)
	}, dbos.WithStepName("announce:change"), dbos.WithStepMaxRetries(10))
	if err != nil {
		return Result{}, err
	}
	if opened {
		// An announcement that closed the change itself under the previous
		// release replays as it ran (DBOS patching).
		patched, err := dbos.Patch(ctx, "change-close-workflow")
		if err != nil {
			return Result{}, err
		}
		if patched {
			if err := e.enqueueChangeClose(ctx, id); err != nil {
				return Result{}, err
			}
		} else if _, err := r.step(ctx, manent.PlanStep{Name: StepChangeClose, MaxRetries: 5}); err != nil && ctx.Err() != nil {
			return Result{}, err
		}
	}
	if _, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		e.wakeDependents(sctx, id)
		return true, e.removeWorkDir(id)
	}, dbos.WithStepName("announce:wake"), dbos.WithStepMaxRetries(10), dbos.WithStepBaseInterval(e.cfg.RetryBase)); err != nil {
		return Result{}, err
	}
	return rec, nil
}

// ChangeCloseWorkflow is the DBOS name of the workflow that closes a
// deploy's change ticket.
const ChangeCloseWorkflow = "manent.change.close"

func changeCloseID(id string) string { return id + ".change-close" }

// enqueueChangeClose starts the change-close workflow of deploy id from a
// workflow (DBOS records the enqueue as its step). The announcement and the
// gate both may: the second enqueue of the workflow id is a no-op.
func (e *Engine) enqueueChangeClose(ctx dbos.Context, id string) error {
	if _, err := dbos.Enqueue[Result](ctx, GateQueue, ChangeCloseWorkflow, id,
		dbos.WithEnqueueWorkflowID(changeCloseID(id)),
		dbos.WithEnqueueApplicationVersion(WorkflowVersion)); err != nil {
		return fmt.Errorf("enqueue the closing of the change of %s: %w", id, err)
	}
	return nil
}

// changeCloseMax is the longest wait between two attempts to close a
// change.
const changeCloseMax = time.Hour

// changeCloseWorkflow closes deploy id's change ticket with the deploy's
// outcome, like the callbacks' outbox delivers: each attempt is the
// change:close step (its end and error shown by `manent steps`), and a
// failed one is tried again after a durable sleep — the poll interval,
// doubling up to changeCloseMax — until one succeeds, the ITSM refuses it
// for good (a 4xx), or ChangeGiveUp has passed since the workflow began;
// every decision is a line of the step's log. It runs on the gate queue,
// so it holds neither a deploy slot nor the environment; a crash resumes
// it where it stopped.
func (e *Engine) changeCloseWorkflow(ctx dbos.Context, id string) (Result, error) {
	in, err := e.input(ctx, id)
	if err != nil {
		return Result{}, err
	}
	until, err := dbos.RunAsStep(ctx, func(context.Context) (time.Time, error) {
		return time.Now().Add(e.changeGiveUp()).UTC(), nil
	}, dbos.WithStepName("change:close-until"))
	if err != nil {
		return Result{}, err
	}
	r := &run{e: e, in: in, outputs: map[string]json.RawMessage{}, waves: map[string]*plan.Wave{}}
	backoff := retry.Policy{Initial: e.changePoll(), Max: changeCloseMax}
	for n := 1; ; n++ {
		// The attempt records its own end with the decision: RUNNING
		// with the next attempt's time while another follows, ERROR with
		// why none does — never ERROR for an instant before a retry.
		r.again = func(err error, now time.Time) (time.Time, string, bool) {
			d := backoff.Delay(n)
			switch {
			case plugin.IsPermanent(err):
				return time.Time{}, fmt.Sprintf("attempt %d failed and cannot succeed if tried again (the ITSM refused it): the change stays open in the ITSM; close it there", n), false
			case now.Add(d).After(until):
				return time.Time{}, changeCloseGiveUp(n, until), false
			}
			return now.Add(d), fmt.Sprintf("attempt %d failed; trying again in %s (until %s)", n, d, until.Format(time.RFC3339)), true
		}
		_, err := r.step(ctx, manent.PlanStep{Name: StepChangeClose})
		if err == nil {
			return Result{State: manent.StateSuccess}, nil
		}
		if ctx.Err() != nil {
			return Result{}, err
		}
		// How long until the next attempt, as the attempt recorded it (a
		// replay takes this step's recorded answer); 0: none follows.
		failure := err.Error()
		next, err := dbos.RunAsStep(ctx, func(sctx context.Context) (time.Duration, error) {
			e.log.Warn("closing a change ticket failed", "deploy", id, "attempt", n, "error", failure)
			st, err := e.st.Step(sctx, id, StepChangeClose)
			if err != nil {
				return 0, err
			}
			now := time.Now()
			switch {
			case !st.Retrying():
				if st.State == manent.StepRunning {
					// The attempt's end was not recorded (its record
					// failed): end the step here.
					_, err := e.st.StepFinished(sctx, id, StepChangeClose, store.StepEnd{State: manent.StepError, Error: storableError(errors.New(failure)).Error(),
						Logs: []store.LogEntry{{Time: now, Text: fmt.Sprintf("attempt %d failed and its end could not be recorded; no more attempts: the change stays open in the ITSM; close it there", n)}}})
					return 0, err
				}
				return 0, nil
			case now.After(until):
				// Resumed past itsm.give_up_after (a worker was down).
				_, err := e.st.StepFinished(sctx, id, StepChangeClose, store.StepEnd{State: manent.StepError, Error: st.Error,
					Logs: []store.LogEntry{{Time: now, Text: changeCloseGiveUp(n, until)}}})
				return 0, err
			}
			return max(st.NextAttemptAt.Sub(now), time.Millisecond), nil
		}, dbos.WithStepName(fmt.Sprintf("change:close-retry-%d", n)), dbos.WithStepMaxRetries(5), dbos.WithStepBaseInterval(e.cfg.RetryBase))
		if err != nil {
			return Result{}, err
		}
		if next <= 0 {
			return Result{State: manent.StateError, Error: failure}, nil
		}
		if _, err := dbos.Sleep(ctx, next); err != nil {
			return Result{}, err
		}
	}
}

// changeCloseGiveUp is the log line of change:close's last attempt when
// itsm.give_up_after has passed.
func changeCloseGiveUp(n int, until time.Time) string {
	return fmt.Sprintf("attempt %d failed; no more attempts: they have failed for itsm.give_up_after (until %s). The change stays open in the ITSM; close it there", n, until.Format(time.RFC3339))
}

// input reads a deploy's saved workflow input, as a step.
func (e *Engine) input(ctx dbos.Context, id string) (plan.Input, error) {
	raw, err := dbos.RunAsStep(ctx, func(sctx context.Context) (json.RawMessage, error) {
		r, err := e.st.Deployment(sctx, id)
		if err != nil {
			return nil, err
		}
		return r.Input, nil
	}, dbos.WithStepName("announce:input"), dbos.WithStepMaxRetries(10), dbos.WithStepBaseInterval(e.cfg.RetryBase))
	if err != nil {
		return plan.Input{}, err
	}
	var in plan.Input
	if err := json.Unmarshal(raw, &in); err != nil {
		return plan.Input{}, fmt.Errorf("input of %s: %w", id, err)
	}
	return in, nil
}

// sweepEvery is how often a worker looks for deploys DBOS stopped running
// without their workflow concluding them.
const sweepEvery = 10 * time.Second

// sweep concludes the deploys whose workflow DBOS stopped running while
// they are not final: a deploy workflow dead-lettered after too many
// recoveries (MAX_RECOVERY_ATTEMPTS_EXCEEDED), cancelled in DBOS or ended
// in error, and a waiting deploy whose gate did. A deploy normally gives
// itself up before DBOS does (see run.giveUp) and compensates while it
// still holds its environment; the sweeper is the backstop and only
// records and announces the ending.
func (e *Engine) sweep(ctx context.Context) error {
	recs, err := e.st.Unfinished(ctx)
	if err != nil {
		return fmt.Errorf("sweep: %w", err)
	}
	for _, r := range recs {
		wfID := r.ID
		if r.State.Waiting() && r.State != manent.StateEnqueued {
			wfID = gateID(r.ID)
		}
		st, err := e.workflowStatus(wfID)
		if err != nil {
			continue // not in DBOS (yet): Reconcile's business
		}
		var o store.Outcome
		switch st {
		case dbos.WorkflowStatusMaxRecoveryAttemptsExceeded:
			o = store.Outcome{State: manent.StateMaxRecoveryAttemptsExceeded,
				Error: "the worker crashed too many times while the deploy ran and DBOS stopped resuming it; check the worker logs"}
		case dbos.WorkflowStatusCancelled:
			why, err := e.cancelReason(ctx, r.ID)
			if err != nil {
				return fmt.Errorf("sweep %s: %w", r.ID, err) // the next sweep concludes it
			}
			o = store.Outcome{State: manent.StateCancelled, Error: why}
		case dbos.WorkflowStatusError:
			o = store.Outcome{State: manent.StateError, Error: "the deploy's workflow failed: " + e.workflowError(wfID)}
		default:
			continue
		}
		e.log.Warn("concluding a deploy its workflow left unfinished", "deploy", r.ID, "dbos_status", st, "state", o.State)
		if err := e.conclude(ctx, r.ID, o); err != nil {
			return fmt.Errorf("sweep %s: %w", r.ID, err)
		}
	}
	return nil
}

func (e *Engine) workflowError(id string) string {
	h, err := dbos.RetrieveWorkflow[Result](e.dbos, id)
	if err != nil {
		return err.Error()
	}
	s, err := h.GetStatus()
	if err != nil || s.Error == nil {
		return "unknown error"
	}
	var de *dbos.Error
	if errors.As(s.Error, &de) && de.Code == dbos.ErrorCodeMaxStepRetriesExceeded {
		return fmt.Sprintf("step %s: %s", de.StepName, stepFailure(s.Error))
	}
	return stepFailure(s.Error)
}

// stepFailure is the text of a workflow's error for a person. A step that
// exhausted its DBOS retries fails with an error that joins every
// attempt's error (MaxStepRetriesExceeded: the same text six times); that
// one reads as the last attempt's error, once, and the number of attempts.
// Any other error reads as it is.
func stepFailure(err error) string {
	var de *dbos.Error
	if !errors.As(err, &de) || de.Code != dbos.ErrorCodeMaxStepRetriesExceeded {
		return err.Error()
	}
	attempts := de.MaxRetries + 1
	// Live, the error wraps the errors.Join of the attempts' errors,
	// nested one level per attempt: the last one is the last attempt's.
	if j, ok := errors.Unwrap(de).(interface{ Unwrap() []error }); ok {
		if errs := j.Unwrap(); len(errs) > 0 {
			return fmt.Sprintf("%s (after %d attempts)", errs[len(errs)-1], attempts)
		}
	}
	// Read back from DBOS, only the message is left: the attempts' errors
	// joined by newlines after a fixed prefix. Identical ones are kept once.
	joined, ok := strings.CutPrefix(de.Message, fmt.Sprintf("Step %s has exceeded its maximum of %d retries: ", de.StepName, de.MaxRetries))
	if !ok || attempts < 1 || (len(joined)+1)%attempts != 0 {
		return err.Error()
	}
	one := joined[:(len(joined)+1)/attempts-1]
	if strings.Repeat(one+"\n", attempts-1)+one != joined {
		return err.Error()
	}
	return fmt.Sprintf("%s (after %d attempts)", one, attempts)
}

// runSweeper sweeps every sweepEvery until ctx ends.
func (e *Engine) runSweeper(ctx context.Context) {
	t := time.NewTicker(sweepEvery)
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := e.sweep(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("sweep", "error", err)
			}
			if time.Since(pruned) > time.Hour {
				pruned = time.Now()
				if err := e.st.PruneIdempotency(ctx); err != nil && ctx.Err() == nil {
					e.log.Warn("prune idempotency keys", "error", err)
				}
				e.sweepWorkDirs(ctx)
			}
		}
	}
}

// sweepWorkDirs removes the work directories (downloaded artifacts) this
// worker holds for deploys that ended or are gone: those of deploys taken
// over by another worker when this one died, whose cleanup step ran
// there. A deploy not final keeps its directory (it may resume here).
func (e *Engine) sweepWorkDirs(ctx context.Context) {
	entries, err := os.ReadDir(filepath.Join(e.cfg.DataDir, "work"))
	if err != nil {
		return // none yet
	}
	for _, de := range entries {
		if ctx.Err() != nil {
			return
		}
		id := de.Name()
		if !de.IsDir() || !strings.HasPrefix(id, "dpl_") {
			continue
		}
		rec, err := e.st.Deployment(ctx, id)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err == nil && !rec.State.Final() {
			continue
		}
		if err := e.removeWorkDir(id); err != nil {
			e.log.Warn("remove the work directory of an ended deploy", "deploy", id, "error", err)
		}
	}
}

// giveUp reports whether the deploy gives up at step. It is asked by the
// first step an execution of the workflow runs. When that execution is a
// resumption (DBOS counts each dispatch of the workflow), the step is the
// one the previous execution's worker stopped in, or the first after a
// wait it stopped in: it counts one more resumption, the log says "step
// resumed on <worker>", and past Config.MaxRecoveryAttempts the deploy
// stops there — while it still holds its environment's slot — then
// compensates, cleans up and ends MAX_RECOVERY_ATTEMPTS_EXCEEDED like an
// ERROR. A deploy that only waited across restarts (an observation time, a
// wave's approval) resumes no step until the wait ends, and is not given up
// for it. Costs one read per execution, one write per resumption. Its reads
// wait for a database that is away (whileFault): a resumption during an
// outage still counts, and the execution is asked again until they answer.
func (r *run) giveUp(ctx context.Context, step string) (int, bool, error) {
	if r.dispatchChecked {
		return 0, false, nil
	}
	// One query (RetrieveWorkflow and GetStatus are two).
	var wfs []dbos.WorkflowStatus
	if err := r.whileFault(ctx, "reading whether the deploy was resumed", func() error {
		if err := injectedFault("list workflows"); err != nil {
			return err
		}
		var err error
		wfs, err = dbos.ListWorkflows(r.e.dbos, dbos.WithFilterWorkflowIDs(r.in.ID),
			dbos.WithFilterLoadInput(false), dbos.WithFilterLoadOutput(false))
		return err
	}); err != nil {
		return 0, false, err
	}
	if len(wfs) != 1 || wfs[0].Attempts <= 1 {
		r.dispatchChecked = true
		return 0, false, nil
	}
	// Counted once per execution (worker and DBOS attempt), also when the
	// answer to a commit is lost with the connection and it is sent again.
	by := fmt.Sprintf("%s#%d", r.e.cfg.ExecutorID, wfs[0].Attempts)
	var n int
	if err := r.whileFault(ctx, "counting a step's resumption", func() error {
		var err error
		n, err = r.e.st.StepResumed(ctx, r.in.ID, step, by)
		if err == nil {
			err = injectedFault("step resumed")
		}
		return err
	}); err != nil {
		return 0, false, err
	}
	r.dispatchChecked = true
	if n == 0 {
		return 0, false, nil
	}
	text := fmt.Sprintf("step resumed on %s after its worker stopped (resumption %d of at most %d)",
		r.e.cfg.ExecutorID, n, r.e.cfg.MaxRecoveryAttempts)
	if n > r.e.cfg.MaxRecoveryAttempts {
		// It is not run again: say so, not "resumption n of at most m".
		text = fmt.Sprintf("step not run again on %s: its worker stopped during it %d times, more than workers.max_recovery_attempts (%d); the deploy is given up here and ends MAX_RECOVERY_ATTEMPTS_EXCEEDED (compensated when rollback is enabled)",
			r.e.cfg.ExecutorID, n, r.e.cfg.MaxRecoveryAttempts)
	}
	if err := r.e.st.AppendLog(ctx, r.in.ID, step, []store.LogEntry{{Time: time.Now(), Text: text}}); err != nil {
		r.e.log.Warn("log a step's resumption", "deploy", r.in.ID, "step", step, "error", err)
	}
	return n, n > r.e.cfg.MaxRecoveryAttempts, nil
}

// errAbandoned is the error of the step a deploy gave up in.
func errAbandoned(interruptions int) error {
	return fmt.Errorf("the worker stopped during this step %d times (crash, kill or shutdown); manent gave the deploy up instead of running it again", interruptions)
}
