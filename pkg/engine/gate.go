package engine

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"

	"github.com/manent-io/manent/pkg/itsm"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
)

// A deploy that must wait — for its start time (DELAYED), for the deploys
// it comes after (WAITING_DEPENDENCY) or for approvals (AWAITING_APPROVAL) —
// waits in a gate workflow, not in the partitioned deploy queue: a waiting
// workflow would hold its environment's slot (DBOS-NOTES sharp edge 5).
// The gate enqueues the deploy when every wait is over.

// Names of the gate.
const (
	GateQueue    = "manent-gates"
	GateWorkflow = "manent.gate"
	gateTopic    = "gate"
	// gatePoll bounds a wait for a message, so a missed wake-up costs at
	// most this long; deploys that finish wake their dependents at once.
	gatePoll = 5 * time.Minute
)

// gateMsg is a message to a gate: a wake-up (a dependency finished, an
// approval was recorded) or a cancel.
type gateMsg struct {
	Kind string `json:"kind"` // "wake" or "cancel"
	From string `json:"from,omitempty"`
}

func gateID(id string) string { return id + ".gate" }

// gateWorkflow waits out a deploy's waits, then enqueues it.
func (e *Engine) gateWorkflow(ctx dbos.Context, in plan.Input) (Result, error) {
	g := &gate{e: e, in: in}
	if in.Waits.At != nil {
		if done, res, err := g.delay(ctx); done || err != nil {
			return res, err
		}
	}
	if len(in.Waits.After) > 0 {
		if done, res, err := g.dependencies(ctx); done || err != nil {
			return res, err
		}
	}
	if in.Waits.Approvals != nil {
		if done, res, err := g.approvals(ctx); done || err != nil {
			return res, err
		}
	}
	if in.Waits.Change {
		if done, res, err := g.change(ctx); done || err != nil {
			return res, err
		}
	}
	if in.Waits.Approvals != nil {
		// A gate that had reached the queue under the previous release
		// replays its recorded steps as they were (DBOS patching).
		patched, err := dbos.Patch(ctx, "approval-order")
		if err != nil {
			return Result{}, err
		}
		if patched {
			if done, res, err := g.inApprovalOrder(ctx); done || err != nil {
				return res, err
			}
		}
	}
	if gateEnqueueHook != nil {
		gateEnqueueHook(in.ID)
	}
	ok, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		return g.advance(sctx, manent.StateEnqueued, "", in.Waits.Approvals != nil)
	}, dbos.WithStepName("gate:enqueue"), dbos.WithStepMaxRetries(5))
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return g.refused(ctx)
	}
	if _, err := dbos.RunWorkflow(ctx, e.deployWorkflow, in,
		dbos.WithQueue(e.queue), dbos.WithQueuePartitionKey(plan.PartitionKey(in.Application, in.Environment)),
		dbos.WithWorkflowID(in.ID)); err != nil {
		return Result{}, fmt.Errorf("enqueue %s: %w", in.ID, err)
	}
	return Result{State: manent.StateEnqueued}, nil
}

type gate struct {
	e  *Engine
	in plan.Input
}

// transition moves the deploy to state unless it is final or a cancel was
// asked for; it reports whether the deploy goes on.
func (g *gate) transition(ctx context.Context, state manent.State, reason string) (bool, error) {
	return g.advance(ctx, state, reason, false)
}

// advance is transition that, when unrejected is set, also stops at a
// rejection. The deploy's row is locked while it decides and writes
// (store.LockDeploymentTx), as a cancel and a verdict lock it: a rejection
// or a cancel committed a moment before the gate queues the deploy is seen
// here, one committed after is refused (store.ErrNotAwaitingApproval).
func (g *gate) advance(ctx context.Context, state manent.State, reason string, unrejected bool) (bool, error) {
	goes := false
	err := g.e.st.Tx(ctx, func(tx *sql.Tx) error {
		cur, cancel, err := g.e.st.LockDeploymentTx(ctx, tx, g.in.ID)
		if err != nil || cur.Final() || cancel {
			return err
		}
		if unrejected {
			as, err := g.e.st.ApprovalsTx(ctx, tx, g.in.ID)
			if err != nil || rejection(as) != "" {
				return err
			}
		}
		goes = true
		_, err = g.e.st.SetStateTx(ctx, tx, g.in.ID, state, reason)
		return err
	})
	return goes && err == nil, err
}

// refused ends a gate whose deploy was not queued: cancelled, or rejected
// at the last moment (advance), when it ends REJECTED without running.
func (g *gate) refused(ctx dbos.Context) (Result, error) {
	msg, err := dbos.RunAsStep(ctx, func(sctx context.Context) (string, error) {
		rec, err := g.e.st.Deployment(sctx, g.in.ID)
		if err != nil || rec.State.Final() || rec.CancelRequested {
			return "", err
		}
		as, err := g.e.st.Approvals(sctx, g.in.ID)
		if err != nil {
			return "", err
		}
		return rejection(as), nil
	}, dbos.WithStepName("gate:refused"), dbos.WithStepMaxRetries(5))
	if err != nil {
		return Result{}, err
	}
	if msg == "" {
		return Result{State: manent.StateCancelled}, nil
	}
	_, res, err := g.end(ctx, manent.StateRejected, msg)
	return res, err
}

// end finishes the deploy in a final state without running anything.
func (g *gate) end(ctx dbos.Context, state manent.State, msg string) (bool, Result, error) {
	_, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		return true, g.e.conclude(sctx, g.in.ID, store.Outcome{State: state, Error: msg})
	}, dbos.WithStepName("gate:end"), dbos.WithStepMaxRetries(5))
	return true, Result{State: state, Error: msg}, err
}

// wait receives the next message, or times out after d (at most
// gatePoll).
func (g *gate) wait(ctx dbos.Context, d time.Duration) (gateMsg, error) {
	return g.recv(ctx, min(d, gatePoll))
}

// recv receives the next message, or times out after d. DBOS records the
// deadline as a step before it waits: a worker restarted meanwhile waits
// only what is left of it.
func (g *gate) recv(ctx dbos.Context, d time.Duration) (gateMsg, error) {
	msg, err := dbos.Recv[gateMsg](ctx, gateTopic, d)
	if errors.Is(err, dbos.ErrTimeout) {
		return gateMsg{Kind: "timeout"}, nil
	}
	return msg, err
}

// stillWaiting is a step: false when the deploy was cancelled meanwhile.
func (g *gate) stillWaiting(ctx dbos.Context, name string) (bool, error) {
	return dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		rec, err := g.e.st.Deployment(sctx, g.in.ID)
		if err != nil {
			return false, err
		}
		return !rec.State.Final() && !rec.CancelRequested, nil
	}, dbos.WithStepName(name), dbos.WithStepMaxRetries(5))
}

// delayPoll, when set (tests), bounds each wait of a DELAYED gate as
// the releases before 2026-12-06 did (gatePoll), so that a test can leave
// a gate that waited so to this release.
var delayPoll atomic.Int64

