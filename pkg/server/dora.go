package server

import (
	"math"
	"net/http"
	"slices"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// handleDORA answers the four DORA figures over the deploys that finished
// in the window (SPEC §11.5). Naming both application and environment asks
// for deployment.read there; otherwise only the deploys the caller may read
// are counted.
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
	rows, err := s.st.FinishedSince(r.Context(), scope.application, scope.environment, now.Add(-span))
	if err != nil {
		writeError(w, r, s.log, err)
		return
	}
	allowed := map[[2]string]bool{}
	kept := rows[:0]
	for _, f := range rows {
		k := [2]string{f.Application, f.Environment}
		ok, seen := allowed[k]
		if !seen {
			ok = s.cfg.Guard.Authorize(p, PermRead, f.Application, f.Environment) == nil
			allowed[k] = ok
		}
		if ok {
			kept = append(kept, f)
		}
	}
	out := DORA(kept, span)
	out.Window, out.Application, out.Environment = window, scope.application, scope.environment
	writeJSON(w, http.StatusOK, out)
}

// DORA computes the four figures over deploys that ran and finished within
// a window of length span, oldest first:
//
//   - deployment frequency: every such deploy, and deploys per day of the window;
//   - lead time: from source.committed_at to finished_at of SUCCESS deploys
//     that carry a source block (median and 90th percentile);
//   - change failure rate: ERROR (and MAX_RECOVERY_ATTEMPTS_EXCEEDED)
//     deploys over all of them;
//   - time to restore: from each failed deploy's finished_at to the next
//     SUCCESS in the same application/environment (a failure not yet
//     followed by a success gives no sample).
//
// Medians of an even number of samples are the mean of the middle two;
// p90 is the nearest-rank percentile. Without samples a figure is null.
func DORA(rows []store.Finished, span time.Duration) api.DORA {
	var out api.DORA
	out.DeploymentFrequency.Deploys = len(rows)
	out.DeploymentFrequency.PerDay = round(float64(len(rows)) / (span.Hours() / 24))
	var lead, restore []float64
	// The failures of each application/environment not yet restored.
	open := map[[2]string][]time.Time{}
	for _, f := range rows {
		k := [2]string{f.Application, f.Environment}
		switch f.State {
		case manent.StateSuccess:
			// A commit time after the deploy's end (a clock far off, a
			// descriptor admitted before the check existed) is no sample.
			if f.CommittedAt != nil && !f.CommittedAt.After(f.FinishedAt) {
				lead = append(lead, f.FinishedAt.Sub(*f.CommittedAt).Seconds())
			}
			for _, failed := range open[k] {
				restore = append(restore, f.FinishedAt.Sub(failed).Seconds())
			}
			delete(open, k)
		default: // ERROR, MAX_RECOVERY_ATTEMPTS_EXCEEDED
			out.ChangeFailureRate.Failed++
			open[k] = append(open[k], f.FinishedAt)
		}
	}
	out.ChangeFailureRate.Total = len(rows)
	if len(rows) > 0 {
		out.ChangeFailureRate.Rate = ptr(round(float64(out.ChangeFailureRate.Failed) / float64(len(rows))))
	}
	out.LeadTimeSeconds.Samples = len(lead)
	out.LeadTimeSeconds.Median = median(lead)
	out.LeadTimeSeconds.P90 = percentile(lead, 90)
	out.TimeToRestoreSeconds.Samples = len(restore)
	out.TimeToRestoreSeconds.Median = median(restore)
	return out
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
