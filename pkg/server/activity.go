package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/store"
)

// maxActivityLimit bounds ?limit= of GET /api/v1/activity.
const maxActivityLimit = 10_000

// handleActivity serves GET /api/v1/activity: every deploy running or
// waiting now that the caller may read (?application= and ?environment=
// narrow it), grouped by environment, each with why it waits; ?limit=
// and ?from= cut each environment's list to a page (the web page shows 50
// of thousands), total counting them all.
func (s *Server) handleActivity(w http.ResponseWriter, r *http.Request) {
	p, scope, ok := s.authenticateScope(w, r)
	if !ok {
		return
	}
	from, err := intParam(r, "from", 0, math.MaxInt32, 0, "the number of deploys of each environment to skip (0 or more)")
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	limit, err := intParam(r, "limit", 1, maxActivityLimit, 0, fmt.Sprintf("how many deploys of each environment to list (1 to %d)", maxActivityLimit))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	recs, err := s.st.UnfinishedBrief(r.Context())
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	// The brief records have no saved input: the rare deploy queued
	// behind a newer one is read whole, to tell whether it waited for an
	// approval.
	slots := queueSlots(recs, func(rec store.Record) bool {
		full, err := s.st.Deployment(r.Context(), rec.ID)
		return err == nil && waitedForApproval(*full)
	})
	stalled, err := s.eng.OnDeadWorkers(r.Context())
	if err != nil {
		s.log.Warn("deploys on dead workers", "error", err)
	}
	requeued, err := s.requeued(r.Context(), recs)
	if err != nil {
		s.log.Warn("deploys taken back to the queue", "error", err)
	}
	var gates map[string]store.Worker
	if slices.ContainsFunc(recs, func(r store.Record) bool { return gated(r.State) }) {
		if gates, err = s.eng.GatesOnSilentWorkers(r.Context()); err != nil {
			s.log.Warn("waiting deploys on dead workers", "error", err)
		}
	}
	groups := map[string][]api.ActivityItem{}
	for _, rec := range recs {
		if !scope.has(rec.Application, rec.Environment) || s.cfg.Guard.Authorize(p, PermRead, rec.Application, rec.Environment) != nil {
			continue
		}
		it := api.ActivityItem{
			ID: rec.ID, Application: rec.Application, Environment: rec.Environment, Version: rec.Version,
			State: rec.State, Requester: rec.Requester, CreatedAt: rec.CreatedAt, StartedAt: rec.StartedAt,
			Reason: rec.Reason,
		}
		if rec.State == manent.StateDelayed && it.Reason == "" {
			// Made DELAYED by a release that wrote no reason (rare): the
			// brief record has no input.
			if full, err := s.st.Deployment(r.Context(), rec.ID); err == nil {
				it.Reason = delayedReason(full.Input)
			}
		}
		if sl, ok := slots[rec.ID]; ok {
			it.QueuePosition, it.Ahead, it.AheadState = sl.position, sl.ahead, sl.aheadState
			if it.Reason == "" {
				it.Reason = sl.reason
			}
		}
		if rec.State == manent.StatePending {
			steps, err := s.st.Steps(r.Context(), rec.ID)
			if err != nil {
				writeError(w, r, s.log, err)
				return
			}
			if st, ok := runningStep(steps); ok {
				it.Step, it.StepAttempts = st.Name, st.Attempts
				if st.Retrying() {
					it.StepNextAttemptAt, it.StepMaxAttempts = st.NextAttemptAt, st.MaxAttempts
				}
			}
			if rec.CancelRequested {
				it.Reason = cancelRequestedReason(steps)
			}
			if wk, ok := stalled[rec.ID]; ok {
				it.Reason = s.deadWorkerReason(wk, it.Reason)
			}
			if from, ok := requeued[rec.ID]; ok {
				it.Queued, it.Step, it.StepAttempts, it.StepNextAttemptAt, it.StepMaxAttempts = true, "", 0, nil, 0
				it.Reason = requeuedReason(rec.Application, rec.Environment, from, rec.CancelRequested)
			}
		}
		if wk, ok := gates[rec.ID]; ok && gated(rec.State) {
			it.Reason = s.gateWorkerReason(wk, it.Reason)
		}
		groups[rec.Environment] = append(groups[rec.Environment], it)
	}
	out := api.ActivityResult{Environments: []api.ActivityGroup{}}
	for env, items := range groups {
		slices.SortStableFunc(items, func(a, b api.ActivityItem) int {
			return cmp.Or(
				cmp.Compare(a.Application, b.Application),
				cmp.Compare(stateRank(a.State), stateRank(b.State)),
				cmp.Compare(a.QueuePosition, b.QueuePosition),
				a.CreatedAt.Compare(b.CreatedAt),
			)
		})
		g := api.ActivityGroup{Environment: env, Items: items, Total: len(items)}
		g.Items = g.Items[min(from, len(items)):]
		if limit > 0 && len(g.Items) > limit {
			g.Items = g.Items[:limit]
		}
		out.Environments = append(out.Environments, g)
	}
	slices.SortFunc(out.Environments, func(a, b api.ActivityGroup) int { return cmp.Compare(a.Environment, b.Environment) })
	writeJSON(w, http.StatusOK, out)
}