// delay waits until schedule.at (DELAYED) in one durable wait, however
// far ahead it is: a cancel (Cancel's message) ends it at once, a wake-up
// meant for a later wait (an approval recorded early) makes it wait again
// for what is left. The steps are those of the releases that woke every
// gatePoll (a step reading the time left, then a Recv), only fewer: a
// gate that waited under such a release replays its recorded wakes and
// waits once for the rest.
func (g *gate) delay(ctx dbos.Context) (bool, Result, error) {
	at := *g.in.Waits.At
	for i := 0; ; i++ {
		remaining, err := dbos.RunAsStep(ctx, func(sctx context.Context) (time.Duration, error) {
			return time.Until(at), nil
		}, dbos.WithStepName(fmt.Sprintf("gate:delay-%d", i)))
		if err != nil {
			return false, Result{}, err
		}
		if remaining <= 0 {
			return false, Result{}, nil
		}
		// The wait ends at schedule.at, not the step's reading of the time
		// left later: the Recv records its deadline from its own clock
		// reading, after the step's commit (1.5 s late on a loaded
		// machine). Recorded once, the deadline is replayed as it is, so
		// this reading of the clock leaves a replay unchanged; the Recv
		// runs whenever the step said time is left, as it did the first
		// time.
		remaining = max(time.Until(at), time.Millisecond)
		if p := time.Duration(delayPoll.Load()); p > 0 {
			remaining = min(remaining, p)
		}
		msg, err := g.recv(ctx, remaining)
		if err != nil {
			return false, Result{}, err
		}
		if msg.Kind == "cancel" {
			return true, Result{State: manent.StateCancelled}, nil
		}
	}
}

// depStatus is what a dependency check finds.
type depStatus struct {
	Done   bool   `json:"done"`
	Failed string `json:"failed,omitempty"`
	Gone   bool   `json:"gone,omitempty"`
}

// dependencies waits until every deploy in `after` is final
// (WAITING_DEPENDENCY): all SUCCESS goes on, anything else is
// DEPENDENCY_FAILED.
func (g *gate) dependencies(ctx dbos.Context) (bool, Result, error) {
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (depStatus, error) {
			var waiting []string
			for _, dep := range g.in.Waits.After {
				rec, err := g.e.st.Deployment(sctx, dep)
				if errors.Is(err, store.ErrNotFound) {
					return depStatus{Failed: fmt.Sprintf("dependency %s does not exist", dep)}, nil
				}
				if err != nil {
					return depStatus{}, err
				}
				switch {
				case rec.State == manent.StateSuccess:
				case rec.State.Final():
					return depStatus{Failed: fmt.Sprintf("dependency %s ended %s", dep, rec.State)}, nil
				default:
					waiting = append(waiting, fmt.Sprintf("%s (%s)", dep, rec.State))
				}
			}
			if len(waiting) == 0 {
				return depStatus{Done: true}, nil
			}
			ok, err := g.transition(sctx, manent.StateWaitingDependency, "waiting for "+strings.Join(waiting, ", "))
			return depStatus{Gone: !ok}, err
		}, dbos.WithStepName(fmt.Sprintf("gate:dependencies-%d", i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return false, Result{}, err
		}
		switch {
		case st.Gone:
			return true, Result{State: manent.StateCancelled}, nil
		case st.Failed != "":
			return g.end(ctx, manent.StateDependencyFailed, st.Failed)
		case st.Done:
			return false, Result{}, nil
		}
		msg, err := g.wait(ctx, gatePoll)
		if err != nil {
			return false, Result{}, err
		}
		if msg.Kind == "cancel" {
			return true, Result{State: manent.StateCancelled}, nil
		}
	}
}

// approvalStatus is what an approval count finds.
type approvalStatus struct {
	Approved  bool          `json:"approved"`
	Rejected  string        `json:"rejected,omitempty"`
	Gone      bool          `json:"gone,omitempty"`
	Remaining time.Duration `json:"remaining"`
}

// approvals waits for the approvals (AWAITING_APPROVAL): enough → on,
// a rejection → REJECTED, the expiry → EXPIRED.
func (g *gate) approvals(ctx dbos.Context) (bool, Result, error) {
	rule := *g.in.Waits.Approvals
	deadline, err := dbos.RunAsStep(ctx, func(context.Context) (time.Time, error) {
		if rule.Expires <= 0 {
			return time.Time{}, nil
		}
		return time.Now().Add(rule.Expires).UTC(), nil
	}, dbos.WithStepName("gate:approval-deadline"))
	if err != nil {
		return false, Result{}, err
	}
	digest := plan.Digest(g.in)
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (approvalStatus, error) {
			// Counted under the deploy's row lock, in the transaction that
			// writes the reason, as AddApproval recounts: a verdict
			// recorded between a count and its write cannot be overwritten
			// by a reason that counts fewer.
			var out approvalStatus
			err := g.e.st.Tx(sctx, func(tx *sql.Tx) error {
				out = approvalStatus{}
				cur, cancel, err := g.e.st.LockDeploymentTx(sctx, tx, g.in.ID)
				if err != nil {
					return err
				}
				as, err := g.e.st.ApprovalsTx(sctx, tx, g.in.ID)
				if err != nil {
					return err
				}
				n, lapsed := g.e.countApprovals(g.in, as, digest)
				if msg := rejection(as); msg != "" {
					out.Rejected = msg
					return nil
				}
				if n >= rule.Count {
					out.Approved = true
					return nil
				}
				out.Remaining = time.Duration(1<<62 - 1)
				if !deadline.IsZero() {
					out.Remaining = time.Until(deadline)
				}
				if cur.Final() || cancel {
					out.Gone = true
					return nil
				}
				_, err = g.e.st.SetStateTx(sctx, tx, g.in.ID, manent.StateAwaitingApproval, approvalsReason(n, rule, deadline, lapsed))
				return err
			})
			return out, err
		}, dbos.WithStepName(fmt.Sprintf("gate:approvals-%d", i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return false, Result{}, err
		}
		switch {
		case st.Gone:
			return true, Result{State: manent.StateCancelled}, nil
		case st.Rejected != "":
			return g.end(ctx, manent.StateRejected, st.Rejected)
		case st.Approved:
			return false, Result{}, nil
		case st.Remaining <= 0:
			if gateExpireHook != nil {
				gateExpireHook(g.in.ID)
			}
			msg := fmt.Sprintf("approvals expired at %s without %s", deadline.Format(time.RFC3339), manent.Plural(rule.Count, "approval"))
			expired, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
				err := g.e.conclude(sctx, g.in.ID, store.Outcome{State: manent.StateExpired, Error: msg}, conclusion{also: func(tx *sql.Tx) error {
					// Under the deploy's row lock (the UPDATE above), as
					// AddApproval records a verdict: one recorded since
					// the count decides, once more.
					as, err := g.e.st.ApprovalsTx(sctx, tx, g.in.ID)
					if err != nil {
						return err
					}
					if n, _ := g.e.countApprovals(g.in, as, digest); rejection(as) != "" || n >= rule.Count {
						return errDecidedAtExpiry
					}
					return nil
				}})
				if errors.Is(err, errDecidedAtExpiry) {
					return false, nil
				}
				return err == nil, err
			}, dbos.WithStepName("gate:end"), dbos.WithStepMaxRetries(5))
			if err != nil || expired {
				return true, Result{State: manent.StateExpired, Error: msg}, err
			}
			continue
		}
		msg, err := g.wait(ctx, st.Remaining)
		if err != nil {
			return false, Result{}, err
		}
		if msg.Kind == "cancel" {
			return true, Result{State: manent.StateCancelled}, nil
		}
	}
}

