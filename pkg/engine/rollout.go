package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// Wave state names shown in status and `rollout` events.
const (
	WavePending    = "pending"
	WaveDeploying  = "deploying"
	WaveObserving  = "observing"
	WaveHealthy    = "healthy"
	WaveFailed     = "failed"
	WaveRolledBack = "rolled-back"
	WaveApproval   = manent.WaveAwaitingApproval
)

// Health-gate outcomes shown per wave (WaveStatus.Gate).
const (
	GatePassed = "passed"
	GateFailed = "failed"
)

// WaveApprovalPrefix names the step that waits for a wave's approval:
// "approval[rest]".
const WaveApprovalPrefix = "approval"

// waveApprovalTopic is the DBOS topic a deploy receives wave approvals on.
const waveApprovalTopic = "wave-approval"

// HealthGate is the step that checks a wave after its observation time.
const HealthGate = "health-gate"

// waveStepName is a plan step's name within a wave: "deploy[canary]".
func waveStepName(step, wave string) string { return step + "[" + wave + "]" }

// baseStep strips the engine's prefixes and the wave from a step name:
// "rollback:deploy[canary]" → "deploy". A health gate counts as post-test.
func baseStep(name string) string {
	name = strings.TrimPrefix(strings.TrimPrefix(name, CheckpointPrefix), RollbackPrefix)
	if i := strings.IndexByte(name, '['); i > 0 && strings.HasSuffix(name, "]") {
		name = name[:i]
	}
	if name == HealthGate || name == WaveApprovalPrefix {
		return manent.StepPostTest
	}
	return name
}

// unit is one step of the execution sequence, with its wave if any.
type unit struct {
	step manent.PlanStep
	wave *plan.Wave
	gate bool // the wave's health gate, after its observation time
}

// sequence lays out the plan: steps before `deploy` once, then for each
// wave the steps from `deploy` to `activation` and the wave's health gate,
// then the steps after `activation` once.
func sequence(p manent.Plan, waves []plan.Wave) []unit {
	var out []unit
	if len(waves) == 0 {
		for _, ps := range p.Steps {
			out = append(out, unit{step: ps})
		}
		return out
	}
	first, last := -1, -1
	for i, ps := range p.Steps {
		if ps.Name == manent.StepDeploy && first < 0 {
			first = i
		}
		if ps.Name == manent.StepActivation {
			last = i
		}
	}
	if first < 0 || last < first {
		for _, ps := range p.Steps {
			out = append(out, unit{step: ps})
		}
		return out
	}
	for _, ps := range p.Steps[:first] {
		out = append(out, unit{step: ps})
	}
	for i := range waves {
		w := &waves[i]
		for _, ps := range p.Steps[first : last+1] {
			ps.Name = waveStepName(ps.Name, w.Name)
			out = append(out, unit{step: ps, wave: w})
		}
		out = append(out, unit{step: manent.PlanStep{Name: waveStepName(HealthGate, w.Name), MaxRetries: 0}, wave: w, gate: true})
	}
	for _, ps := range p.Steps[last+1:] {
		out = append(out, unit{step: ps})
	}
	return out
}

// PlanRowsWaves is PlanRows for a rollout: the step table a deploy starts with.
func PlanRowsWaves(p manent.Plan, waves []plan.Wave) []string {
	names := []string{manent.StepConfig, manent.StepNotifyStarted}
	for _, u := range sequence(p, waves) {
		if compensable(baseStep(u.step.Name)) {
			names = append(names, CheckpointPrefix+u.step.Name)
		}
		names = append(names, u.step.Name)
	}
	return append(names, manent.StepCleanup)
}

// observeStatus is what one check of a wave's observation finds.
type observeStatus struct {
	Cancelled bool          `json:"cancelled,omitempty"`
	Remaining time.Duration `json:"remaining"`
}

