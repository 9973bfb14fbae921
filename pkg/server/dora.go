package server

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// handleDORA answers the four DORA figures over the deploys that finished
// in the window (SPEC §11.5). An application or environment the caller
// may read nowhere is a 403 (readFilter), never zeros; only the deploys
// the caller may read are counted.
func (s *Server) handleDORA(w http.ResponseWriter, r *http.Request) {
	p, scope, ok := s.authenticateScope(w, r)
	if !ok {
		return
	}
	window := r.URL.Query().Get("window")
	if window == "" {
		window = api.DefaultDORAWindow
	}
	span, err := api.ParseDORAWindow(window)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	now := time.Now()
	allowed := map[[2]string]bool{}
	readable := func(application, environment string) bool {
		k := [2]string{application, environment}
		ok, seen := allowed[k]
		if !seen {
			ok = s.cfg.Guard.Authorize(p, PermRead, application, environment) == nil
			allowed[k] = ok
		}
		return ok
	}
	// The figures are counted as the deploys are read, oldest first: the
	// request holds the samples of the medians and each environment's
	// failures not yet restored, never the window's deploys.
	var count doraCount
	err = s.st.FinishedSince(r.Context(), scope.application, scope.environment, now.Add(-span), func(f store.Finished) error {
		if readable(f.Application, f.Environment) {
			count.add(f)
		}
		return nil
	})
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out := count.figures(span)
	out.Window, out.Application, out.Environment = window, scope.application, scope.environment
	pruned, err := s.st.PrunedThrough(r.Context(), scope.application, scope.environment)
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	out.Partial = partial(pruned, now.Add(-span), readable)
	writeJSON(w, http.StatusOK, out)
}

// partial says whether retention.deploys removed deploys, of the
// environments the caller may read, that finished at or after since: the
// window then counts only what retention kept there, and says so rather
// than answer figures that look whole.
func partial(pruned []store.Pruned, since time.Time, readable func(application, environment string) bool) *api.DORAPartial {
	var latest *store.Pruned
	for i, p := range pruned {
		if p.Through.Before(since) || !readable(p.Application, p.Environment) {
			continue
		}
		if latest == nil || p.Through.After(latest.Through) {
			latest = &pruned[i]
		}
	}
	if latest == nil {
		return nil
	}
	at := latest.Through.UTC()
	return &api.DORAPartial{RemovedThrough: at, Message: fmt.Sprintf(
		"retention.deploys removed deploys of %s/%s that finished up to %s, inside this window: before then the figures count only what it keeps "+
			"(each environment's current release, the one before it, its last failure); read a window that starts after %[3]s, "+
			"or keep retention.deploys longer than the windows you read",
		latest.Application, latest.Environment, at.Format(time.RFC3339))}
}

// DORA computes the four figures over deploys that finished within a
// window of length span, oldest first. A deploy that did not succeed
// counts only when it reached the environment (Reached): one refused at
// its config step, or failed fetching its artifact, changed nothing there;
// a CANCELLED one counts only when its activation completed.
//
//   - deployment frequency: every such deploy, and deploys per day of the window;
//   - lead time: from source.committed_at to finished_at of SUCCESS deploys
//     that carry a source block (median and 90th percentile);
//   - change failure rate: ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED and
//     CANCELLED (after its activation) deploys over all of them;
//   - time to restore: from each failed deploy's finished_at to the next
//     SUCCESS in the same application/environment (as recorded on the
//     failure when that SUCCESS finished: Finished.RestoredAt, else the
//     next SUCCESS among the rows), or, when its automatic
//     rollback completed, from the rollback's start to the deploy's end (the
//     rollback restored the release before it); a failure not yet followed
//     by a success gives no sample and counts as unrestored.
//
// Medians of an even number of samples are the mean of the middle two;
// p90 is the nearest-rank percentile. Without samples a figure is null.
func DORA(all []store.Finished, span time.Duration) api.DORA {
	var c doraCount
	for _, f := range all {
		c.add(f)
	}
	return c.figures(span)
}

// doraCount counts DORA's figures over deploys added oldest first.
type doraCount struct {
	deploys, failed int
	lead, restore   []float64
	// open holds the failures of each application/environment not yet
	// restored.
	open map[[2]string][]time.Time
}