// errDecidedAtExpiry stops the expiry of a deploy whose verdicts were
// recorded as its approval window ended: the gate counts them again.
var errDecidedAtExpiry = errors.New("decided as the approvals expired")

// gateEnqueueHook, when set (tests), runs before a gate enqueues its
// deploy; gateExpireHook before it ends its deploy EXPIRED.
var gateEnqueueHook, gateExpireHook func(id string)

// orderPoll is how often an approved deploy checks whether the older ones
// it lets go first are queued; orderWait is how long it waits for them.
const (
	orderPoll = 200 * time.Millisecond
	orderWait = 30 * time.Second
)

// inApprovalOrder keeps the submission order of approved deploys: an
// approved deploy is queued only after the older deploys of its
// environment that are approved too but still in their gate (approved a
// moment earlier; their gate is on its way to the queue). Otherwise the
// one approved second could run first and the first, which then finds a
// newer release current, would end ERROR at config (notOvertaken) for an
// order nobody chose. An older deploy that also waits for a change ticket
// is not waited for (its ticket may take hours), nor is any for longer
// than orderWait.
func (g *gate) inApprovalOrder(ctx dbos.Context) (bool, Result, error) {
	until, err := dbos.RunAsStep(ctx, func(context.Context) (time.Time, error) {
		return time.Now().Add(orderWait).UTC(), nil
	}, dbos.WithStepName("gate:order-deadline"))
	if err != nil {
		return false, Result{}, err
	}
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (orderStatus, error) {
			// A rejection that raced the approval (recorded before Approve
			// saw the count reached) still stops the deploy here, before
			// it is queued.
			as, err := g.e.st.Approvals(sctx, g.in.ID)
			if err != nil {
				return orderStatus{}, err
			}
			if msg := rejection(as); msg != "" {
				return orderStatus{Rejected: msg}, nil
			}
			older, err := g.approvedBefore(sctx)
			if err != nil || older == "" || time.Now().After(until) {
				return orderStatus{}, err
			}
			_, err = g.transition(sctx, manent.StateAwaitingApproval,
				fmt.Sprintf("approved; queued after %s, submitted earlier and approved too, which is being queued", older))
			return orderStatus{After: older}, err
		}, dbos.WithStepName(fmt.Sprintf("gate:order-%d", i)), dbos.WithStepMaxRetries(5))
		if err != nil {
			return false, Result{}, err
		}
		if st.Rejected != "" {
			return g.end(ctx, manent.StateRejected, st.Rejected)
		}
		if st.After == "" {
			return false, Result{}, nil
		}
		msg, err := g.wait(ctx, orderPoll)
		if err != nil {
			return false, Result{}, err
		}
		if msg.Kind == "cancel" {
			return true, Result{State: manent.StateCancelled}, nil
		}
	}
}

// approvedBefore returns the oldest deploy of the gate's environment that
// was submitted before it, still waits in its gate for approvals (not for
// a change ticket) and has all of them: it goes to the queue first.
func (g *gate) approvedBefore(ctx context.Context) (string, error) {
	me, err := g.e.st.Deployment(ctx, g.in.ID)
	if err != nil {
		return "", err
	}
	recs, _, err := g.e.st.List(ctx, store.Filter{Application: g.in.Application, Environment: g.in.Environment,
		States: []manent.State{manent.StateAwaitingApproval}, Limit: 500})
	if err != nil {
		return "", err
	}
	first := ""
	for _, r := range recs { // newest first
		if r.ID == g.in.ID || r.CreatedAt.After(me.CreatedAt) || (r.CreatedAt.Equal(me.CreatedAt) && r.ID > me.ID) {
			continue
		}
		var in plan.Input
		if json.Unmarshal(r.Input, &in) != nil || in.Waits.Approvals == nil || in.Waits.Change {
			continue
		}
		as, err := g.e.st.Approvals(ctx, r.ID)
		if err != nil {
			return "", err
		}
		if n, _ := g.e.countApprovals(in, as, plan.Digest(in)); n < in.Waits.Approvals.Count || rejection(as) != "" {
			continue
		}
		first = r.ID
	}
	return first, nil
}

// orderStatus is what one check of inApprovalOrder finds: the older
// deploy to let go first, or a rejection.
type orderStatus struct {
	After    string `json:"after,omitempty"`
	Rejected string `json:"rejected,omitempty"`
}

// approvalsPrefix begins every reason approvalsReason writes.
const approvalsPrefix = "approvals "

// approvalsReason is the reason of a deploy that waits for approvals: n
// of the rule's count, who may approve, the deadline (zero: none), and the
// approvals that no longer count. The gate and a recorded verdict
// (recountApprovals) both write it.
func approvalsReason(n int, rule plan.ApprovalRule, deadline time.Time, lapsed []string) string {
	reason := fmt.Sprintf(approvalsPrefix+"%d/%d", n, rule.Count)
	if len(rule.Approvers) > 0 && !(len(rule.Approvers) == 1 && rule.Approvers[0] == "*") {
		reason += " by " + strings.Join(rule.Approvers, ", ")
	}
	if !deadline.IsZero() {
		reason += expiresAt + deadline.Format(time.RFC3339)
	}
	return reason + lapsedSuffix(lapsed)
}

// lapsedSuffix ends the reason of a deploy or a wave waiting for
// approvals with those that no longer count (countApprovals' lapsed).
func lapsedSuffix(lapsed []string) string {
	if len(lapsed) == 0 {
		return ""
	}
	return "; approvals that no longer count: " + strings.Join(lapsed, "; ")
}

const expiresAt = ", expires at "

// reasonDeadline is the deadline an approvalsReason names (zero: none).
func reasonDeadline(reason string) time.Time {
	_, after, ok := strings.Cut(reason, expiresAt)
	if !ok {
		return time.Time{}
	}
	at, _, _ := strings.Cut(after, ";")
	t, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}
	}
	return t
}

// recountApprovals is AddApproval's recount for deploy in: under the row
// lock, right after a verdict is recorded, the reason the gate would
// write now — when the gate already wrote one of approvalsReason (its
// deadline is read there) and the deploy still waits for more approvals.
// A rejection, or the count reached, is left to the gate: it decides,
// and the reason stays until it does.
func (e *Engine) recountApprovals(ctx context.Context, in plan.Input, digest string) func(tx *sql.Tx, reason string) (string, error) {
	return func(tx *sql.Tx, reason string) (string, error) {
		if !strings.HasPrefix(reason, approvalsPrefix) {
			return "", nil // the gate has not counted yet: it will, under the lock
		}
		as, err := e.st.ApprovalsTx(ctx, tx, in.ID)
		if err != nil {
			return "", err
		}
		n, lapsed := e.countApprovals(in, as, digest)
		if rejection(as) != "" || n >= in.Waits.Approvals.Count {
			return "", nil
		}
		return approvalsReason(n, *in.Waits.Approvals, reasonDeadline(reason), lapsed), nil
	}
}