// stateRank orders an environment's activity: running first, then the
// queue, then the earlier waiting states.
func stateRank(st manent.State) int {
	switch st {
	case manent.StatePending:
		return 0
	case manent.StateEnqueued:
		return 1
	case manent.StateAwaitingApproval:
		return 2
	case manent.StateWaitingDependency:
		return 3
	case manent.StateDelayed:
		return 4
	}
	return 5
}

// runningStep returns the step a running deploy is in.
func runningStep(steps []manent.Step) (manent.Step, bool) {
	for i := len(steps) - 1; i >= 0; i-- {
		if steps[i].State == manent.StepRunning {
			return steps[i], true
		}
	}
	return manent.Step{}, false
}

// queueSlot is where an ENQUEUED deploy stands in its
// application/environment.
type queueSlot struct {
	position   int // counting the running deploy: 1 is the next to run
	ahead      string
	aheadState manent.State
	reason     string
}

// queueSlots places every ENQUEUED deploy of recs in the line of its
// application/environment (one deploy at a time per partition): running
// deploys first, then the queued ones by submission. waited says whether
// a deploy waited for an approval or a change ticket, for one whose saved
// input recs lack (store.UnfinishedBrief); nil: recs have it.
func queueSlots(recs []store.Record, waited func(store.Record) bool) map[string]queueSlot {
	if waited == nil {
		waited = waitedForApproval
	}
	type partition struct{ app, env string }
	lines := map[partition][]store.Record{}
	var order []partition
	for _, r := range recs {
		if r.State != manent.StatePending && r.State != manent.StateEnqueued {
			continue
		}
		k := partition{r.Application, r.Environment}
		if _, ok := lines[k]; !ok {
			order = append(order, k)
		}
		lines[k] = append(lines[k], r)
	}
	out := map[string]queueSlot{}
	for _, k := range order {
		line := lines[k]
		slices.SortStableFunc(line, func(a, b store.Record) int {
			return cmp.Or(
				cmp.Compare(stateRank(a.State), stateRank(b.State)),
				a.CreatedAt.Compare(b.CreatedAt),
				cmp.Compare(a.ID, b.ID),
			)
		})
		for i, r := range line {
			if r.State != manent.StateEnqueued {
				continue
			}
			sl := queueSlot{position: i + 1}
			if i > 0 {
				sl.ahead, sl.aheadState = line[i-1].ID, line[i-1].State
				sl.reason = fmt.Sprintf("queued: %s in %s/%s, behind %s (%s)", ordinal(i+1), k.app, k.env, sl.ahead, sl.aheadState)
				if ahead := line[i-1]; ahead.CreatedAt.After(r.CreatedAt) && waited(r) {
					sl.reason += fmt.Sprintf(", submitted after this deploy: if it succeeds, this one ends ERROR at its config step rather than put %s back over %s",
						r.Version, ahead.Version)
				}
			} else {
				sl.reason = fmt.Sprintf("queued: %s in %s/%s, waiting for a free worker slot", ordinal(i+1), k.app, k.env)
			}
			out[r.ID] = sl
		}
	}
	return out
}

