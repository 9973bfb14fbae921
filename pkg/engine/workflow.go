package engine

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/artifact"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/notify"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/retry"
	"github.com/manent-io/manent/pkg/store"
)

// Result is the workflow's output.
type Result struct {
	State    manent.State `json:"state"`
	Error    string       `json:"error,omitempty"`
	Rollback string       `json:"rollback,omitempty"`
	SHA256   string       `json:"sha256,omitempty"`
}

// stepOut is what a step records in DBOS: its output, or that it did not
// run because the deploy was cancelled.
type stepOut struct {
	Cancelled bool `json:"cancelled,omitempty"`
	// Abandoned says the deploy gave itself up at this step (run.giveUp).
	Abandoned bool            `json:"abandoned,omitempty"`
	Output    json.RawMessage `json:"output,omitempty"`
}

// run is one execution of a deploy workflow; outputs are rebuilt from the
// recorded step results on recovery, so it holds no state of its own.
type run struct {
	e       *Engine
	in      plan.Input
	outputs map[string]json.RawMessage
	waves   map[string]*plan.Wave // step name → its rollout wave
	// undone holds the compensated steps whose rollback succeeded.
	undone map[string]bool
	// dispatchChecked: this execution already asked giveUp.
	dispatchChecked bool
	// cancelSeen is the deploy's cancel flag as the commit of the step
	// this execution just ran read it: the next step checks it instead of
	// reading it again. nil: read it (first step of an execution, after a
	// wait, on a retry).
	cancelSeen *bool
	// logs is what the steps of this execution may still write to the
	// deploy's log (steplog.go).
	logs logBudget
	// customOutput is what the custom steps of this execution returned,
	// in bytes (boundOutput).
	customOutput int
	// again, when set, decides whether another attempt follows a failed
	// one instead of the plan step's max_retries (change:close's attempts
	// are bounded by time, not count: changeCloseWorkflow).
	again func(err error, now time.Time) (next time.Time, line string, ok bool)
	// maskers are this execution's maskers, for the custom steps (true)
	// and the others (false), built at their first use: the secrets cannot
	// change but when applyConfig gives the deploy its configuration,
	// which forgets them (masker).
	maskers map[bool]*plugin.Masker
}

// deployWorkflow is the durable deploy: config, notify:started, the plan
// steps, then the conclusion. Every step's result is saved before the next
// starts; a crash resumes after the last saved step.
func (e *Engine) deployWorkflow(ctx dbos.Context, in plan.Input) (Result, error) {
	r := &run{e: e, in: in, outputs: map[string]json.RawMessage{}, waves: map[string]*plan.Wave{}}
	e.deployStarted()
	defer e.deployEnded()
	units := []unit{
		{step: manent.PlanStep{Name: manent.StepConfig, MaxRetries: 3}},
		{step: manent.PlanStep{Name: manent.StepNotifyStarted, MaxRetries: 3}},
	}
	units = append(units, sequence(in.Plan, in.Waves)...)
	for _, u := range units {
		if u.wave != nil {
			r.waves[u.step.Name] = u.wave
			r.waves[CheckpointPrefix+u.step.Name] = u.wave
			r.waves[RollbackPrefix+u.step.Name] = u.wave
		}
	}

	failed, cancelled, abandoned := "", false, false
	var started []string // compensable steps that started, in order
	// activated counts the activations that completed and were not
	// compensated: while one is left, the release is live (on that wave).
	activated := 0
	waveSeen := map[string]bool{}
	for _, u := range units {
		ps := u.step
		if (u.wave != nil && !waveSeen[u.wave.Name]) || u.gate {
			// A wait may come: the flag the last step read grows old.
			r.cancelSeen = nil
		}
		if u.wave != nil && !waveSeen[u.wave.Name] {
			waveSeen[u.wave.Name] = true
			if u.wave.Approval {
				var refused string
				next := func() string {
					switch refused {
					case "":
						return "to start wave " + u.wave.Name
					case errWaveCancelled:
						return "to end the deploy: cancelled"
					}
					return "to end the deploy: " + refused
				}
				err := r.parked(ctx, u.wave.Name, next, func() (err error) { refused, err = r.waitWaveApproval(ctx, u.wave); return err })
				if err != nil {
					return Result{}, err
				}
				if refused == errWaveCancelled {
					cancelled = true
					break
				}
				if refused != "" {
					failed = WaveApprovalPrefix + "[" + u.wave.Name + "]"
					break
				}
			}
			var stop bool
			next := func() string {
				if stop {
					return "to end the deploy: cancelled"
				}
				return "to start wave " + u.wave.Name
			}
			if err := r.parked(ctx, u.wave.Name, next, func() (err error) { stop, err = r.waitWaveFreeze(ctx, u.wave); return err }); err != nil {
				return Result{}, err
			}
			if stop {
				cancelled = true
				break
			}
		}
		if u.gate {
			var stop bool
			next := func() string {
				if stop {
					return "to end the deploy: cancelled"
				}
				return "to run the health gate of wave " + u.wave.Name
			}
			if err := r.parked(ctx, u.wave.Name, next, func() (err error) { stop, err = r.observe(ctx, u.wave); return err }); err != nil {
				return Result{}, err
			}
			if stop {
				cancelled = true
				break
			}
		}
		if compensable(baseStep(ps.Name)) {
			// checkpoint:<step> records what to return to before the step
			// changes anything.
			cp := manent.PlanStep{Name: CheckpointPrefix + ps.Name, MaxRetries: 3}
			out, err := r.step(ctx, cp)
			if err != nil {
				if ctx.Err() != nil {
					return Result{}, err
				}
				failed = cp.Name
				break
			}
			if out.Cancelled {
				cancelled = true
				break
			}
			if out.Abandoned {
				failed, abandoned = cp.Name, true
				break
			}
			r.outputs[cp.Name] = out.Output
			started = append(started, ps.Name)
		}
		out, err := r.step(ctx, ps)
		if err != nil {
			if ctx.Err() != nil {
				// Shutting down: the step was interrupted, not failed. The
				// deploy stays PENDING and recovery resumes it.
				return Result{}, err
			}
			failed = ps.Name
			break
		}
		if out.Cancelled {
			cancelled = true
			break
		}
		if out.Abandoned {
			failed, abandoned = ps.Name, true
			break
		}
		r.outputs[ps.Name] = out.Output
		if ps.Name == manent.StepConfig {
			r.applyConfig(out.Output)
		}
		if baseStep(ps.Name) == manent.StepActivation {
			activated++
		}
	}

	// Error and rollback: compensate the started steps in reverse order,
	// stopping at the first compensation that fails. A deploy given up
	// after too many crashes is in an unknown state: it is compensated
	// whenever rollback is enabled, whichever step it stopped in.
	// A cancel after the target changed compensates too when rollback is
	// enabled: a CANCELLED deploy leaves none of its release behind (a
	// rollout cancelled between waves would otherwise end with its first
	// waves on the new release and the others on the old one).
	rollback := manent.RollbackNone
	compensate := failed != "" && (abandoned || slices.Contains(r.in.Rollback.On, baseStep(failed)))
	if cancelled && failed == "" && r.in.Rollback.Enabled && len(started) > 0 {
		// A deploy cancelled under the previous release, which did not
		// compensate a cancel, replays as it ran (DBOS patching).
		patched, err := dbos.Patch(ctx, "cancel-compensates")
		if err != nil {
			return Result{}, err
		}
		compensate = patched
	}
	if compensate && r.in.Rollback.Enabled && len(started) > 0 {
		rollback = manent.RollbackCompleted
		for i := len(started) - 1; i >= 0; i-- {
			name := RollbackPrefix + started[i]
			if _, err := r.step(ctx, manent.PlanStep{Name: name, MaxRetries: 2}); err != nil {
				if ctx.Err() != nil {
					return Result{}, err
				}
				rollback = manent.RollbackFailed
				break
			}
			if r.undone == nil {
				r.undone = map[string]bool{}
			}
			r.undone[started[i]] = true
			if baseStep(started[i]) == manent.StepActivation && r.outputs[started[i]] != nil {
				activated--
			}
		}
	}

	// Conclusion: cleanup runs after success and error alike.
	if _, err := r.step(ctx, manent.PlanStep{Name: manent.StepCleanup, MaxRetries: 3}); err != nil {
		if ctx.Err() != nil {
			return Result{}, err
		}
		e.log.Warn("cleanup failed", "deploy", in.ID, "error", err)
	}
	res, err := dbos.RunAsStep(ctx, func(sctx context.Context) (Result, error) {
		if err := e.admitStep(sctx); err != nil {
			return Result{}, err
		}
		return r.finish(sctx, ending{failed: failed, cancelled: cancelled, abandoned: abandoned, rollback: rollback, live: activated > 0})
	}, dbos.WithStepName("manent:finish"), dbos.WithStepMaxRetries(10), dbos.WithStepBaseInterval(e.cfg.RetryBase))
	if err != nil {
		return Result{}, err
	}
	return res, nil
}