// rejection is the error of a deploy whose verdicts as hold a rejection
// (the first), "" when none does.
func rejection(as []manent.Approval) string {
	for _, a := range as {
		if a.Verdict == "reject" {
			msg := "rejected by " + a.Identity
			if a.Comment != "" {
				msg += ": " + a.Comment
			}
			return msg
		}
	}
	return ""
}

// countApprovals counts the approvals of as that count for deploy in now:
// given for the current plan digest, by approvers who could still give
// them — a static token revoked, or no longer an approver by the rule or
// by RBAC since a restart with a new configuration, lapses
// (admit.LapsedApprover). lapsed says, for each that does not count, why.
// A rollout wave's decisions carry no plan digest: they are counted with
// digest "" (countWaveApprovals), by the same approvers and the same rule.
func (e *Engine) countApprovals(in plan.Input, as []manent.Approval, digest string) (n int, lapsed []string) {
	var approvers []string
	if in.Waits.Approvals != nil {
		approvers = in.Waits.Approvals.Approvers
	}
	for _, a := range as {
		if a.Verdict != "approve" || a.PlanDigest != digest {
			continue
		}
		if why := e.cfg.Admitter.LapsedApprover(a.Identity, approvers, in.Application, in.Environment); why != "" {
			lapsed = append(lapsed, why)
			continue
		}
		n++
	}
	return n, lapsed
}

// Approve records by's approval or rejection a on what deploy id waits for
// and wakes the gate. The submitter cannot approve; an identity counts
// once; an approval given for another plan digest does not count.
func (e *Engine) Approve(ctx context.Context, id string, by manent.Identity, a manent.Approval) (*store.Record, error) {
	return e.decide(ctx, id, by, a, nil)
}

// ApproveFor is Approve for the verdict's caller that judged it for
// wave ("" for the deploy's own approval): when the deploy waits for
// something else by the time it is read here (the wave was approved
// elsewhere and the next one reached its approval in between), the verdict
// is refused (409) and nothing is recorded, rather than landing on what
// waits now.
func (e *Engine) ApproveFor(ctx context.Context, id string, by manent.Identity, a manent.Approval, wave string) (*store.Record, error) {
	return e.decide(ctx, id, by, a, &wave)
}

func (e *Engine) decide(ctx context.Context, id string, by manent.Identity, a manent.Approval, pin *string) (*store.Record, error) {
	a.Identity = by.Subject
	rec, err := e.st.Deployment(ctx, id)
	if err != nil {
		return nil, err
	}
	var in plan.Input
	if err := json.Unmarshal(rec.Input, &in); err != nil {
		return nil, err
	}
	waiting := ""
	if rec.State == manent.StatePending {
		if waiting, err = e.WaitingWave(ctx, id); err != nil {
			return nil, err
		}
	}
	if pin != nil && *pin != waiting && (waiting != "" || rec.State == manent.StateAwaitingApproval) {
		what := func(wave string) string {
			if wave == "" {
				return "its own approval"
			}
			return fmt.Sprintf("the approval of wave %q", wave)
		}
		return nil, manent.Errorf(manent.EConflict, "deploy %s moved on while this %s was checked: it was for %s, and %s waits now; nothing was recorded: read the deploy again and decide on what waits",
			id, a.Verdict, what(*pin), what(waiting))
	}
	if waiting != "" {
		return e.approveWave(ctx, rec, in, waiting, by, a)
	}
	if rec.State != manent.StateAwaitingApproval {
		return nil, manent.Errorf(manent.EConflict, "deploy %s is %s, not AWAITING_APPROVAL nor waiting for a wave's approval", id, rec.State)
	}
	if in.Waits.Approvals == nil {
		// AWAITING_APPROVAL for its change ticket only: the ITSM decides,
		// a verdict here would be recorded and not count.
		return nil, manent.Errorf(manent.EConflict, "deploy %s needs no approvals in manent: it waits for its change ticket to be approved in the ITSM (reject the change there, or cancel the deploy)", id)
	}
	if a.Identity == rec.Requester {
		return nil, manent.Errorf(manent.EForbidden, "%s submitted deploy %s and cannot approve or reject it", a.Identity, id)
	}
	if !by.Matches(in.Waits.Approvals.Approvers) {
		return nil, manent.Errorf(manent.EForbidden, "%s is not an approver of deploy %s (approvers: %s)", a.Identity, id,
			strings.Join(in.Waits.Approvals.Approvers, ", "))
	}
	digest := plan.Digest(in)
	if a.PlanDigest != "" && a.PlanDigest != digest {
		return nil, manent.Errorf(manent.EConflict, "the plan of deploy %s changed since it was reviewed (digest %s, now %s): review it again", id, a.PlanDigest, digest)
	}
	a.PlanDigest = digest
	if a.Verdict == "approve" {
		if err := e.notStale(ctx, rec); err != nil {
			return nil, err
		}
	}
	// Approved already: the gate is on its way to the queue (it may wait
	// there for an older approved deploy, inApprovalOrder) or waits for its
	// change ticket. A verdict now would be recorded and not count: refused.
	as, err := e.st.Approvals(ctx, id)
	if err != nil {
		return nil, err
	}
	if n, _ := e.countApprovals(in, as, digest); rejection(as) == "" && n >= in.Waits.Approvals.Count {
		if in.Waits.Change {
			return nil, manent.Errorf(manent.EConflict, "deploy %s already has its %s and waits for its change ticket in the ITSM: reject the change there, or cancel the deploy", id, manent.Plural(in.Waits.Approvals.Count, "approval"))
		}
		return nil, manent.Errorf(manent.EConflict, "deploy %s already has its %s and is on its way to the queue: cancel it to stop it", id, manent.Plural(in.Waits.Approvals.Count, "approval"))
	}
	if a.Time.IsZero() {
		a.Time = time.Now().UTC()
	}
	if err := e.st.AddApproval(ctx, id, a, e.recountApprovals(ctx, in, digest)); errors.Is(err, store.ErrAlreadyDecided) {
		return nil, manent.Errorf(manent.EConflict, "%s already decided on deploy %s: an identity counts once", a.Identity, id)
	} else if errors.Is(err, store.ErrNotAwaitingApproval) {
		// Queued (or ended) between the checks above and the verdict.
		state := manent.StateEnqueued
		if now, err := e.st.Deployment(ctx, id); err == nil {
			state = now.State
		}
		return nil, manent.Errorf(manent.EConflict, "deploy %s is %s, no longer AWAITING_APPROVAL: the verdict was not recorded", id, state)
	} else if err != nil {
		return nil, err
	}
	e.wake(id, "approval")
	return e.Refresh(ctx, id)
}