// observe waits out a wave's observation time (wave.observe) before its
// health gate, or until the deploy is cancelled: Cancel wakes it (a
// message on waveApprovalTopic), so a cancelled canary is compensated at
// once, not after the observation. It reports whether the deploy was
// cancelled. The wait is durable: a crash resumes it with the time left.
func (r *run) observe(ctx dbos.Context, w *plan.Wave) (bool, error) {
	if w.Observe <= 0 {
		return false, nil
	}
	_, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		until := time.Now().Add(w.Observe).UTC().Truncate(time.Second)
		if err := r.whileFault(sctx, "recording a wave's observation", func() error {
			return r.e.st.AppendRollout(sctx, r.in.ID, manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent,
				State: WaveObserving, Message: "observing until " + until.Format(time.RFC3339), ObserveUntil: &until})
		}); err != nil {
			return false, err
		}
		r.waitReason(sctx, fmt.Sprintf("%s%s, then its health gate runs", observedPrefix(w.Name), until.Format(time.RFC3339)))
		return true, nil
	}, dbos.WithStepName("observe["+w.Name+"]"), dbos.WithStepMaxRetries(5))
	if err != nil {
		return false, err
	}
	// A deploy that was already sleeping through this observation under
	// the previous release keeps its durable sleep (DBOS patching): its
	// recorded steps replay as they were.
	patched, err := dbos.Patch(ctx, "observe-wakes-on-cancel")
	if err != nil {
		return false, err
	}
	if !patched {
		dbos.LeaveWorkerSlot(ctx) // until parked returns
		_, err = dbos.Sleep(ctx, w.Observe)
		return false, err
	}
	until, err := dbos.RunAsStep(ctx, func(context.Context) (time.Time, error) {
		return time.Now().Add(w.Observe), nil
	}, dbos.WithStepName("observe-until["+w.Name+"]"))
	if err != nil {
		return false, err
	}
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (observeStatus, error) {
			var cancel bool
			err := r.whileFault(sctx, "reading the cancel flag during a wave's observation", func() (err error) {
				if err := injectedFault("observation"); err != nil {
					return err
				}
				cancel, err = r.e.st.CancelRequested(sctx, r.in.ID)
				return err
			})
			return observeStatus{Cancelled: cancel, Remaining: time.Until(until)}, err
		}, dbos.WithStepName(fmt.Sprintf("observe[%s]-%d", w.Name, i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return false, err
		}
		if st.Cancelled {
			return true, nil
		}
		if st.Remaining <= 0 {
			return false, nil
		}
		dbos.LeaveWorkerSlot(ctx) // until parked returns
		if _, err := dbos.Recv[gateMsg](ctx, waveApprovalTopic, min(st.Remaining, gatePoll)); err != nil && !errors.Is(err, dbos.ErrTimeout) {
			return false, err
		}
	}
}

// waitReason records why the running deploy waits between waves (an
// observation, a freeze) as its reason; called from inside the step that
// starts the wait, cleared by run.parked once it goes on.
func (r *run) waitReason(ctx context.Context, why string) {
	if _, err := r.e.st.SetState(ctx, r.in.ID, manent.StatePending, why); err != nil {
		// The wave's row says it; the deploy goes on.
		r.e.log.Warn("record why a deploy waits", "deploy", r.in.ID, "reason", why, "error", err)
	}
}

// observedPrefix and frozenPrefix start the reason of a deploy whose wave
// is observed, or waits for a freeze of its regions.
func observedPrefix(wave string) string { return "wave " + wave + " is observed until " }

func frozenPrefix(wave string) string { return "wave " + wave + " waits for freeze " }

// waveEvent records a wave's state, and the health gate's outcome when
// given; called from inside steps.
func (r *run) waveEvent(ctx context.Context, w *plan.Wave, state, msg string, gate ...string) {
	if w == nil {
		return
	}
	ws := waveState(w, state, msg)
	if len(gate) > 0 {
		ws.Gate = gate[0]
	}
	if err := r.e.st.AppendRollout(ctx, r.in.ID, ws); err != nil {
		// The wave's state shows late (at its next change); the deploy goes on.
		r.e.log.Warn("record a wave's state", "deploy", r.in.ID, "wave", w.Name, "state", state, "error", err)
	}
}

// waveState is the `rollout` event of wave w in state, with msg.
func waveState(w *plan.Wave, state, msg string) manent.WaveStatus {
	return manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent, State: state, Message: msg}
}