// startRecordDelay is how long a step runs before it is shown RUNNING: a
// shorter step is recorded once, when it ends, which halves the writes of
// the common fast step.
const startRecordDelay = 50 * time.Millisecond

// step runs one plan step as a DBOS step with retries; permanent errors
// stop at once. Cancel is checked first: a cancelled deploy runs no more steps.
func (r *run) step(ctx dbos.Context, ps manent.PlanStep) (stepOut, error) {
	fn := r.action(ps)
	seen := r.cancelSeen
	r.cancelSeen = nil
	// runs counts this execution's attempts as DBOS does: the last one
	// (ps.MaxRetries+1) ends the step whatever its outcome.
	runs := 0
	return dbos.RunAsStep(ctx, func(sctx context.Context) (stepOut, error) {
		runs++
		try := tries{n: runs, of: max(ps.MaxRetries, 0) + 1, base: r.e.cfg.RetryBase, max: r.e.cfg.RetryMax, again: r.again}
		// Only the first attempt may use the flag the previous step read.
		known := seen
		seen = nil
		// A worker declared dead runs no step (workers.go).
		if err := r.e.admitStep(sctx); err != nil {
			return stepOut{}, err
		}
		if ps.Name != manent.StepCleanup && ps.Name != StepChangeClose && !strings.HasPrefix(ps.Name, RollbackPrefix) {
			n, ok, err := r.giveUp(sctx, ps.Name)
			if err != nil {
				return stepOut{}, err
			}
			if ok {
				now := time.Now()
				if _, err := r.e.st.StepFinished(sctx, r.in.ID, ps.Name, store.StepEnd{State: manent.StepError,
					Error: errAbandoned(n).Error(), StartedAt: now, Counted: true}); err != nil {
					return stepOut{}, err
				}
				return stepOut{Abandoned: true}, nil
			}
			// The flag the previous step's commit read, else (and on a
			// retry) the database's.
			var cancel bool
			if known != nil {
				cancel = *known
			} else {
				if err := r.whileFault(sctx, "reading the cancel flag before a step", func() error {
					var err error
					cancel, err = r.e.st.CancelRequested(sctx, r.in.ID)
					return err
				}); err != nil {
					return stepOut{}, err
				}
			}
			if cancel {
				// A step its worker stopped in (a crash, a kill, a
				// shutdown, a takeover) ran, perhaps in part: it runs again
				// to its end, as a running step is never cut short
				// (SPEC §5); the cancel stops the deploy at the next step.
				again, err := r.interrupted(sctx, ps.Name)
				if err != nil {
					return stepOut{}, err
				}
				if !again {
					return stepOut{Cancelled: true}, nil
				}
			}
		}
		// The first step makes the deploy PENDING, in the transaction
		// that shows the step running or ended.
		return r.attempt(sctx, ps.Name, fn, ps.Name == manent.StepConfig, r.changesTarget(ps), try)
	},
		dbos.WithStepName(ps.Name),
		dbos.WithStepMaxRetries(ps.MaxRetries),
		dbos.WithStepBaseInterval(r.e.cfg.RetryBase),
		dbos.WithStepBackoffFactor(2),
		dbos.WithStepMaxInterval(r.e.cfg.RetryMax),
		dbos.WithStepRetryPredicate(func(err error) bool { return !plugin.IsPermanent(err) }),
	)
}