// notStale refuses to approve a deploy submitted before the one that made
// its environment's current release: it waited for its approval while a
// newer deploy went through, and approving it now would put the older
// release back over the newer one, without anyone asking for a rollback.
// Rejecting it is still possible; whoever wants that release back submits
// it again, through every check.
func (e *Engine) notStale(ctx context.Context, rec *store.Record) error {
	cur, err := e.outdatedRollback(ctx, rec.ID, rec.Application, rec.Environment, rec.RollbackOf)
	if err != nil {
		return err
	}
	if cur != nil {
		return manent.Errorf(manent.EConflict, "%s", outdatedRollbackError(rec.ID, rec.Version, rec.Application, rec.Environment, rec.RollbackOf, "approving it", *cur))
	}
	newer, err := e.newerCurrent(ctx, rec)
	if err != nil || newer == nil {
		return err
	}
	return manent.Errorf(manent.EConflict,
		"deploy %s (%s) was submitted before %s, which made %s %s/%s's current release: approving it would put %s back over %s. Reject it, and submit %s again if it should replace %s",
		rec.ID, rec.Version, newer.ID, newer.Version, rec.Application, rec.Environment,
		rec.Version, newer.Version, rec.Version, newer.Version)
}

// outdatedRollback returns the current release of a rollback's
// environment (SPEC §11.5) when it is no longer the release the rollback
// goes back from (rollback_of): another deploy became current since the
// rollback was submitted — while it waited for its approval or its change
// ticket, or finished between its submission checks and its queueing.
// Running the rollback would replace that release, which nobody asked it
// to replace. nil for a deploy that is no rollback, or one still in time.
func (e *Engine) outdatedRollback(ctx context.Context, id, application, environment, rollbackOf string) (*manent.Release, error) {
	if rollbackOf == "" {
		return nil, nil
	}
	cur, err := e.st.Current(ctx, application, environment)
	if err != nil || cur == nil || cur.DeploymentID == "" || cur.DeploymentID == rollbackOf || cur.DeploymentID == id {
		return nil, err
	}
	return cur, nil
}

// outdatedRollbackError explains outdatedRollback's refusal; doing is
// "approving it" or "running it".
func outdatedRollbackError(id, version, application, environment, rollbackOf, doing string, cur manent.Release) string {
	return fmt.Sprintf("rollback %s (%s) goes back from %s, but %s (%s) has become %s/%s's current release since: %s would replace %s, which it was not asked to replace. "+
		"Reject or cancel it, and run manent rollback %s %s again (or manent rollback %s %s --to %s) if %s should go",
		id, version, rollbackOf, cur.DeploymentID, cur.Version, application, environment, doing, cur.Version,
		application, environment, application, environment, version, cur.Version)
}

// notOvertaken is notStale when an approved deploy starts: approved while
// a newer deploy of its environment was queued or running, it must not put
// its older release back over the newer one that succeeded meanwhile.
// Only deploys that waited for approvals (or a change ticket): whoever
// approved may not have seen the newer one. A deploy that waited for its
// start time (schedule.at) or for other deploys (after) runs as it was
// asked to; one that waited for nothing runs in submission order.
func (e *Engine) notOvertaken(ctx context.Context, in plan.Input) error {
	if in.Waits.Approvals == nil && !in.Waits.Change {
		return nil
	}
	rec, err := e.st.Deployment(ctx, in.ID)
	if err != nil {
		return err
	}
	newer, err := e.newerCurrent(ctx, rec)
	if err != nil || newer == nil {
		return err
	}
	return plugin.Permanent(fmt.Errorf(
		"deploy %s (%s) was submitted before %s, which became %s/%s's current release while this one waited for its approval: running it would put %s back over %s. Submit %s again (or run manent rollback --to %s) if it should replace %s",
		rec.ID, rec.Version, newer.ID, rec.Application, rec.Environment,
		rec.Version, newer.Version, rec.Version, rec.Version, newer.Version))
}

// newerCurrent returns the deploy that made rec's environment's current
// release if it was submitted after rec, else nil.
func (e *Engine) newerCurrent(ctx context.Context, rec *store.Record) (*store.Record, error) {
	cur, err := e.st.Current(ctx, rec.Application, rec.Environment)
	if err != nil || cur == nil || cur.DeploymentID == "" || cur.DeploymentID == rec.ID {
		return nil, err
	}
	newer, err := e.st.Deployment(ctx, cur.DeploymentID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil // removed by retention: nothing to compare with
	}
	if err != nil {
		return nil, err
	}
	if !newer.CreatedAt.After(rec.CreatedAt) {
		return nil, nil
	}
	return newer, nil
}

// wake sends a gate a wake-up; a lost one costs at most gatePoll.
func (e *Engine) wake(id, from string) {
	if err := e.sendWake(id, from); err != nil {
		e.log.Warn("wake gate", "deploy", id, "error", err)
	}
}

func (e *Engine) sendWake(id, from string) error {
	return dbos.Send(e.dbos, gateID(id), gateMsg{Kind: "wake", From: from}, gateTopic)
}

// wakeGates wakes the gate of every deploy that waits in one
// (WAITING_DEPENDENCY, AWAITING_APPROVAL), and every running deploy that
// waits for a rollout wave's approval (PENDING, its step
// approval[<wave>] running: WaitingWave), when this worker starts: a
// restart with a new configuration (a token revoked, an approver moved out
// of a group, another approvals rule) would otherwise leave a reason that
// counts lapsed approvals until the next wake, up to gatePoll. A gate (or
// a run) recounts (or reads the time, its dependencies, its change) and
// waits again: a wake more is harmless, and every worker starting wakes
// them all, wherever they run (the message waits in the database for the
// next receive, on any worker, also for a gate not dequeued yet). A run
// that waits for nothing on waveApprovalTopic gets no message: it would
// wait there until the run's next wave wait, and wake it once for
// nothing. A DELAYED gate is not woken: its wait until schedule.at depends
// on no configuration (what comes after it counts afresh), and a wake
// would only make it read the time and wait again — a long delay stays one
// wait (TestLongDelayIsOneWait). A deploy whose gate has no workflow
// (ended meanwhile: DBOS refuses a message to a workflow it does not know,
// and sends none) is skipped.
func (e *Engine) wakeGates(ctx context.Context) {
	recs, err := e.st.UnfinishedBrief(ctx)
	if err != nil {
		e.log.Warn("wake the gates of waiting deploys: list them", "error", err)
		return
	}
	for _, r := range recs {
		switch r.State {
		case manent.StateWaitingDependency, manent.StateAwaitingApproval:
		case manent.StatePending:
			e.wakeWave(ctx, r.ID)
			continue
		default:
			continue
		}
		e.logStartWake(e.sendWake(r.ID, "start"), "wake the gate of a waiting deploy", r.ID)
	}
}