// cancelRequestedReason is what a running deploy whose cancel was asked
// for still waits for: its running step ends first — it is never cut short
// (SPEC §5), except the artifacts download, which writes no target and
// stops within a second — then the deploy ends CANCELLED. When that step
// is the last the deploy runs (only cleanup and closing its change ticket
// follow, which a cancel does not stop), nothing is left to cancel: the
// deploy ends as the step does.
func cancelRequestedReason(steps []manent.Step) string {
	for i := len(steps) - 1; i >= 0; i-- {
		st := steps[i]
		if st.State != manent.StepRunning {
			continue
		}
		if st.Name == manent.StepArtifacts {
			return "cancel requested: the artifact download stops within a second (it writes no target), then the deploy ends CANCELLED"
		}
		if strings.HasPrefix(st.Name, engine.WaveApprovalPrefix+"[") {
			return fmt.Sprintf("cancel requested: the wait of %s ends now, then the deploy ends CANCELLED (what it changed is rolled back when rollback is enabled)", st.Name)
		}
		if strings.HasPrefix(st.Name, engine.RollbackPrefix) {
			return fmt.Sprintf("cancel requested: %s, rolling back what the deploy changed, completes first, then the deploy ends CANCELLED", st.Name)
		}
		if !stepsLeft(steps[i+1:]) {
			return fmt.Sprintf("cancel requested during the last step, %s: a running step is never cut short and no step is left to stop, so the deploy ends as %s does", st.Name, st.Name)
		}
		return fmt.Sprintf("cancel requested: step %s ends first (a running step is never cut short), then the deploy ends CANCELLED", st.Name)
	}
	return "cancel requested: the deploy ends CANCELLED at its next step"
}

// stepsLeft reports whether steps (those after the running one) hold a
// step still to run that a cancel stops: not cleanup, closing the change
// ticket or a compensation, which run whatever the cancel.
func stepsLeft(steps []manent.Step) bool {
	for _, st := range steps {
		if st.State != manent.StepPending {
			continue
		}
		switch {
		case st.Name == manent.StepCleanup, st.Name == engine.StepChangeClose, strings.HasPrefix(st.Name, engine.RollbackPrefix):
		default:
			return true
		}
	}
	return false
}

// explainWait fills the reason an ENQUEUED deploy waits, when nothing else
// gave one: its place in the queue of its application/environment and the
// deploy ahead of it; of a DELAYED one without a reason, its start time
// (delayedReason). Of a running deploy it says why it goes on after a
// cancel, or that its worker is dead.
func (s *Server) explainWait(ctx context.Context, rec *store.Record) {
	d, cancelRequested := &rec.Deployment, rec.CancelRequested
	if d.State == manent.StateDelayed && d.Reason == "" {
		d.Reason = delayedReason(rec.Input)
	}
	if d.State == manent.StatePending {
		if cancelRequested {
			d.Reason = cancelRequestedReason(d.Steps)
		}
		if stalled, err := s.eng.OnDeadWorkers(ctx); err == nil {
			if wk, ok := stalled[d.ID]; ok {
				d.Reason = s.deadWorkerReason(wk, d.Reason)
			}
		}
		if from, ok := s.requeuedFrom(ctx, d.ID); ok {
			d.Queued = true
			d.Reason = requeuedReason(d.Application, d.Environment, from, cancelRequested)
			interruptedSteps(d.Steps, from)
		}
		return
	}
	if gated(d.State) {
		if gates, err := s.eng.GatesOnSilentWorkers(ctx); err == nil {
			if wk, ok := gates[d.ID]; ok {
				d.Reason = s.gateWorkerReason(wk, d.Reason)
			}
		}
		return
	}
	if d.State != manent.StateEnqueued || d.Reason != "" {
		return
	}
	line, err := s.st.Queue(ctx, d.Application, d.Environment)
	if err != nil {
		s.log.Warn("queue position", "deploy", d.ID, "error", err)
		return
	}
	if sl, ok := queueSlots(line, nil)[d.ID]; ok {
		d.Reason = sl.reason
	}
}

// gated says a deploy in state st waits in its gate workflow.
func gated(st manent.State) bool {
	return st == manent.StateDelayed || st == manent.StateWaitingDependency || st == manent.StateAwaitingApproval
}