// settleWaves gives a final state to the waves a deploy that did not
// succeed left in progress (deploying, observing, awaiting approval, or
// shown rolled back by an undo whose step did not succeed): its
// deploy failed and was not rolled back (rollback off, or the rollback
// failed), or it was cancelled. Without it `status` would show such a wave
// deploying for ever. Its read of the waves waits for a database that is
// away (whileFault), and fails the conclusion (retried as a DBOS step)
// rather than leave them so.
func (r *run) settleWaves(ctx context.Context, res Result) error {
	if len(r.in.Waves) == 0 {
		return nil
	}
	var recorded []manent.WaveStatus
	if err := r.whileFault(ctx, "reading the waves' states", func() (err error) {
		if err := injectedFault("waves"); err != nil {
			return err
		}
		recorded, err = r.e.st.Rollout(ctx, r.in.ID)
		return err
	}); err != nil {
		return fmt.Errorf("read the waves' states: %w", err)
	}
	msg := res.Error
	switch {
	case res.State == manent.StateCancelled:
		msg = "the deploy was cancelled during this wave"
	case res.Rollback == manent.RollbackFailed:
		msg += "; the rollback failed"
	case res.Rollback == manent.RollbackNone:
		msg += "; not rolled back"
	}
	for _, ws := range recorded {
		switch ws.State {
		case WaveDeploying, WaveObserving, WaveApproval:
		case WaveRolledBack:
			// The undo says so before its step's end is saved: a worker
			// that died between the two, then an undo run again that
			// failed, left the wave shown undone while it runs the
			// release.
			if r.undone[waveStepName(manent.StepDeploy, ws.Name)] {
				continue
			}
		default:
			continue
		}
		for i := range r.in.Waves {
			if r.in.Waves[i].Name == ws.Name {
				r.waveEvent(ctx, &r.in.Waves[i], WaveFailed, msg, ws.Gate)
			}
		}
	}
	return nil
}

// RolloutStatus overlays the recorded wave states on the deploy's waves,
// with each wave's approval rule and the decisions recorded on it
// (decided, by wave name).
func RolloutStatus(input json.RawMessage, recorded []manent.WaveStatus, decided map[string][]manent.Approval) []manent.WaveStatus {
	var in plan.Input
	if json.Unmarshal(input, &in) != nil || len(in.Waves) == 0 {
		return recorded
	}
	byName := map[string]manent.WaveStatus{}
	for _, w := range recorded {
		byName[w.Name] = w
	}
	out := make([]manent.WaveStatus, 0, len(in.Waves))
	for _, w := range in.Waves {
		st, ok := byName[w.Name]
		if !ok {
			st = manent.WaveStatus{Name: w.Name, Targets: w.Targets, Percent: w.Percent, State: WavePending}
		}
		if w.Observe > 0 {
			st.Observe = w.Observe.String()
		}
		st.ObserveLeftSeconds = int(st.ObserveLeft(time.Now()).Round(time.Second).Seconds())
		if w.Approval {
			st.ApprovalsRequired = waveRule(in).Count
			st.Approvals = decided[w.Name]
		}
		out = append(out, st)
	}
	return out
}