// logStartWake logs what a start-up wake of deploy id's workflow met
// (wakeGates): a deploy without a workflow (its gate not started yet, or
// ended) is no fault.
func (e *Engine) logStartWake(err error, what, id string, attrs ...any) {
	switch {
	case errors.Is(err, dbos.ErrNonExistentWorkflow):
		e.log.Debug(what+": it has no workflow", "deploy", id)
	case err != nil:
		e.log.Warn(what, append(append([]any{"deploy", id}, attrs...), "error", err)...)
	}
}

// wakeWave wakes running deploy id when it waits for a wave's approval
// (wakeGates).
func (e *Engine) wakeWave(ctx context.Context, id string) {
	wave, err := e.WaitingWave(ctx, id)
	if err != nil {
		e.log.Warn("wake a deploy waiting for a wave's approval: read its steps", "deploy", id, "error", err)
		return
	}
	if wave == "" {
		return
	}
	e.logStartWake(e.sendWaveWake(id, "start"), "wake a deploy waiting for a wave's approval", id, "wave", wave)
}

// sendWaveWake wakes run id where it waits on waveApprovalTopic (a wave's
// approval, a freeze of its regions, an observation).
func (e *Engine) sendWaveWake(id, from string) error {
	return dbos.Send(e.dbos, id, gateMsg{Kind: "wake", From: from}, waveApprovalTopic)
}

// wakeDependents wakes the gates of deploys waiting on id.
func (e *Engine) wakeDependents(ctx context.Context, id string) {
	ids, err := e.st.Waiting(ctx, manent.StateWaitingDependency, `"`+id+`"`)
	if err != nil {
		e.log.Warn("find dependents", "deploy", id, "error", err)
		return
	}
	for _, dep := range ids {
		e.wake(dep, id)
	}
}

// enqueueGate starts the gate of a waiting deploy in tx.
func (e *Engine) enqueueGate(in plan.Input, tx *sql.Tx) error {
	opts := []dbos.EnqueueOption{
		dbos.WithEnqueueWorkflowID(gateID(in.ID)),
		dbos.WithEnqueueApplicationVersion(WorkflowVersion),
	}
	if tx != nil {
		opts = append(opts, dbos.WithEnqueueTransaction(tx))
	}
	_, err := dbos.Enqueue[Result](e.dbos, GateQueue, GateWorkflow, in, opts...)
	return err
}

// StepChangeOpen and StepChangeClose are the change-management steps.
const (
	StepChangeOpen  = manent.StepChangeOpen
	StepChangeClose = manent.StepChangeClose
)

// changeOpenRetries is how often change:open is tried again after a
// failure that may pass (docs/itsm.md: 6 attempts in all).
const changeOpenRetries = 5

// change opens the deploy's ITSM change and waits for its approval
// (AWAITING_APPROVAL): approved → on, rejected (or closed, cancelled) →
// REJECTED. No ticket, no deploy: a change that cannot be opened ends the
// deploy ERROR.
func (g *gate) change(ctx dbos.Context) (bool, Result, error) {
	p := g.e.cfg.ITSM
	if p == nil {
		return g.end(ctx, manent.StateError, "a change ticket is required but "+g.e.here()+" has no ITSM provider (itsm.url)")
	}
	// The step's attempts as DBOS counts them, and its backoff (DBOS's
	// default ceiling, 5 s, or retry_base when longer), for the record of
	// an attempt another follows (tries.retry).
	runs, ceiling := 0, max(5*time.Second, g.e.cfg.RetryBase)
	ch, err := dbos.RunAsStep(ctx, func(sctx context.Context) (itsm.Change, error) {
		runs++
		try := tries{n: runs, of: changeOpenRetries + 1, base: g.e.cfg.RetryBase, max: ceiling}
		start := time.Now()
		prev, err := g.e.st.StepStarted(sctx, g.in.ID, StepChangeOpen, start)
		if err != nil {
			return itsm.Change{}, err
		}
		c, err := p.Open(sctx, changeRequest(g.in))
		end := store.StepEnd{State: manent.StepSuccess, Output: c, StartedAt: start, Counted: true}
		if err != nil {
			end.State, end.Output = manent.StepError, nil
			// An attempt whose answer was lost may have opened the change:
			// the mark stays for the attempts after it, and the
			// change-close workflow looks the change up.
			if maybeOpened(prev) || mayHaveReached(err) {
				end.Output = changeOpenFailed{MaybeOpened: true}
				err = fmt.Errorf("%w; the ITSM may have opened a change for this deploy: manent asks for it again (same Idempotency-Key) and closes it once the ITSM answers", err)
			}
			end.Error = err.Error()
			now := time.Now()
			if next, line, ok := try.retry(err, now); ok {
				end.State, end.NextAttemptAt, end.MaxAttempts = manent.StepRunning, &next, try.of
				end.Logs = []store.LogEntry{{Time: now, Text: line}}
			}
		}
		if _, serr := g.e.st.StepFinished(sctx, g.in.ID, StepChangeOpen, end); serr != nil {
			return c, serr
		}
		return c, err
	}, dbos.WithStepName("gate:"+StepChangeOpen), dbos.WithStepMaxRetries(changeOpenRetries), dbos.WithStepBaseInterval(g.e.cfg.RetryBase),
		dbos.WithStepMaxInterval(ceiling),
		dbos.WithStepRetryPredicate(func(err error) bool { return !plugin.IsPermanent(err) }))
	if err != nil {
		if ctx.Err() != nil {
			return false, Result{}, err
		}
		done, res, err2 := g.end(ctx, manent.StateError, fmt.Sprintf("step %q failed: %s", StepChangeOpen, stepFailure(err)))
		if err2 != nil {
			return done, res, err2
		}
		return done, res, g.closeMaybeOpened(ctx)
	}
	// A gate that was polling its change under the previous release polls
	// on as it did (DBOS patching).
	patched, err := dbos.Patch(ctx, "change-wait-2")
	if err != nil {
		return false, Result{}, err
	}
	if !patched {
		return g.changeWait1(ctx, p, ch)
	}
	return g.changeWait(ctx, p, ch.ID)
}

// closeMaybeOpened starts the change-close workflow when change:open
// failed but may have opened a change. The deploy's announcement does so
// too when the gate's end concluded it, but a deploy cancelled while
// change:open waited was announced before the step was marked, and ending
// the gate changed nothing: no one else would close that change. Both may
// ask; the workflow runs once. (After the gate's last step, so gates that
// ended under the previous release replay as they ran.)
func (g *gate) closeMaybeOpened(ctx dbos.Context) error {
	maybe, err := dbos.RunAsStep(ctx, func(sctx context.Context) (bool, error) {
		return g.e.changeToClose(sctx, g.in.ID)
	}, dbos.WithStepName("gate:change-maybe-opened"), dbos.WithStepMaxRetries(5), dbos.WithStepBaseInterval(g.e.cfg.RetryBase))
	if err != nil || !maybe {
		return err
	}
	return g.e.enqueueChangeClose(ctx, g.in.ID)
}