// gateWorkerReason says a waiting deploy's gate ran on worker w, which is
// silent or gone: nothing updates its reason (was, written by that gate)
// until another worker resumes the gate.
func (s *Server) gateWorkerReason(w store.Worker, was string) string {
	ago := time.Since(w.LastSeen)
	if ago < 10*time.Second {
		ago = ago.Round(100 * time.Millisecond)
	} else {
		ago = ago.Round(time.Second)
	}
	silent := "silent for " + ago.String()
	if w.State != store.WorkerAlive {
		silent = w.State
	}
	then := "it resumes on another worker within workers.dead_after"
	if !s.st.Postgres() {
		then = "this server resumes it when it starts again"
	}
	r := fmt.Sprintf("its gate ran on worker %s, %s: %s", w.ID, silent, then)
	if was != "" {
		r += " (last recorded: " + was + ")"
	}
	return r
}

// requeued returns the deploys of recs that run (PENDING) in manent's
// tables but wait in the deploy queue (Engine.Requeued), each with the
// worker they were taken over from; nil when none of recs runs.
func (s *Server) requeued(ctx context.Context, recs []store.Record) (map[string]string, error) {
	if !slices.ContainsFunc(recs, func(r store.Record) bool { return r.State == manent.StatePending }) {
		return nil, nil
	}
	return s.eng.Requeued(ctx)
}

// requeuedFrom returns the worker deploy id was taken over from when DBOS
// holds it back in the deploy queue (Engine.Requeued).
func (s *Server) requeuedFrom(ctx context.Context, id string) (string, bool) {
	requeued, err := s.eng.Requeued(ctx, id)
	if err != nil {
		return "", false
	}
	from, ok := requeued[id]
	return from, ok
}

// interruptedSteps lists the steps a deploy taken over from worker from
// was running there as pending again, saying so: its workflow waits in the
// queue, and they run again from the start once a worker takes it (their
// rows stay RUNNING until then).
func interruptedSteps(steps []manent.Step, from string) {
	for i := range steps {
		if steps[i].State != manent.StepRunning {
			continue
		}
		steps[i].State, steps[i].StartedAt = manent.StepPending, nil
		steps[i].Error = fmt.Sprintf("interrupted on %s (taken over); runs again from the start once a worker takes the deploy", from)
	}
}

// requeuedReason says a running deploy taken over from worker from waits
// in the queue for a free worker slot: it is first in its
// application/environment (it holds the partition), and its interrupted
// step runs again from the start once a worker takes it.
func requeuedReason(app, env, from string, cancelRequested bool) string {
	r := fmt.Sprintf("queued: 1st in %s/%s, waiting for a free worker slot (taken over from %s)", app, env, from)
	if cancelRequested {
		r += "; cancel requested: the deploy ends CANCELLED at its next step"
	}
	return r
}

// delayedReason is the reason of a DELAYED deploy that has none in its
// row, from its saved input: the "schedule.at …" submission writes since
// f5a0be8 (plan.Waits.FirstReason). A release before it wrote none, and
// its gate sleeps until that time without writing one.
func delayedReason(input json.RawMessage) string {
	var in struct {
		Waits plan.Waits `json:"waits"`
	}
	if json.Unmarshal(input, &in) != nil {
		return ""
	}
	return in.Waits.FirstReason()
}

// delayedStateEvent is e with the reason of delayedReason when it is the
// `state` event of a DELAYED deploy that carries none: a release before
// f5a0be8 stored {"state":"DELAYED"}, and a follower of its deploy saw
// DELAYED and nothing after it until the deploy's time came.
func delayedStateEvent(e store.Event, input json.RawMessage) store.Event {
	if e.Type != store.EventState || !bytes.Contains(e.Data, []byte(manent.StateDelayed)) {
		return e
	}
	var sd store.StateData
	if json.Unmarshal(e.Data, &sd) != nil || sd.State != manent.StateDelayed || sd.Reason != "" {
		return e
	}
	if sd.Reason = delayedReason(input); sd.Reason == "" {
		return e
	}
	if b, err := json.Marshal(sd); err == nil {
		e.Data = b
	}
	return e
}