// interrupted reports whether step name is shown RUNNING when an
// execution of the deploy is about to run it: its worker stopped during it
// (the step's end is never recorded while it runs here). The cancelled
// deploy then runs it again to its end, and its log says why.
func (r *run) interrupted(ctx context.Context, name string) (bool, error) {
	var st manent.Step
	err := r.whileFault(ctx, "reading a step before it runs", func() error {
		if err := injectedFault("step"); err != nil {
			return err
		}
		var err error
		st, err = r.e.st.Step(ctx, r.in.ID, name)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	// A step between two attempts is RUNNING too, but its last attempt
	// ended: nothing of it runs or is left half done.
	if err != nil || st.State != manent.StepRunning || st.Retrying() {
		return false, err
	}
	return true, r.whileFault(ctx, "logging why a cancelled deploy runs a step again", func() error {
		if err := injectedFault("append log"); err != nil {
			return err
		}
		return r.e.st.AppendLog(ctx, r.in.ID, name, []store.LogEntry{{Time: time.Now(),
			Text: "the deploy was cancelled while this step ran on a worker that stopped: it runs again to its end, as a running step is never cut short; the deploy stops after it"}})
	})
}

// storableError returns err with a message the database can hold, as the
// step's error, the deploy's, and the DBOS step's outcome: a plugin's error
// is its own text (an external plugin's answer, a platform's message), and
// may hold a NUL character or invalid UTF-8, which PostgreSQL refuses in a
// text column — the step's end then went unrecorded and the deploy said
// only "failed" — or megabytes. NUL becomes `\x00`, invalid UTF-8 U+FFFD,
// and a message longer than MaxStepError is cut and says how long it was.
// errors.Is and errors.As see err as it was (plugin.IsPermanent).
func storableError(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := strings.ReplaceAll(strings.ToValidUTF8(msg, "\uFFFD"), "\x00", `\x00`)
	if len(clean) > MaxStepError {
		cut := clean[:MaxStepError]
		for len(cut) > 0 {
			if r, n := utf8.DecodeLastRuneInString(cut); r != utf8.RuneError || n != 1 {
				break
			}
			cut = cut[:len(cut)-1]
		}
		clean = fmt.Sprintf("%s … [error cut: %d bytes, at most %d kept]", cut, len(msg), MaxStepError)
	}
	if clean == msg {
		return err
	}
	return &storedError{msg: clean, err: err}
}

// withLastOutput returns err with the last lines its command printed
// (plugin.OutputError) after its message, masked by m as the step's log
// is: a step's error, and the deploy's, say why a script or an external
// plugin failed without `logs`. errors.Is and errors.As see err as it was.
func withLastOutput(m *plugin.Masker, err error) error {
	if msg, ok := plugin.LastOutput(m, err); ok {
		return &storedError{msg: msg, err: err}
	}
	return err
}

// maskError returns err with the secrets in its message masked
// (plugin.Masker); errors.Is and errors.As see err as it was.
func maskError(m *plugin.Masker, err error) error {
	if m == nil || err == nil {
		return err
	}
	msg := err.Error()
	if shown := m.Mask(msg); shown != msg {
		return &storedError{msg: shown, err: err}
	}
	return err
}

// maskOutput returns a step's output as readers see it: every string in it
// (keys too) masked. An output with nothing to mask is returned as it is.
func maskOutput(m *plugin.Masker, out any) any {
	if m == nil || out == nil {
		return out
	}
	raw, err := json.Marshal(out)
	if err != nil {
		return out // attempt reports it
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return out
	}
	changed := false
	var walk func(v any) any
	walk = func(v any) any {
		switch x := v.(type) {
		case string:
			if s := m.Mask(x); s != x {
				changed = true
				return s
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		case map[string]any:
			y := make(map[string]any, len(x))
			for k, val := range x {
				if mk := m.Mask(k); mk != k {
					changed, k = true, mk
				}
				y[k] = walk(val)
			}
			return y
		}
		return v
	}
	v = walk(v)
	if !changed {
		return out
	}
	shown, err := json.Marshal(v)
	if err != nil {
		return out
	}
	return json.RawMessage(shown)
}

// storedError is an error shown with another message (storableError).
type storedError struct {
	msg string
	err error
}

func (e *storedError) Error() string { return e.msg }
func (e *storedError) Unwrap() error { return e.err }

// changesTarget reports whether step ps acts outside the deploy's work
// directory — deploy, activation, their checkpoints and rollbacks, custom
// steps. Such a step is shown RUNNING before its action goes out, not
// after startRecordDelay: a worker that dies within that delay must not
// leave a step whose action went out shown PENDING (then SKIPPED), nor
// one a cancel would not run again to its end (interrupted).
func (r *run) changesTarget(ps manent.PlanStep) bool {
	return ps.Plugin != "" || compensable(baseStep(ps.Name))
}

// tries is which attempt of a step runs (n, from 1, of at most of) and
// the backoff between attempts (the step's DBOS retry options).
type tries struct {
	n, of     int
	base, max time.Duration
	// again replaces the count and backoff when set (run.again).
	again func(err error, now time.Time) (next time.Time, line string, ok bool)
}

// retry returns how an attempt that failed with err is recorded when
// another attempt will follow it: the step stays RUNNING — it has no
// result yet — with the error, when the next attempt is due and a log
// line saying so. ok is false when this attempt ends the step (the last
// one, or a permanent error): it is recorded ERROR, with line when it is
// not empty (why no attempt follows).
func (t tries) retry(err error, now time.Time) (next time.Time, line string, ok bool) {
	if errors.Is(err, errCutByCancel) || errors.Is(err, dbos.ErrConflictingWorkflowID) {
		return time.Time{}, "", false
	}
	if t.again != nil {
		return t.again(err, now)
	}
	if t.n >= t.of || plugin.IsPermanent(err) {
		return time.Time{}, "", false
	}
	// DBOS's backoff: base × 2^(n-1), at most max (±5 % jitter).
	d := t.base
	for i := 1; i < t.n && d < t.max; i++ {
		d *= 2
	}
	if t.max > 0 && d > t.max {
		d = t.max
	}
	return now.Add(d), fmt.Sprintf("attempt %d of %d failed: %s; retrying in %s", t.n, t.of, err, d), true
}

// attempt runs one attempt of a step and records it: RUNNING once it has
// run for startRecordDelay (at once when eager), then its end with its
// output or error and its log lines — an error another attempt will
// follow leaves the step RUNNING (tries.retry). first: the deploy becomes
// PENDING with the first record.
func (r *run) attempt(ctx context.Context, name string, fn action, first, eager bool, try tries) (stepOut, error) {
	startedAt := time.Now()
	// What the step writes, returns or fails with is masked before it is
	// stored: every reader (logs, events, the web page, callbacks, chat)
	// reads it from there.
	mask := r.masker(name)
	log := &logWriter{ctx: ctx, st: r.e.st, id: r.in.ID, step: name, budget: &r.logs, last: startedAt, mayWrite: r.e.mayWrite, mask: mask}
	var counted atomic.Bool
	recorded := make(chan struct{})
	stopFlush := make(chan struct{})
	start := func() {
		defer close(recorded)
		if first {
			if _, err := r.e.st.SetState(ctx, r.in.ID, manent.StatePending, ""); err != nil {
				r.e.log.Warn("show a deploy running", "deploy", r.in.ID, "error", err)
			}
		}
		if _, err := r.e.st.StepStarted(ctx, r.in.ID, name, startedAt); err == nil {
			counted.Store(true)
		}
		log.flush()
		// A long step's lines reach `logs -f` within logFlushEvery, even
		// when the step writes nothing more for a while.
		go func() {
			t := time.NewTicker(logFlushEvery)
			defer t.Stop()
			for {
				select {
				case <-stopFlush:
					return
				case <-t.C:
					log.flush()
				}
			}
		}()
	}
	var timer *time.Timer
	if eager {
		start()
	} else {
		timer = time.AfterFunc(startRecordDelay, start)
	}
	out, err := r.prepareWorkDir(ctx, name, log)
	if err == nil {
		// The last check before the action goes out: a worker paused (or
		// cut off) past its cut-off since admitStep may have been taken
		// over, and its action must not run beside the new attempt.
		err = r.e.mayRecord(ctx)
	}
	if err == nil {
		out, err = fn(ctx, log)
	}
	err = storableError(maskError(mask, withLastOutput(mask, err)))
	if timer == nil || !timer.Stop() {
		<-recorded
	}
	close(stopFlush)
	end := store.StepEnd{State: manent.StepSuccess, StartedAt: startedAt, Counted: counted.Load(), Logs: log.take(), Pending: first}
	// Paused past dead_after while the command ran: the deploy was taken
	// over, its result is not this worker's to record.
	if ferr := r.e.mayRecord(ctx); ferr != nil {
		err = ferr
	}
	if err != nil && ctx.Err() != nil {
		if r.e.live.isFenced() {
			// Taken over: the step and its log are another worker's now.
			return stepOut{}, err
		}
		// Interrupted by shutdown: not an outcome. Keep the log lines; the
		// step stays RUNNING until recovery runs it again.
		if lerr := r.e.st.AppendLog(context.WithoutCancel(ctx), r.in.ID, name, append(end.Logs,
			store.LogEntry{Time: time.Now(), Text: "interrupted by a worker shutdown; recovery will run this step again"})); lerr != nil {
			r.e.log.Warn("keep the log of an interrupted step", "deploy", r.in.ID, "step", name, "error", lerr)
		}
		return stepOut{}, err
	}
	if err != nil {
		end.State, end.Output, end.Error = manent.StepError, maskOutput(mask, out), err.Error()
		now := time.Now()
		next, line, ok := try.retry(err, now)
		if ok {
			end.State, end.NextAttemptAt, end.MaxAttempts = manent.StepRunning, &next, try.of
			if try.again != nil {
				end.MaxAttempts = 0 // bounded by time, not count
			}
		}
		if line != "" {
			end.Logs = append(end.Logs, store.LogEntry{Time: now, Text: line})
		}
		if _, serr := r.recordEnd(ctx, name, end); serr != nil {
			return stepOut{}, errors.Join(err, serr)
		}
		if errors.Is(err, errCutByCancel) {
			return stepOut{Cancelled: true}, nil
		}
		return stepOut{}, err
	}
	raw, merr := json.Marshal(out)
	if merr != nil {
		return stepOut{}, plugin.Permanent(merr)
	}
	end.Output = json.RawMessage(raw)
	if s, ok := out.(shownOutput); ok {
		// What readers see differs from what the deploy records for itself.
		end.Output = s.shown()
	}
	// Readers see the output masked; the deploy reads its own (a target's
	// checkpoint is given back to its rollback as the plugin returned it).
	end.Output = maskOutput(mask, end.Output)
	res := stepOut{Output: raw}
	cancel := false
	end.CancelRequested = &cancel
	queued := 0
	// One commit records the step's end in manent's tables, queues its
	// callbacks and checkpoints the DBOS step (dbos.RecordStepOutcome):
	// the step is done everywhere or nowhere.
	end.Also = func(tx *sql.Tx, st manent.Step) error {
		queued = 0
		if name != manent.StepNotifyStarted && name != manent.StepCleanup {
			n, err := r.notify(ctx, notify.EventStep, "step."+name, &st, manent.StatePending, "", "", dbos.WithEnqueueTransaction(tx))
			if err != nil {
				return err
			}
			queued = n
		}
		return dbos.RecordStepOutcome(ctx, tx, res)
	}
	if _, err := r.recordEnd(ctx, name, end); err != nil {
		if errors.Is(err, dbos.ErrConflictingWorkflowID) {
			// Another execution owns the deploy now: running the step
			// again here would not make its result ours to record.
			return stepOut{}, plugin.Permanent(err)
		}
		return stepOut{}, err
	}
	if queued > 0 {
		dbos.WakeQueue(r.e.dbos, r.e.outbox.Queue())
	}
	r.cancelSeen = &cancel
	return res, nil
}

// recordEndRetry is how the end of a step that already ran is retried
// against a storage fault (busy or locked database, full disk): 100 ms
// doubling, at most 5 s, for up to 2 minutes. The command must not run again
// only because its result could not be saved at once.
var recordEndRetry = retry.Policy{Initial: 100 * time.Millisecond, Max: 5 * time.Second, For: 2 * time.Minute}

// readFault, set by a test (SetReadFault), is called at the reads a step
// makes around its action that wait for the database (whileFault), with
// what the read is: the storage fault it returns stands for the database
// going away at that instant (nil: none).
var readFault atomic.Pointer[func(op string) error]

// SetReadFault sets what the reads that wait for the database (giveUp,
// interrupted, the config step, notify:started, the conclusion) are
// answered before they run, by what they read: "list workflows", "step
// resumed" (after its commit), "step", "append log", "current release",
// "overtaken", "reconfigure", "wave approvals", "observation",
// "change:close" (its read of change:open), "notify:started" (its write
// to the outbox), "failed step", "cancel reason", "waves" (the
// conclusion's reads of the step that failed, of why the deploy was
// cancelled, of the waves it settles), "waiting wave" (a verdict's reads
// of the wave that waits, the server's and the engine's), "tick
// schedule", "tick deploy", "tick admission", "tick outcome" (a schedule
// tick's reads of its schedule and of its deploy, its admission's of the
// store, its write of its outcome on the schedule),
// "checkpoint:deploy[<wave>]" (its write that the wave deploys) (nil:
// none). It is for tests alone (this package's, and the server's
// through servertest.SetReadFault): nothing in the server sets it.
func SetReadFault(f func(op string) error) {
	if f == nil {
		readFault.Store(nil)
		return
	}
	readFault.Store(&f)
}

// injectedFault is readFault's answer for op (nil when no test set it).
func injectedFault(op string) error {
	if f := readFault.Load(); f != nil {
		return (*f)(op)
	}
	return nil
}

// whileFault runs fn again while it fails with a storage fault (the
// database busy or away), as recordEnd does: a read before a step's action
// must not spend one of the step's attempts on a database restart (the
// attempt's heartbeat check waits only once the last beat is older than
// its freshness). The worker's cut-off bounds the wait.
func (r *run) whileFault(ctx context.Context, what string, fn func() error) error {
	return r.whileFaultIf(ctx, what, func(err error) bool { return store.AsFault(err) != nil }, fn)
}

// isStoreFault says whether err is a storage fault the store's caller
// classified (*store.Fault), not one store.AsFault would guess from a
// network error.
func isStoreFault(err error) bool {
	var f *store.Fault
	return errors.As(err, &f)
}

// whileFaultIf is whileFault with fault saying which errors wait.
func (r *run) whileFaultIf(ctx context.Context, what string, fault func(error) bool, fn func() error) error {
	var last error
	err := recordEndRetry.Do(ctx, func(int) error {
		err := fn()
		last = err
		if err == nil || !fault(err) {
			return retry.Stop(err)
		}
		r.e.log.Warn(what+" failed; retrying", "deploy", r.in.ID, "error", err)
		return err
	})
	if err != nil && ctx.Err() != nil {
		err = last
	}
	return err
}

// recordEnd records the end of an attempt, retrying storage faults with
// recordEndRetry.
func (r *run) recordEnd(ctx context.Context, name string, end store.StepEnd) (manent.Step, error) {
	var (
		st   manent.Step
		last error
	)
	err := recordEndRetry.Do(ctx, func(int) error {
		var err error
		st, err = r.e.st.StepFinished(ctx, r.in.ID, name, end)
		last = err
		if err == nil || store.AsFault(err) == nil {
			return retry.Stop(err)
		}
		r.e.log.Warn("recording a step's end failed; retrying", "deploy", r.in.ID, "step", name, "error", err)
		return err
	})
	if err != nil && ctx.Err() != nil {
		err = last // ctx ended while waiting: the storage fault, as before
	}
	return st, err
}

type action func(ctx context.Context, log *logWriter) (any, error)

// action returns what a step does.
func (r *run) action(ps manent.PlanStep) action {
	switch {
	case strings.HasPrefix(ps.Name, CheckpointPrefix):
		return r.checkpoint(strings.TrimPrefix(ps.Name, CheckpointPrefix))
	case strings.HasPrefix(ps.Name, RollbackPrefix):
		return r.compensate(strings.TrimPrefix(ps.Name, RollbackPrefix))
	case ps.Plugin != "":
		return r.custom(ps)
	}
	switch baseStep(ps.Name) {
	case manent.StepConfig:
		return r.config
	case manent.StepNotifyStarted:
		return r.notifyStarted
	case manent.StepSecrets:
		return r.secrets
	case manent.StepArtifacts:
		return r.artifacts
	case manent.StepQA:
		return r.qa
	case manent.StepDeploy:
		return r.target(func(t plugin.Target, ctx context.Context, pc plugin.Context) (plugin.Result, error) {
			return t.Deploy(ctx, pc)
		})
	case manent.StepPostTest:
		if strings.HasPrefix(ps.Name, HealthGate) {
			return r.healthGate
		}
		return r.postTest
	case manent.StepActivation:
		return r.target(func(t plugin.Target, ctx context.Context, pc plugin.Context) (plugin.Result, error) {
			return t.Activate(ctx, pc)
		})
	case manent.StepCleanup:
		return r.cleanup
	case StepChangeClose:
		return r.closeChange
	}
	return func(context.Context, *logWriter) (any, error) {
		return nil, plugin.Permanent(fmt.Errorf("step %q has no implementation", ps.Name))
	}
}

// healthGate checks a wave after its observation time: the post-test
// check, or — when the target has a gate of its own (plugin.Gate) — the
// descriptor's health checks, if any, then the target's gate.
func (r *run) healthGate(ctx context.Context, log *logWriter) (any, error) {
	w := r.waves[log.step]
	out, err := r.gateCheck(ctx, log)
	if err != nil {
		// The wave's message is the step's error as attempt records it:
		// with the last lines its command printed, masked.
		r.waveEvent(ctx, w, WaveFailed, storableError(maskError(log.mask, withLastOutput(log.mask, err))).Error(), GateFailed)
		return out, err
	}
	r.waveEvent(ctx, w, WaveHealthy, "", GatePassed)
	return out, nil
}

func (r *run) gateCheck(ctx context.Context, log *logWriter) (any, error) {
	t, err := r.e.cfg.Plugins.Target(r.in.Target.Plugin)
	if err != nil {
		return nil, err
	}
	g, ok := t.(plugin.Gate)
	if !ok {
		return r.postTest(ctx, log)
	}
	out := map[string]any{}
	if r.in.Descriptor != nil && len(r.in.Descriptor.Health) > 0 {
		h, err := CheckHealth(ctx, r.e.cfg.Health, r.in.Descriptor.Health, r.e.cfg.RetryBase, log)
		if err != nil {
			return h, err
		}
		out["health"] = h
	}
	res, err := g.HealthGate(ctx, r.pluginContext(log.step, r.in.Target.With, log))
	out["target"] = res
	return out, err
}

// prepareWorkDir makes sure the work directory and the downloaded artifact
// are there before a step runs: a deploy recovered by another worker (or
// after the directory was lost) fetches the artifact again and checks it
// against the digest recorded when it was first downloaded.
func (r *run) prepareWorkDir(ctx context.Context, step string, log *logWriter) (any, error) {
	switch step {
	case manent.StepConfig, manent.StepCleanup, StepChangeClose:
		return nil, nil
	}
	if err := os.MkdirAll(r.e.WorkDir(r.in.ID), 0o755); err != nil {
		return nil, err
	}
	raw, ok := r.outputs[manent.StepArtifacts]
	if !ok || step == manent.StepArtifacts {
		return nil, nil
	}
	var f artifact.Fetched
	if json.Unmarshal(raw, &f) != nil || f.Path == "" {
		return nil, nil
	}
	if _, err := os.Stat(r.artifactPath(f)); err == nil {
		return nil, nil
	}
	fmt.Fprintf(log, "artifact not on this worker: downloading it again (sha256 %s)\n", f.SHA256)
	again, err := r.e.fetcher.Fetch(ctx, r.in.Descriptor.Artifact.URL, r.e.WorkDir(r.in.ID), f.SHA256)
	if err != nil {
		return nil, fmt.Errorf("fetch the artifact again: %w", err)
	}
	if again.Path != r.artifactPath(f) {
		return nil, plugin.Permanent(fmt.Errorf("artifact landed at %s, expected %s", again.Path, r.artifactPath(f)))
	}
	return nil, nil
}

// artifactPath is where the downloaded artifact is on this worker: the
// recorded path may be another worker's.
func (r *run) artifactPath(f artifact.Fetched) string {
	return filepath.Join(r.e.WorkDir(r.in.ID), filepath.Base(f.Path))
}

func (r *run) pluginContext(step string, with map[string]any, log *logWriter) plugin.Context {
	pc := plugin.Context{
		DeployID: r.in.ID, Application: r.in.Application, Environment: r.in.Environment,
		Version: r.in.Version, Step: step, WorkDir: r.e.WorkDir(r.in.ID),
		With: with, Parameters: r.in.Parameters, Log: log,
	}
	if w := r.waves[step]; w != nil {
		pc.Wave, pc.Targets, pc.Percent = w.Name, w.Targets, w.Percent
		for i := range r.in.Waves {
			if r.in.Waves[i].Name == w.Name {
				pc.WaveIndex = i + 1
			}
		}
	}
	if raw, ok := r.outputs[manent.StepArtifacts]; ok {
		var f artifact.Fetched
		if json.Unmarshal(raw, &f) == nil && f.Path != "" {
			pc.Artifact = r.artifactPath(f)
		}
	}
	return pc
}

// applyConfig makes the configuration the config step recorded the one the
// rest of the deploy uses (deterministic: it is the step's saved output).
func (r *run) applyConfig(raw json.RawMessage) {
	var c configOutput
	if json.Unmarshal(raw, &c) != nil || c.Target.Plugin == "" {
		return
	}
	r.in.Target, r.in.Parameters, r.in.Rollback = c.Target, c.Parameters, c.Rollback
	r.maskers = nil
	if c.EnvConfig != nil {
		// Governance at the artifacts step and each wave judges with the
		// configuration the config step judged with (recorded by a release
		// that has the field).
		r.in.EnvConfig = c.EnvConfig
	}
}

// configOutput is what the config step records: the configuration it used
// and where it came from. The rest of the deploy uses it.
type configOutput struct {
	Source     string                   `json:"source"`
	Revision   string                   `json:"revision,omitempty"`
	Target     descriptor.Target        `json:"target"`
	Parameters map[string]any           `json:"parameters,omitempty"`
	Rollback   envconfig.RollbackPolicy `json:"rollback"`
	Plan       []string                 `json:"plan"`
	// EnvConfig is the environment configuration governance saw
	// (input.environment.config); never shown.
	EnvConfig map[string]any `json:"env_config,omitempty"`
}

// shownOutput is a step output part of which readers must not see: the
// step's record, its event and the stream carry shown(); the DBOS
// checkpoint, which the deploy itself reads back, carries the whole.
type shownOutput interface{ shown() any }

// shown redacts the credentials an environment configuration may give the
// target and parameters (an `Authorization` header, a password): the step
// output is shown to every reader of the deploy.
func (c configOutput) shown() any {
	c.Target.With = plugin.RedactSettings(c.Target.With)
	c.Parameters = plugin.RedactSettings(c.Parameters)
	c.EnvConfig = nil
	return c
}

// config reads the environment configuration valid now and checks the
// deploy again with the submission's own code (admit.Reconfigure): the
// merge, the plugins and the whole governance decision.
func (r *run) config(ctx context.Context, log *logWriter) (any, error) {
	// A rollback first: its own explanation, whoever was submitted first.
	// Its reads of the database wait for it (whileFault): an outage does
	// not spend the step's attempts, nor refuse the deploy.
	var cur *manent.Release
	if err := r.whileFault(ctx, "reading the environment's current release", func() error {
		if err := injectedFault("current release"); err != nil {
			return err
		}
		var err error
		cur, err = r.e.outdatedRollback(ctx, r.in.ID, r.in.Application, r.in.Environment, r.in.RollbackOf)
		return err
	}); err != nil {
		return nil, err
	} else if cur != nil {
		return nil, plugin.Permanent(errors.New(outdatedRollbackError(r.in.ID, r.in.Version, r.in.Application, r.in.Environment, r.in.RollbackOf, "running it", *cur)))
	}
	if err := r.whileFault(ctx, "reading whether a newer deploy overtook this one", func() error {
		if err := injectedFault("overtaken"); err != nil {
			return err
		}
		return r.e.notOvertaken(ctx, r.in)
	}); err != nil {
		return nil, err
	}
	// Only the store's faults (*store.Fault, admit.storeError) wait: a
	// provider or a plugin that cannot be reached is retried as the step.
	var rc *admit.Reconfigured
	if err := r.whileFaultIf(ctx, "reading the environment's deploys for governance", isStoreFault, func() error {
		if err := injectedFault("reconfigure"); err != nil {
			return err
		}
		var err error
		rc, err = r.e.cfg.Admitter.Reconfigure(ctx, r.in)
		return err
	}); err != nil {
		return nil, err
	}
	for _, n := range rc.Notes {
		fmt.Fprintln(log, n)
	}
	if err := os.MkdirAll(r.e.WorkDir(r.in.ID), 0o755); err != nil {
		return nil, err
	}
	out := configOutput{Source: rc.Source, Revision: rc.Revision, Target: rc.Target, Parameters: rc.Parameters,
		Rollback: rc.Rollback, Plan: r.in.Plan.Names(), EnvConfig: rc.EnvConfig}
	switch {
	case out.Source == "" || out.Source == "none":
		fmt.Fprintf(log, "configuration: none (no environment configuration provider): target %s, %d plan steps\n", out.Target.Plugin, len(r.in.Plan.Steps))
	case out.Revision == "":
		fmt.Fprintf(log, "configuration %s: target %s, %d plan steps\n", out.Source, out.Target.Plugin, len(r.in.Plan.Steps))
	default:
		fmt.Fprintf(log, "configuration %s revision %s: target %s, %d plan steps\n", out.Source, out.Revision, out.Target.Plugin, len(r.in.Plan.Steps))
	}
	if un := plugin.Unmasked(r.secretsOf(out.Target, out.Parameters, "")); len(un) > 0 {
		fmt.Fprintf(log, "manent: not masked in this deploy's log, errors and outputs (shorter than %d characters, or past %d KiB of secrets): %s\n",
			plugin.MinMasked, plugin.MaxMaskedBytes>>10, strings.Join(un, ", "))
	}
	return out, nil
}

// secretsOf are the secret values the deploy's steps are given, with
// target and parameters: the credentials of the target's and the custom
// steps' settings and of the parameters (what readers see redacted), and
// the values of plugins.pass_env. What step writes is masked with them
// (attempt; "": every step). A mask must tell a step nothing it was not
// given — a step printing guesses would learn which one is masked — so a
// custom step, the submitter's code, is masked without the target's
// credentials (an environment configuration's), which it is not given;
// and a descriptor's `secrets` are never among them, as no step is given
// their values.
func (r *run) secretsOf(target descriptor.Target, parameters map[string]any, step string) []plugin.Secret {
	out := plugin.PassEnvSecrets(r.e.cfg.PassEnv)
	if !r.customStep(step) {
		out = append(out, plugin.SettingSecrets("target.with", target.With)...)
	}
	out = append(out, plugin.SettingSecrets("parameters", parameters)...)
	for _, ps := range r.in.Plan.Steps {
		if ps.Plugin != "" {
			out = append(out, plugin.SettingSecrets("steps."+ps.Name+".with", ps.With)...)
		}
	}
	return out
}

// masker masks what step writes with secretsOf, built once per execution
// for the custom steps and once for the others (nil: nothing to mask).
func (r *run) masker(step string) *plugin.Masker {
	custom := r.customStep(step)
	if m, ok := r.maskers[custom]; ok {
		return m
	}
	if r.maskers == nil {
		r.maskers = map[bool]*plugin.Masker{}
	}
	m := plugin.NewMasker(r.secretsOf(r.in.Target, r.in.Parameters, step))
	r.maskers[custom] = m
	return m
}

// customStep says whether step (of a wave too) is one of the deploy's
// custom steps.
func (r *run) customStep(step string) bool {
	if step == "" {
		return false
	}
	base := baseStep(step)
	for _, ps := range r.in.Plan.Steps {
		if ps.Plugin != "" && ps.Name == base {
			return true
		}
	}
	return false
}

// notifyStarted queues the started event's deliveries. The outbox is in
// the database: a write that finds it away waits for it (whileFault)
// instead of spending the step's attempts, and failing the deploy, on a
// database restart. Queueing the event again sends nothing twice.
func (r *run) notifyStarted(ctx context.Context, log *logWriter) (any, error) {
	var n int
	if err := r.whileFault(ctx, "queueing the started notification", func() (err error) {
		if err := injectedFault("notify:started"); err != nil {
			return err
		}
		n, err = r.notify(ctx, notify.EventStarted, "started", nil, manent.StatePending, "", "")
		return err
	}); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "%d callback and chat deliveries queued\n", n)
	return map[string]any{"deliveries": n}, nil
}

// notify queues the deliveries of one event (callbacks and chat) in the
// durable outbox: a slow receiver never holds a step, a crash loses none,
// and queueing the same event again sends nothing twice.
func (r *run) notify(ctx context.Context, typ notify.EventType, key string, st *manent.Step, state manent.State, errText, rollback string, opts ...dbos.EnqueueOption) (int, error) {
	d := r.in.Descriptor
	if d == nil || (len(d.Callbacks) == 0 && (d.Notify == nil || len(d.Notify.Chat) == 0)) {
		return 0, nil
	}
	// The event's timestamp is when it happened, so that receivers can
	// order events that arrive out of order: a step's event is stamped
	// when the step ended (the failed step's is sent only once its
	// rollback is over), started when the deploy began running (its
	// config step ends before notify:started runs).
	at := time.Now().UTC()
	switch {
	case st != nil && st.FinishedAt != nil:
		at = st.FinishedAt.UTC()
	case typ == notify.EventStarted:
		rec, err := r.e.st.Deployment(ctx, r.in.ID)
		if err != nil {
			return 0, err
		}
		if rec.StartedAt != nil {
			at = rec.StartedAt.UTC()
		}
	}
	ev := notify.Event{Type: typ, Timestamp: at, Deployment: notify.DeploymentRef{
		ID: r.in.ID, Application: r.in.Application, Environment: r.in.Environment, Version: r.in.Version,
		State: state, Error: errText, Rollback: rollback, RollbackOf: r.in.RollbackOf,
	}}
	if st != nil {
		ev.Step = &notify.StepRef{Name: st.Name, State: st.State, Attempts: st.Attempts, Error: st.Error,
			StartedAt: st.StartedAt, FinishedAt: st.FinishedAt}
	}
	var cbs []notify.Callback
	for _, c := range d.Callbacks {
		cbs = append(cbs, notify.Callback{URL: c.URL, Events: c.Events})
	}
	var chat []string
	if d.Notify != nil && (typ == notify.EventStarted || typ == notify.EventFinished) {
		chat = d.Notify.Chat
	}
	ds := notify.Fanout(ev, key, cbs, chat)
	if len(ds) == 0 {
		return 0, nil
	}
	// The deploy's n-th event waits behind the earlier events of every
	// deploy at a shared receiver. n counts the steps this execution has
	// recorded (the same on a replay); finished comes after them all.
	seq := len(r.outputs)
	if typ == notify.EventFinished {
		seq = 2*len(sequence(r.in.Plan, r.in.Waves)) + 4
	}
	receivers := len(d.Callbacks)
	if d.Notify != nil {
		receivers += len(d.Notify.Chat)
	}
	notify.Rank(ds, seq, receivers)
	return len(ds), r.e.outbox.EnqueueAll(r.e.dbos, ds, opts...)
}

func (r *run) secrets(ctx context.Context, log *logWriter) (any, error) {
	var names []string
	if r.in.Descriptor != nil {
		for name, ref := range r.in.Descriptor.Secrets {
			if err := ResolveSecretWithin(ctx, ref); err != nil {
				return nil, plugin.Permanent(fmt.Errorf("secret %s: %w", name, err))
			}
			names = append(names, name)
		}
	}
	sortStrings(names)
	fmt.Fprintf(log, "%d secrets resolve\n", len(names))
	return map[string]any{"resolved": names}, nil
}

func (r *run) artifacts(ctx context.Context, log *logWriter) (any, error) {
	a := r.in.Descriptor.Artifact
	// A download writes only to the deploy's work directory: a cancel need
	// not wait for it (SPEC §5 lets a running step complete so that no
	// target is left half written; this step writes none).
	ctx, stop := r.cutOnCancel(ctx)
	defer stop()
	f, err := r.e.fetcher.Fetch(ctx, a.URL, r.e.WorkDir(r.in.ID), a.SHA256)
	if err != nil {
		if errors.Is(context.Cause(ctx), errCutByCancel) {
			fmt.Fprintf(log, "download of %s stopped: the deploy was cancelled\n", plugin.RedactURL(a.URL))
			return nil, errCutByCancel
		}
		return nil, err
	}
	fmt.Fprintf(log, "downloaded %s (%d bytes, sha256 %s)\n", plugin.RedactURL(a.URL), f.Size, f.SHA256)
	if err := r.e.cfg.Admitter.Promoted(ctx, r.in, f.SHA256); err != nil {
		return nil, err
	}
	return f, nil
}

func (r *run) qa(_ context.Context, log *logWriter) (any, error) {
	var f artifact.Fetched
	if err := json.Unmarshal(r.outputs[manent.StepArtifacts], &f); err != nil || f.Path == "" {
		return nil, plugin.Permanent(errors.New("qa: no artifact was downloaded"))
	}
	got, err := artifact.SHA256File(r.artifactPath(f))
	if err != nil {
		return nil, err
	}
	if got != f.SHA256 {
		return nil, plugin.Permanent(fmt.Errorf("qa: artifact changed on disk: sha256 %s, downloaded as %s", got, f.SHA256))
	}
	fmt.Fprintf(log, "artifact verified\n")
	return map[string]any{"sha256": got}, nil
}

func (r *run) target(fn func(plugin.Target, context.Context, plugin.Context) (plugin.Result, error)) action {
	return func(ctx context.Context, log *logWriter) (any, error) {
		t, err := r.e.cfg.Plugins.Target(r.in.Target.Plugin)
		if err != nil {
			return nil, err
		}
		return fn(t, ctx, r.pluginContext(log.step, r.in.Target.With, log))
	}
}

func (r *run) postTest(ctx context.Context, log *logWriter) (any, error) {
	if r.in.Descriptor == nil || len(r.in.Descriptor.Health) == 0 {
		t, err := r.e.cfg.Plugins.Target(r.in.Target.Plugin)
		if err != nil {
			return nil, err
		}
		return t.Health(ctx, r.pluginContext(log.step, r.in.Target.With, log))
	}
	return CheckHealth(ctx, r.e.cfg.Health, r.in.Descriptor.Health, r.e.cfg.RetryBase, log)
}

func (r *run) custom(ps manent.PlanStep) action {
	return func(ctx context.Context, log *logWriter) (any, error) {
		run, err := r.e.cfg.Plugins.Runner(ps.Plugin)
		if err != nil {
			return nil, err
		}
		res, err := run.Run(ctx, r.pluginContext(ps.Name, ps.With, log))
		return r.boundOutput(res, log), err
	}
}

// The bounds of what custom steps return: a step's output is stored twice
// (its step row, DBOS's checkpoint) and sent with every status, so one
// custom step keeps at most MaxStepOutput bytes of output (as JSON), and
// the custom steps of one execution of a deploy MaxDeployOutput together.
// Nothing reads a custom step's output but people, so a larger one is
// replaced by a note of its size — the step's outcome stays its own — and
// the log says so.
const (
	MaxStepOutput   = 1 << 20
	MaxDeployOutput = 16 << 20
)

// boundOutput returns res, encoded once (attempt records it as it is), or
// a note in its place when it passes the bounds.
func (r *run) boundOutput(res plugin.Result, log *logWriter) any {
	if res == nil {
		return nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return res // attempt reports it
	}
	why := ""
	switch {
	case len(b) > MaxStepOutput:
		why = fmt.Sprintf("more than %d bytes for one step", MaxStepOutput)
	case r.customOutput+len(b) > MaxDeployOutput:
		why = fmt.Sprintf("the custom steps' outputs of this deploy would pass %d bytes", MaxDeployOutput)
	default:
		r.customOutput += len(b)
		return json.RawMessage(b)
	}
	fmt.Fprintf(log, "manent: this step's output (%d bytes) is not kept: %s; print large results to the log, or keep them elsewhere\n", len(b), why)
	return plugin.Result{"output_not_kept": fmt.Sprintf("%d bytes: %s", len(b), why)}
}

// closeChange closes the deploy's ITSM change with its outcome.
func (r *run) closeChange(ctx context.Context, log *logWriter) (any, error) {
	if r.e.cfg.ITSM == nil {
		return map[string]any{"change": ""}, nil
	}
	var (
		id      string
		opened  manent.Step
		foundBy string
	)
	if err := r.whileFault(ctx, "reading the deploy's change", func() (err error) {
		if err := injectedFault("change:close"); err != nil {
			return err
		}
		id, opened, err = r.e.changeOf(ctx, r.in.ID)
		return err
	}); err != nil {
		return nil, err
	}
	if id == "" {
		if !maybeOpened(opened) {
			return map[string]any{"change": ""}, nil
		}
		// change:open's answers were lost: the ITSM answers the same
		// change for the same Idempotency-Key (opening it now if no
		// attempt reached it, to be closed at once).
		c, err := r.e.cfg.ITSM.Open(ctx, changeRequest(r.in))
		if err != nil {
			return nil, fmt.Errorf("look up the change change:open may have opened (POST /changes again, Idempotency-Key %s): %w", r.in.ID, err)
		}
		id, foundBy = c.ID, "Idempotency-Key"
		fmt.Fprintf(log, "change:open's answers were lost; asked again with the same Idempotency-Key (%s), the ITSM answers change %s (%s): closing it\n", r.in.ID, id, c.State)
	}
	var rec *store.Record
	if err := r.whileFault(ctx, "reading the outcome to close the change with", func() (err error) {
		rec, err = r.e.st.Deployment(ctx, r.in.ID)
		return err
	}); err != nil {
		return nil, err
	}
	outcome := rec.State
	if !outcome.Final() {
		// Its gate saw the cancel before the deploy was concluded.
		if !rec.CancelRequested {
			return nil, fmt.Errorf("deploy %s has not ended (%s): its change %s is closed once it has", r.in.ID, rec.State, id)
		}
		outcome = manent.StateCancelled
	}
	if err := r.e.cfg.ITSM.Close(ctx, id, string(outcome)); err != nil {
		// Closed already: by hand, by the ITSM before it was approved (the
		// deploy ended REJECTED), or by an earlier attempt whose answer was
		// lost. ITSMs refuse to close it again (often a 409).
		c, gerr := r.e.cfg.ITSM.Get(ctx, id)
		if gerr != nil || (c.State != itsm.Closed && c.State != itsm.Cancelled) {
			return nil, err
		}
		fmt.Fprintf(log, "change %s was already closed in the ITSM (%s); closing it again was refused: %v\n", id, c.State, err)
		return changeClosed(id, outcome, foundBy, c.State), nil
	}
	fmt.Fprintf(log, "change %s closed: %s\n", id, outcome)
	return changeClosed(id, outcome, foundBy, ""), nil
}

// changeClosed is change:close's output.
func changeClosed(id string, outcome manent.State, foundBy, already string) map[string]any {
	out := map[string]any{"change": id, "outcome": outcome}
	if foundBy != "" {
		out["found_by"] = foundBy
	}
	if already != "" {
		out["already"] = already
	}
	return out
}

// Prefixes of the steps the engine adds around compensable steps.
const (
	CheckpointPrefix = "checkpoint:"
	RollbackPrefix   = "rollback:"
)

// compensable reports whether a step changes the target and can be undone.
func compensable(step string) bool {
	return step == manent.StepDeploy || step == manent.StepActivation
}

// checkpoint records what is live before step runs (the plugin's Live).
func (r *run) checkpoint(step string) action {
	return func(ctx context.Context, log *logWriter) (any, error) {
		t, err := r.e.cfg.Plugins.Target(r.in.Target.Plugin)
		if err != nil {
			return nil, err
		}
		live, err := t.Live(ctx, r.pluginContext(log.step, r.in.Target.With, log))
		if err != nil {
			return nil, err
		}
		if w := r.waves[log.step]; w != nil && baseStep(step) == manent.StepDeploy {
			// The wave is shown deploying before its deploy step changes
			// anything: the conclusion settles only the waves shown in
			// progress, so a wave left pending by a failed write stayed
			// pending for good after a deploy that failed. The write
			// waits for a database that is away; past that, the attempt
			// fails (nothing has changed yet).
			if err := r.whileFault(ctx, "recording that a wave deploys", func() error {
				if err := injectedFault(log.step); err != nil {
					return err
				}
				return r.e.st.AppendRollout(ctx, r.in.ID, manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent, State: WaveDeploying})
			}); err != nil {
				return nil, fmt.Errorf("record that wave %s deploys: %w", w.Name, err)
			}
		}
		fmt.Fprintf(log, "before %s, live: %s\n", step, live)
		return map[string]any{"step": step, "live": live}, nil
	}
}

// compensate undoes step, returning the target to its checkpoint.
func (r *run) compensate(step string) action {
	return func(ctx context.Context, log *logWriter) (any, error) {
		t, err := r.e.cfg.Plugins.Target(r.in.Target.Plugin)
		if err != nil {
			return nil, err
		}
		var cp struct {
			Live json.RawMessage `json:"live"`
		}
		if raw := r.outputs[CheckpointPrefix+step]; len(raw) > 0 {
			// Rolling back to a checkpoint that cannot be read would undo
			// the step blind: stop instead.
			if err := json.Unmarshal(raw, &cp); err != nil {
				return nil, plugin.Permanent(fmt.Errorf("the checkpoint of step %s cannot be read: %w", step, err))
			}
		}
		pc := r.pluginContext(log.step, r.in.Target.With, log)
		switch baseStep(step) {
		case manent.StepDeploy:
			out, err := t.RollbackDeploy(ctx, pc, cp.Live)
			if err == nil {
				r.waveEvent(ctx, r.waves[log.step], WaveRolledBack, "")
			}
			return out, err
		case manent.StepActivation:
			return t.RollbackActivation(ctx, pc, cp.Live)
		}
		return nil, plugin.Permanent(fmt.Errorf("step %s cannot be compensated", step))
	}
}

func (r *run) cleanup(_ context.Context, log *logWriter) (any, error) {
	if err := r.e.removeWorkDir(r.in.ID); err != nil {
		return nil, err
	}
	return map[string]any{"removed": r.e.WorkDir(r.in.ID)}, nil
}

// ending is how the steps of a deploy ended.
type ending struct {
	failed    string // the step that failed, if any
	cancelled bool
	abandoned bool   // given up after too many crashes in failed
	rollback  string // the rollback outcome
	live      bool   // an activation completed and was not compensated
}

// finish concludes the deploy: the final state, the error a person reads,
// the inventory (through conclude, the one finishing path).
func (r *run) finish(ctx context.Context, end ending) (Result, error) {
	res := Result{State: manent.StateSuccess, Rollback: end.rollback}
	var f artifact.Fetched
	if raw, ok := r.outputs[manent.StepArtifacts]; ok && json.Unmarshal(raw, &f) == nil {
		res.SHA256 = f.SHA256
	}
	switch {
	case end.failed != "":
		res.State = manent.StateError
		if end.abandoned {
			res.State = manent.StateMaxRecoveryAttemptsExceeded
		}
		// The failed step's error is the deploy's, and its callback is
		// sent from here. A database away at this read waits for it: taken
		// for a step without an error, the deploy ended "failed" for good
		// and the step's callback was never sent.
		var st manent.Step
		err := r.whileFault(ctx, "reading the step that failed", func() (err error) {
			if err := injectedFault("failed step"); err != nil {
				return err
			}
			st, err = r.e.st.Step(ctx, r.in.ID, end.failed)
			return err
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return res, err
		}
		msg := "failed"
		if err == nil && st.Error != "" {
			msg = st.Error
		}
		res.Error = fmt.Sprintf("step %q failed: %s", end.failed, msg)
		if err == nil {
			if _, err := r.notify(ctx, notify.EventStep, "step."+end.failed, &st, manent.StatePending, "", ""); err != nil {
				return res, err
			}
		}
	case end.cancelled:
		res.State = manent.StateCancelled
		// The cancel request's reason ("superseded by …"), waiting for a
		// database that is away rather than ending "cancelled" for good.
		if err := r.whileFault(ctx, "reading why the deploy was cancelled", func() (err error) {
			res.Error, err = r.e.cancelReason(ctx, r.in.ID)
			return err
		}); err != nil {
			return res, err
		}
		if end.live {
			// Rollback disabled: what was activated stays, and says so.
			where := ""
			if len(r.in.Waves) > 0 {
				where = " on the waves activated before the cancel"
			}
			res.Error += "; the release stays live" + where + " (rollback is disabled)"
		}
	}
	if res.State != manent.StateSuccess {
		if err := r.settleWaves(ctx, res); err != nil {
			return res, err
		}
	}
	// One commit concludes the deploy, sets the workflow's attributes (its
	// outcome, for DBOS's own tools) and checkpoints this step.
	attrs := map[string]any{"outcome": string(res.State), "sha256": res.SHA256, "rollback": res.Rollback}
	err := r.e.conclude(ctx, r.in.ID, store.Outcome{
		State: res.State, Error: res.Error, Rollback: res.Rollback, SHA256: res.SHA256, At: time.Now(),
		Live: end.live && res.State != manent.StateSuccess,
	}, conclusion{quiet: r.quiet(), also: func(tx *sql.Tx) error {
		if err := dbos.SetWorkflowAttributesInTx(ctx, tx, r.in.ID, attrs, dbos.WithMergeAttributes()); err != nil {
			return err
		}
		return dbos.RecordStepOutcome(ctx, tx, res)
	}})
	return res, err
}

// quiet reports whether the deploy's ending has nothing to announce but
// the wake of its dependents: no callback, no chat message, no change
// ticket to close.
func (r *run) quiet() bool {
	d := r.in.Descriptor
	return !r.in.Waits.Change && (d == nil || (len(d.Callbacks) == 0 && (d.Notify == nil || len(d.Notify.Chat) == 0)))
}

// errCutByCancel ends a step that a cancel of its deploy stopped while it
// ran (cutOnCancel): the step is recorded ERROR with it, the deploy ends
// CANCELLED.
var errCutByCancel = errors.New("stopped: the deploy was cancelled")

// cancelPoll is how often a step that a cancel may cut reads its deploy's
// cancel flag. The flag is read from the database, so a cancel sent to
// any worker reaches the one running the step.
const cancelPoll = time.Second

// cutOnCancel returns a context that ends, with the cause errCutByCancel,
// when the deploy is cancelled while the step runs; stop ends the watch.
// Only steps that change nothing outside the deploy's work directory use it.
func (r *run) cutOnCancel(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(cancelPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if yes, err := r.e.st.CancelRequested(ctx, r.in.ID); err == nil && yes {
					cancel(errCutByCancel)
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(nil); <-done }
}