// changeRequest is the change deploy in asks the ITSM for; the same for
// every attempt and for the change-close workflow's look-up.
func changeRequest(in plan.Input) itsm.Request {
	return itsm.Request{DeployID: in.ID, Application: in.Application, Environment: in.Environment,
		Version: in.Version, Requester: in.Requester,
		Summary: fmt.Sprintf("deploy %s %s to %s (%s)", in.Application, in.Version, in.Environment, in.ID)}
}

// changeOpenFailed is the output of a change:open that failed after a
// request may have reached the ITSM and opened the change, its answer lost
// (a timeout, a connection cut, a 5xx, an unreadable answer).
type changeOpenFailed struct {
	MaybeOpened bool `json:"maybe_opened"`
}

// maybeOpened reports whether change:open st is marked changeOpenFailed.
func maybeOpened(st manent.Step) bool {
	var o changeOpenFailed
	return st.State != manent.StepSuccess && json.Unmarshal(st.Output, &o) == nil && o.MaybeOpened
}

// mayHaveReached reports whether a failed open may have opened the change:
// not when the ITSM refused it (a 4xx, a protocol error: permanent), nor
// when the connection was never made.
func mayHaveReached(err error) bool {
	var op *net.OpError
	return !plugin.IsPermanent(err) && !(errors.As(err, &op) && op.Op == "dial")
}

// Gate outcomes of a change poll that are not ITSM states.
const (
	changeGone       = "gone"       // the deploy ended or a cancel was asked for
	changeUnanswered = "unanswered" // asking the ITSM failed
)