// waitedForApproval says whether deploy r waited for approvals or a change
// ticket (engine.notOvertaken): such a deploy, overtaken by a newer one
// that succeeds, does not run.
func waitedForApproval(r store.Record) bool {
	var in struct {
		Waits plan.Waits `json:"waits"`
	}
	return json.Unmarshal(r.Input, &in) == nil && (in.Waits.Approvals != nil || in.Waits.Change)
}

// ordinal prints 1st, 2nd, 3rd, 4th, 11th, 21st…
func ordinal(n int) string {
	suffix := "th"
	switch n % 100 {
	case 11, 12, 13:
	default:
		switch n % 10 {
		case 1:
			suffix = "st"
		case 2:
			suffix = "nd"
		case 3:
			suffix = "rd"
		}
	}
	return fmt.Sprintf("%d%s", n, suffix)
}

// readScope is the ?application=&environment= filter of a read across
// deploys: each a name as in deploy.yml (422 otherwise). A name the
// caller may read nowhere is a 403 (readFilter), as for GET
// /api/v1/deployments; then each deploy is checked on its own.
type readScope struct{ application, environment string }

// authenticateScope authenticates the request and reads its
// ?application=&environment= scope; on failure it has answered (false).
func (s *Server) authenticateScope(w http.ResponseWriter, r *http.Request) (manent.Identity, readScope, bool) {
	p, ok := s.authenticate(w, r)
	if !ok {
		return p, readScope{}, false
	}
	scope, err := s.readScope(p, r)
	if err != nil {
		writeError(w, r, s.log, err)
		return p, scope, false
	}
	return p, scope, true
}

func (s *Server) readScope(p manent.Identity, r *http.Request) (readScope, error) {
	sc := readScope{application: r.URL.Query().Get("application"), environment: r.URL.Query().Get("environment")}
	// A filter no descriptor may match ("Billing") would answer nothing,
	// as if nothing had been deployed there.
	if err := invalidNames("filter", sc.application, sc.environment, true); err != nil {
		return sc, err
	}
	if err := s.readFilter(p, sc.application, sc.environment); err != nil {
		return sc, err
	}
	return sc, nil
}

// readFilter is the 403 of a read filter naming what p may read nowhere:
// both names, an environment it may not read; an application alone, one
// it may read in no environment (an environment alone likewise). A 200
// with nothing in it read as "nothing there" — DORA's zero deploys and
// no failures. It asks the rules only, so an application with deploys and
// one that never existed are refused alike.
func (s *Server) readFilter(p manent.Identity, application, environment string) error {
	switch {
	case application != "" && environment != "":
		return s.cfg.Guard.Authorize(p, PermRead, application, environment)
	case application != "" || environment != "":
		return s.cfg.Guard.AuthorizeSomewhere(p, PermRead, application, environment)
	}
	return nil
}

func (sc readScope) has(app, env string) bool {
	return (sc.application == "" || sc.application == app) && (sc.environment == "" || sc.environment == env)
}

// deadWorkerReason says a running deploy waits for its dead worker to be
// taken over (SPEC §11.3): on PostgreSQL by another worker; on SQLite, this
// server being the database's only one, by this server at its next start
// (node.adoptOrphans), which here found the step's processes still running
// or failed (its log says which). was, the deploy's recorded reason (a
// wave awaiting approval, a cancel asked for), follows as "last recorded".
func (s *Server) deadWorkerReason(w store.Worker, was string) string {
	return deadWorkerReason(w, s.st.Postgres(), was)
}

func deadWorkerReason(w store.Worker, postgres bool, was string) string {
	// Read after "Waiting for:" (status) and after the running step
	// (activity).
	then := "another worker takes the deploy over within workers.dead_after + 15 s"
	if !postgres {
		then = "this server takes the deploy over when it starts again, once the processes of the step have stopped (its log says why it could not at this start)"
	}
	r := fmt.Sprintf("worker %s to be replaced: it is %s (last seen %s); %s",
		w.ID, map[bool]string{true: "silent", false: w.State}[w.State == store.WorkerAlive], w.LastSeen.Format(time.RFC3339), then)
	if was != "" {
		r += " (last recorded: " + was + ")"
	}
	return r
}