// waitWaveFreeze holds a wave while a freeze covers its targets (regions):
// the wave waits, durably, until the freeze reopens, and its status says so.
//
// A cancel ends the wait at once (true): the deploy is compensated like a
// cancel between waves. It listens on waveApprovalTopic, where a cancel
// wakes it, and checks the deploy's cancel flag at each wake.
func (r *run) waitWaveFreeze(ctx dbos.Context, w *plan.Wave) (bool, error) {
	if !r.e.cfg.Admitter.Governed() || len(w.Targets) == 0 {
		return false, nil
	}
	var patched *bool
	for i := 0; ; i++ {
		wait, err := dbos.RunAsStep(ctx, func(sctx context.Context) (time.Duration, error) {
			f, err := r.e.cfg.Admitter.Freeze(sctx, r.in, w.Targets)
			if err != nil || f == nil {
				return 0, err
			}
			r.waveEvent(sctx, w, WavePending, fmt.Sprintf("waiting: freeze %q until %s", f.Name, f.ReopensAt.UTC().Format(time.RFC3339)))
			r.waitReason(sctx, fmt.Sprintf("%s%q of its regions until %s", frozenPrefix(w.Name), f.Name, f.ReopensAt.UTC().Format(time.RFC3339)))
			return time.Until(f.ReopensAt), nil
		}, dbos.WithStepName(fmt.Sprintf("freeze[%s]-%d", w.Name, i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return false, err
		}
		if wait <= 0 {
			return false, nil
		}
		if patched == nil {
			// A deploy that was already sleeping through a freeze under
			// the previous release keeps its durable sleeps (DBOS
			// patching): its recorded steps replay as they were.
			p, err := dbos.Patch(ctx, "freeze-wait-wakes-on-cancel")
			if err != nil {
				return false, err
			}
			patched = &p
		}
		if !*patched {
			dbos.LeaveWorkerSlot(ctx) // until parked returns
			if _, err := dbos.Sleep(ctx, min(wait, time.Hour)); err != nil {
				return false, err
			}
			continue
		}
		cancel, err := dbos.RunAsStep(ctx, func(sctx context.Context) (cancel bool, err error) {
			err = r.whileFault(sctx, "reading the cancel flag during a freeze", func() (err error) {
				cancel, err = r.e.st.CancelRequested(sctx, r.in.ID)
				return err
			})
			return cancel, err
		}, dbos.WithStepName(fmt.Sprintf("freeze[%s]-cancel-%d", w.Name, i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return false, err
		}
		if cancel {
			return true, nil
		}
		dbos.LeaveWorkerSlot(ctx) // until parked returns
		if _, err := dbos.Recv[gateMsg](ctx, waveApprovalTopic, min(wait, gatePoll)); err != nil && !errors.Is(err, dbos.ErrTimeout) {
			return false, err
		}
	}
}

// waveApprovalStatus is what a count of a wave's approvals finds.
type waveApprovalStatus struct {
	Cancelled bool          `json:"cancelled,omitempty"`
	Approved  bool          `json:"approved"`
	Rejected  string        `json:"rejected,omitempty"`
	Remaining time.Duration `json:"remaining"`
}

// waveRule is the approval rule of a wave of in: the deploy's approval
// rule when it has one, else one approval by anyone allowed to approve,
// within 24 h.
func waveRule(in plan.Input) plan.ApprovalRule {
	rule := plan.ApprovalRule{Count: 1, Expires: 24 * time.Hour}
	if a := in.Waits.Approvals; a != nil {
		rule = *a
		if rule.Count < 1 {
			rule.Count = 1
		}
		if rule.Expires <= 0 {
			rule.Expires = 24 * time.Hour
		}
	}
	return rule
}

// waitWaveApproval holds a wave until it is approved (the deploy stays
// PENDING; its status and the wave say why it waits). A rejection or the
// expiry fails the deploy at that wave: the started waves are compensated.
func (r *run) waitWaveApproval(ctx dbos.Context, w *plan.Wave) (string, error) {
	name := WaveApprovalPrefix + "[" + w.Name + "]"
	rule := waveRule(r.in)
	deadline, err := dbos.RunAsStep(ctx, func(sctx context.Context) (time.Time, error) {
		at := time.Now()
		err := r.whileFault(sctx, "recording that a wave awaits approval", func() error {
			_, err := r.e.st.StepStarted(sctx, r.in.ID, name, at)
			return err
		})
		return at.Add(rule.Expires).UTC(), err
	}, dbos.WithStepName(name+":start"), dbos.WithStepMaxRetries(5))
	if err != nil {
		return "", err
	}
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (waveApprovalStatus, error) {
			var st waveApprovalStatus
			err := r.whileFault(sctx, "counting a wave's approvals", func() (err error) {
				if err := injectedFault("wave approvals"); err != nil {
					return err
				}
				st, err = r.countWaveApprovals(sctx, w, name, rule, deadline)
				return err
			})
			return st, err
		}, dbos.WithStepName(fmt.Sprintf("%s-%d", name, i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return "", err
		}
		if st.Approved {
			return "", nil
		}
		if st.Cancelled {
			return errWaveCancelled, nil
		}
		if st.Rejected != "" {
			return st.Rejected, nil
		}
		dbos.LeaveWorkerSlot(ctx) // until parked returns
		if _, err := dbos.Recv[gateMsg](ctx, waveApprovalTopic, min(st.Remaining, gatePoll)); err != nil && !errors.Is(err, dbos.ErrTimeout) {
			return "", err
		}
	}
}

// countWaveApprovals is one check of a wave awaiting approval (step name,
// until deadline): the deploy cancelled, the wave rejected, approved or
// expired — each recorded on the step — or still waiting. It counts under
// the deploy's row lock, in the transaction that writes the reason and the
// wave's row, as AddWaveApproval recounts (recountWaveApprovals): a
// decision recorded between a count and its write cannot be overwritten by
// a reason that counts fewer. What it decides ends the step in that
// transaction too: AddWaveApproval refuses a decision on a wave whose
// step no longer runs.
func (r *run) countWaveApprovals(sctx context.Context, w *plan.Wave, name string, rule plan.ApprovalRule, deadline time.Time) (waveApprovalStatus, error) {
	var out waveApprovalStatus
	err := r.e.st.Tx(sctx, func(tx *sql.Tx) error {
		out = waveApprovalStatus{}
		_, cancel, err := r.e.st.LockDeploymentTx(sctx, tx, r.in.ID)
		if err != nil {
			return err
		}
		var as []manent.Approval
		if !cancel {
			if as, err = r.e.st.WaveApprovalsTx(sctx, tx, r.in.ID, w.Name); err != nil {
				return err
			}
		}
		n, lapsed := r.e.countApprovals(r.in, as, "")
		var end store.StepEnd
		switch {
		case cancel:
			out.Cancelled = true
			end = store.StepEnd{State: manent.StepSkipped, Error: "cancelled", Counted: true}
		case rejection(as) != "":
			out.Rejected = "wave " + w.Name + " " + rejection(as)
			end = store.StepEnd{State: manent.StepError, Error: out.Rejected, Counted: true}
		case n >= rule.Count:
			out.Approved = true
			end = store.StepEnd{State: manent.StepSuccess, Output: as, Counted: true}
		default:
			if out.Remaining = time.Until(deadline); out.Remaining <= 0 {
				out.Rejected = fmt.Sprintf("the approval of wave %s expired at %s", w.Name, deadline.Format(time.RFC3339))
				end = store.StepEnd{State: manent.StepError, Error: out.Rejected, Counted: true}
				break
			}
			reason := waveApprovalsReason(w.Name, n, rule, deadline, lapsed)
			if err := r.e.st.AppendRolloutTx(sctx, tx, r.in.ID, waveState(w, WaveApproval, reason)); err != nil {
				return err
			}
			_, err = r.e.st.SetStateTx(sctx, tx, r.in.ID, manent.StatePending, reason)
			return err
		}
		// Decided: the step ends in this transaction, under the lock, so
		// a decision recorded after finds the wave no longer waiting
		// (store.ErrNotAwaitingApproval) rather than being answered 200
		// and left uncounted — a rejection after the count was reached
		// would otherwise have been accepted while the wave went on.
		if _, err := r.e.st.StepFinishedTx(sctx, tx, r.in.ID, name, end); err != nil {
			return err
		}
		if out.Approved {
			_, err = r.e.st.SetStateTx(sctx, tx, r.in.ID, manent.StatePending, "")
		}
		return err
	})
	if err != nil {
		return waveApprovalStatus{}, err
	}
	return out, nil
}

// waveApprovalsPrefix begins every reason waveApprovalsReason writes for
// wave.
func waveApprovalsPrefix(wave string) string { return "wave " + wave + " awaits approval " }

// waveApprovalsReason is the reason of a deploy whose wave waits for its
// approvals: n of the rule's count, the deadline, and the approvals that
// no longer count (countApprovals), as approvalsReason says them for the
// deploy's own.
func waveApprovalsReason(wave string, n int, rule plan.ApprovalRule, deadline time.Time, lapsed []string) string {
	return fmt.Sprintf(waveApprovalsPrefix(wave)+"%d/%d"+expiresAt+"%s", n, rule.Count, deadline.Format(time.RFC3339)) + lapsedSuffix(lapsed)
}

// errWaveCancelled is what waitWaveApproval answers for a cancelled deploy.
const errWaveCancelled = "\x00cancelled"

// WaitingWave returns the wave a running deploy waits on for approval (""
// when none), or the error of its read: a decision on a wave taken from a
// failed read as "no wave waits" refused an approval (409) that was due,
// or answered a verdict as already recorded (200).
func (e *Engine) WaitingWave(ctx context.Context, id string) (string, error) {
	if err := injectedFault("waiting wave"); err != nil {
		return "", err
	}
	steps, err := e.st.Steps(ctx, id)
	if err != nil {
		return "", err
	}
	for _, s := range steps {
		if s.State == manent.StepRunning && strings.HasPrefix(s.Name, WaveApprovalPrefix+"[") {
			return strings.TrimSuffix(strings.TrimPrefix(s.Name, WaveApprovalPrefix+"["), "]"), nil
		}
	}
	return "", nil
}