// changePoll is what one poll of a change finds: an ITSM state (pending,
// approved, rejected, closed, cancelled or one the protocol does not
// name), changeGone or changeUnanswered with the error, and when.
type changePoll struct {
	State string    `json:"state"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// changeWait polls the deploy's change id until it is decided. A poll
// first checks that the deploy still waits: one cancelled meanwhile —
// even while change:open waited for the ITSM, before the conclusion could
// know of a ticket — has its change closed (CANCELLED) by the gate, then
// the gate ends. A failed poll (a timeout, a 5xx, any error) shows in the
// deploy's reason and the gate asks again at the next poll; only when the
// ITSM has failed every poll for ChangeGiveUp does the deploy end ERROR.
// A state the protocol does not name is waited out, the reason says so.
func (g *gate) changeWait(ctx dbos.Context, p itsm.Provider, id string) (bool, Result, error) {
	poll, giveUp := g.e.changePoll(), g.e.changeGiveUp()
	var failingSince time.Time
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (changePoll, error) {
			now := time.Now().UTC()
			rec, err := g.e.st.Deployment(sctx, g.in.ID)
			if err != nil {
				return changePoll{}, err
			}
			if rec.State.Final() || rec.CancelRequested {
				return changePoll{State: changeGone, At: now}, nil
			}
			c, err := p.Get(sctx, id)
			if err != nil && sctx.Err() != nil {
				return changePoll{}, err // interrupted: not a failed poll
			}
			out := changePoll{State: c.State, At: now}
			var reason string
			switch {
			case err != nil:
				out.State, out.Error = changeUnanswered, manent.ClipText(err.Error(), 600)
				reason = fmt.Sprintf("change %s: asking the ITSM failed (%s); asking again in %s", id, out.Error, poll)
				if !failingSince.IsZero() {
					reason += fmt.Sprintf(" (failing since %s; the deploy ends ERROR at %s)",
						failingSince.Format(time.RFC3339), failingSince.Add(giveUp).Format(time.RFC3339))
				}
			case c.State == itsm.Approved, c.State == itsm.Rejected, c.State == itsm.Closed, c.State == itsm.Cancelled:
				return out, nil
			case c.State == itsm.Pending:
				reason = fmt.Sprintf("change %s pending approval in the ITSM", id)
			default:
				out.State = manent.ClipText(c.State, 100)
				reason = fmt.Sprintf("change %s is %q in the ITSM, a state manent does not know (it knows pending, approved, rejected, closed, cancelled): waiting for it to be approved; asking again in %s", id, out.State, poll)
			}
			ok, err := g.transition(sctx, manent.StateAwaitingApproval, reason)
			if !ok && err == nil {
				return changePoll{State: changeGone, At: now}, nil
			}
			return out, err
		}, dbos.WithStepName(fmt.Sprintf("gate:change-%d", i)), dbos.WithStepMaxRetries(5), dbos.WithStepBaseInterval(g.e.cfg.RetryBase))
		if err != nil {
			return false, Result{}, err
		}
		switch st.State {
		case changeGone:
			return g.closeChangeOfGone(ctx)
		case itsm.Approved:
			return false, Result{}, nil
		case itsm.Rejected:
			return g.end(ctx, manent.StateRejected, fmt.Sprintf("change %s was rejected in the ITSM", id))
		case itsm.Closed, itsm.Cancelled:
			return g.end(ctx, manent.StateRejected, fmt.Sprintf("change %s was %s in the ITSM before it was approved", id, st.State))
		case changeUnanswered:
			if failingSince.IsZero() {
				failingSince = st.At
			}
			if st.At.Sub(failingSince) >= giveUp {
				return g.end(ctx, manent.StateError, fmt.Sprintf(
					"change %s: asking the ITSM about it has failed since %s, for %s (itsm.give_up_after); the last error: %s",
					id, failingSince.Format(time.RFC3339), giveUp, st.Error))
			}
		default:
			failingSince = time.Time{}
		}
		msg, err := g.wait(ctx, poll)
		if err != nil {
			return false, Result{}, err
		}
		if msg.Kind == "cancel" {
			return g.closeChangeOfGone(ctx)
		}
	}
}

// closeChangeOfGone ends the gate of a deploy that ended (or is being
// cancelled) while it waited for its change: the change is closed by its
// own workflow, as the deploy's announcement does — both may ask, it runs
// once. The conclusion may have looked for a ticket before change:open
// recorded one.
func (g *gate) closeChangeOfGone(ctx dbos.Context) (bool, Result, error) {
	if err := g.e.enqueueChangeClose(ctx, g.in.ID); err != nil {
		return false, Result{}, err
	}
	return true, Result{State: manent.StateCancelled}, nil
}

// changeWait1 is changeWait as the previous release ran it, for the gates
// that were polling their change when their worker was upgraded.
func (g *gate) changeWait1(ctx dbos.Context, p itsm.Provider, ch itsm.Change) (bool, Result, error) {
	for i := 0; ; i++ {
		st, err := dbos.RunAsStep(ctx, func(sctx context.Context) (string, error) {
			c, err := p.Get(sctx, ch.ID)
			if err != nil {
				return "", err
			}
			switch c.State {
			case itsm.Approved, itsm.Rejected:
				return c.State, nil
			}
			ok, err := g.transition(sctx, manent.StateAwaitingApproval, fmt.Sprintf("change %s pending approval in the ITSM", ch.ID))
			if !ok {
				return "gone", err
			}
			return itsm.Pending, err
		}, dbos.WithStepName(fmt.Sprintf("gate:change-%d", i)), dbos.WithStepMaxRetries(5), dbos.WithStepBaseInterval(g.e.cfg.RetryBase))
		if err != nil {
			return false, Result{}, err
		}
		switch st {
		case "gone":
			return true, Result{State: manent.StateCancelled}, nil
		case itsm.Approved:
			return false, Result{}, nil
		case itsm.Rejected:
			return g.end(ctx, manent.StateRejected, fmt.Sprintf("change %s was rejected in the ITSM", ch.ID))
		}
		msg, err := g.wait(ctx, g.e.changePoll())
		if err != nil {
			return false, Result{}, err
		}
		if msg.Kind == "cancel" {
			return true, Result{State: manent.StateCancelled}, nil
		}
	}
}

// changeToClose reports whether deploy id has a change to close: one
// change:open recorded, or one it may have opened (its answers lost).
func (e *Engine) changeToClose(ctx context.Context, id string) (bool, error) {
	c, st, err := e.changeOf(ctx, id)
	return c != "" || maybeOpened(st), err
}

// changeOf returns the change deploy id's change:open recorded ("" when
// none), and that step (its zero value when it never ran) for
// maybeOpened. A storage fault is an error, never "no change": read as
// one, it left the ticket open in the ITSM for good.
func (e *Engine) changeOf(ctx context.Context, id string) (string, manent.Step, error) {
	st, err := e.st.Step(ctx, id, StepChangeOpen)
	if errors.Is(err, store.ErrNotFound) {
		return "", manent.Step{}, nil
	}
	if err != nil {
		return "", manent.Step{}, err
	}
	if st.State != manent.StepSuccess {
		return "", st, nil
	}
	var c itsm.Change
	if err := json.Unmarshal(st.Output, &c); err != nil {
		return "", st, fmt.Errorf("change:open's output: %w", err)
	}
	return c.ID, st, nil
}

func (e *Engine) changePoll() time.Duration {
	if e.cfg.ChangePoll > 0 {
		return e.cfg.ChangePoll
	}
	return 30 * time.Second
}

func (e *Engine) changeGiveUp() time.Duration {
	if e.cfg.ChangeGiveUp > 0 {
		return e.cfg.ChangeGiveUp
	}
	return 24 * time.Hour
}

// approveWave records a decision on the rollout wave a running deploy
// waits on, with the same rules as approvals before the deploy.
func (e *Engine) approveWave(ctx context.Context, rec *store.Record, in plan.Input, wave string, by manent.Identity, a manent.Approval) (*store.Record, error) {
	if a.Identity == rec.Requester {
		return nil, manent.Errorf(manent.EForbidden, "%s submitted deploy %s and cannot approve or reject its waves", a.Identity, rec.ID)
	}
	if in.Waits.Approvals != nil && !by.Matches(in.Waits.Approvals.Approvers) {
		return nil, manent.Errorf(manent.EForbidden, "%s is not an approver of deploy %s (approvers: %s)", a.Identity, rec.ID,
			strings.Join(in.Waits.Approvals.Approvers, ", "))
	}
	if a.Time.IsZero() {
		a.Time = time.Now().UTC()
	}
	if err := e.st.AddWaveApproval(ctx, rec.ID, wave, WaveApprovalPrefix+"["+wave+"]", a, e.recountWaveApprovals(ctx, in, wave)); errors.Is(err, store.ErrAlreadyDecided) {
		return nil, manent.Errorf(manent.EConflict, "%s already decided on wave %s of deploy %s: an identity counts once", a.Identity, wave, rec.ID)
	} else if errors.Is(err, store.ErrNotAwaitingApproval) {
		// Decided (approved, rejected, expired) or cancelled between the
		// check of the waiting wave and this verdict: it would not count.
		return nil, manent.Errorf(manent.EConflict, "wave %s of deploy %s no longer waits for approval (decided or cancelled a moment ago): nothing was recorded; see 'manent status %s'", wave, rec.ID, rec.ID)
	} else if err != nil {
		return nil, err
	}
	if err := e.sendWaveWake(rec.ID, "approval"); err != nil {
		e.log.Warn("wake a deploy waiting for a wave approval", "deploy", rec.ID, "error", err)
	}
	return e.Refresh(ctx, rec.ID)
}

// recountWaveApprovals is AddWaveApproval's recount for wave of deploy
// in, as recountApprovals is AddApproval's: under the row lock, right
// after a decision is recorded, the reason the run would write now (and
// the wave's row with it) — when the run already wrote one of
// waveApprovalsReason for this wave (its deadline is read there) and the
// wave still waits for more approvals. A rejection, or the count reached,
// is left to the run: it decides, and the reason stays until it does.
func (e *Engine) recountWaveApprovals(ctx context.Context, in plan.Input, wave string) func(tx *sql.Tx, reason string) (string, error) {
	return func(tx *sql.Tx, reason string) (string, error) {
		i := slices.IndexFunc(in.Waves, func(w plan.Wave) bool { return w.Name == wave })
		deadline := reasonDeadline(reason)
		if i < 0 || !strings.HasPrefix(reason, waveApprovalsPrefix(wave)) || deadline.IsZero() {
			return "", nil // the run has not counted yet: it will, under the lock
		}
		as, err := e.st.WaveApprovalsTx(ctx, tx, in.ID, wave)
		if err != nil {
			return "", err
		}
		rule := waveRule(in)
		n, lapsed := e.countApprovals(in, as, "")
		if rejection(as) != "" || n >= rule.Count {
			return "", nil
		}
		now := waveApprovalsReason(wave, n, rule, deadline, lapsed)
		return now, e.st.AppendRolloutTx(ctx, tx, in.ID, waveState(&in.Waves[i], WaveApproval, now))
	}
}

// Decided returns where identity already recorded verdict in deploy id:
// "" for the deploy's own approval, else the names of the rollout waves,
// sorted.
func (e *Engine) Decided(ctx context.Context, id, identity, verdict string) ([]string, error) {
	var out []string
	own, err := e.st.Approvals(ctx, id)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(own, func(a manent.Approval) bool { return a.Identity == identity && a.Verdict == verdict }) {
		out = append(out, "")
	}
	waves, err := e.st.AllWaveApprovals(ctx, id)
	if err != nil {
		return nil, err
	}
	for wave, as := range waves {
		if slices.ContainsFunc(as, func(a manent.Approval) bool { return a.Identity == identity && a.Verdict == verdict }) {
			out = append(out, wave)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Recorded returns the verdict identity already recorded on deploy id's
// own approval (wave "") or on that rollout wave, nil when none: a verdict
// sent again after its answer was lost (a 503 after the commit) is
// answered with it rather than refused as a second one.
func (e *Engine) Recorded(ctx context.Context, id, wave, identity string) (*manent.Approval, error) {
	var as []manent.Approval
	var err error
	if wave == "" {
		as, err = e.st.Approvals(ctx, id)
	} else {
		as, err = e.st.WaveApprovals(ctx, id, wave)
	}
	if err != nil {
		return nil, err
	}
	for i := range as {
		if as[i].Identity == identity {
			return &as[i], nil
		}
	}
	return nil, nil
}