// add counts f, a deploy that finished after (or with) those added before.
func (c *doraCount) add(f store.Finished) {
	if !Reached(f) {
		return
	}
	c.deploys++
	k := [2]string{f.Application, f.Environment}
	switch f.State {
	case manent.StateSuccess:
		// A commit time after the deploy's end (a clock far off, a
		// descriptor admitted before the check existed) is no sample.
		if f.CommittedAt != nil && !f.CommittedAt.After(f.FinishedAt) {
			c.lead = append(c.lead, f.FinishedAt.Sub(*f.CommittedAt).Seconds())
		}
		for _, failed := range c.open[k] {
			c.restore = append(c.restore, f.FinishedAt.Sub(failed).Seconds())
		}
		delete(c.open, k)
	default: // ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED, CANCELLED after its activation
		c.failed++
		if f.Rollback == manent.RollbackCompleted {
			c.restore = append(c.restore, f.FinishedAt.Sub(rollbackStart(f)).Seconds())
			return
		}
		// Restored by a success recorded on the failure itself: that
		// success may be gone since (retention.deploys), or lie
		// outside the rows read.
		if f.RestoredAt != nil && !f.RestoredAt.Before(f.FinishedAt) {
			c.restore = append(c.restore, f.RestoredAt.Sub(f.FinishedAt).Seconds())
			return
		}
		if c.open == nil {
			c.open = map[[2]string][]time.Time{}
		}
		c.open[k] = append(c.open[k], f.FinishedAt)
	}
}

// figures returns the four figures over a window of length span.
func (c *doraCount) figures(span time.Duration) api.DORA {
	var out api.DORA
	out.DeploymentFrequency.Deploys = c.deploys
	out.DeploymentFrequency.PerDay = round(float64(c.deploys) / (span.Hours() / 24))
	for _, failures := range c.open {
		out.TimeToRestoreSeconds.Unrestored += len(failures)
	}
	out.ChangeFailureRate.Failed = c.failed
	out.ChangeFailureRate.Total = c.deploys
	if c.deploys > 0 {
		out.ChangeFailureRate.Rate = ptr(round(float64(c.failed) / float64(c.deploys)))
	}
	out.LeadTimeSeconds.Samples = len(c.lead)
	out.LeadTimeSeconds.Median = median(c.lead)
	out.LeadTimeSeconds.P90 = percentile(c.lead, 90)
	out.TimeToRestoreSeconds.Samples = len(c.restore)
	out.TimeToRestoreSeconds.Median = median(c.restore)
	return out
}

// Reached reports whether a final deploy reached its environment: a
// SUCCESS did; a CANCELLED one did when an activation of it completed (it
// changed what runs, whether or not its rollback then undid it: a cancel
// before activation leaves the running release as it was); one that
// failed did when any step ran other than those that only prepare or check
// before the target is touched (config, change:open, notify:started,
// secrets, artifacts, qa, a checkpoint, a wave's approval) and those that
// only tidy up (cleanup, change:close). A custom step may change anything,
// so one that ran before a failure counts. Without step rows (an old
// record) a failed deploy counts: a failure is not hidden.
func Reached(f store.Finished) bool {
	if f.State == manent.StateCancelled {
		return activated(f.Steps)
	}
	if f.State == manent.StateSuccess || len(f.Steps) == 0 {
		return true
	}
	for _, st := range f.Steps {
		if st.State == manent.StepPending || st.State == manent.StepSkipped {
			continue
		}
		switch st.Name {
		case manent.StepConfig, manent.StepChangeOpen, manent.StepNotifyStarted, manent.StepSecrets,
			manent.StepArtifacts, manent.StepQA, manent.StepCleanup, manent.StepChangeClose:
			continue
		}
		if strings.HasPrefix(st.Name, engine.CheckpointPrefix) || strings.HasPrefix(st.Name, engine.WaveApprovalPrefix+"[") {
			continue
		}
		return true
	}
	return false
}

// activated reports whether an activation step (one per rollout wave)
// completed.
func activated(steps []manent.Step) bool {
	for _, st := range steps {
		if st.State == manent.StepSuccess && (st.Name == manent.StepActivation || strings.HasPrefix(st.Name, manent.StepActivation+"[")) {
			return true
		}
	}
	return false
}

// rollbackStart is when a failed deploy's automatic rollback began: its
// first rollback: step's start (the deploy's end when none is recorded).
func rollbackStart(f store.Finished) time.Time {
	at := f.FinishedAt
	for _, st := range f.Steps {
		if strings.HasPrefix(st.Name, engine.RollbackPrefix) && st.StartedAt != nil && st.StartedAt.Before(at) {
			at = *st.StartedAt
		}
	}
	return at
}

func ptr(f float64) *float64 { return &f }

// round keeps three decimals: figures, not noise.
func round(f float64) float64 { return math.Round(f*1000) / 1000 }

func median(xs []float64) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return ptr(round(s[n/2]))
	}
	return ptr(round((s[n/2-1] + s[n/2]) / 2))
}

func percentile(xs []float64, p int) *float64 {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(float64(p)/100*float64(len(s)))) - 1
	return ptr(round(s[max(i, 0)]))
}
