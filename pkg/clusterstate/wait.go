package clusterstate

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Observation is what the server knows about one deploy on one cluster:
// when the cluster last reported, the deploy as declared, and the objects
// labelled with that deploy's id — and only those (attribution).
type Observation struct {
	Cluster string
	// Reported is false while the cluster has never reported.
	Reported     bool
	LastReportAt time.Time
	// Declared is nil when the deploy is unknown.
	Declared  *Declared
	Workloads []Workload
	Pods      []Pod
}

// Verdict is the decision of a step waiting on the cluster.
type Verdict struct {
	// Ready: every workload of the deploy is CURRENT.
	Ready bool `json:"ready"`
	// Failed is the failure message, "" when nothing failed.
	Failed string `json:"failed,omitempty"`
	// Waiting says what is still awaited.
	Waiting   string           `json:"waiting,omitempty"`
	Workloads []WorkloadStatus `json:"workloads"`
}

// Decide takes the decision for deployID from o: failed when a workload of
// the deploy is FAILED or one of its pods has a failing container (naming
// up to five pods and their containers); ready when the deploy has at
// least one workload and all are CURRENT; waiting otherwise.
func Decide(o Observation, deployID string) Verdict {
	v := Verdict{Workloads: []WorkloadStatus{}}
	for _, w := range o.Workloads {
		if w.DeployID == deployID {
			v.Workloads = append(v.Workloads, Evaluate(w, o.Declared, o.Pods))
		}
	}
	// Pods of the deploy with a failing container, whichever workload (or
	// none) they belong to.
	var failing []string
	total := 0
	for _, p := range o.Pods {
		if p.DeployID != deployID {
			continue
		}
		if f := p.Failures(); len(f) > 0 {
			total++
			if len(failing) < maxNamedPods {
				failing = append(failing, fmt.Sprintf("%s (%s)", p.Key(), strings.Join(f, ", ")))
			}
		}
	}
	var failedWorkloads []string
	var waiting []string
	for _, ws := range v.Workloads {
		switch ws.State {
		case StateFailed:
			if ws.KStatus == KStatusFailed {
				failedWorkloads = append(failedWorkloads, fmt.Sprintf("%s %s/%s: %s", ws.Kind, ws.Namespace, ws.Name, kstatusReason(ws.Workload)))
			}
		case StateCurrent:
		default:
			waiting = append(waiting, fmt.Sprintf("%s %s/%s: %s", ws.Kind, ws.Namespace, ws.Name, ws.Reason))
		}
	}
	if total > 0 || len(failedWorkloads) > 0 {
		var b strings.Builder
		fmt.Fprintf(&b, "deploy %s failed on cluster %s", deployID, o.Cluster)
		if len(failedWorkloads) > 0 {
			b.WriteString(": " + strings.Join(failedWorkloads, "; "))
		}
		if total > 0 {
			fmt.Fprintf(&b, ": pods with failing containers: %s", strings.Join(failing, "; "))
			if total > len(failing) {
				fmt.Fprintf(&b, " and %d more", total-len(failing))
			}
		}
		v.Failed = b.String()
		return v
	}
	switch {
	case !o.Reported:
		v.Waiting = fmt.Sprintf("cluster %s has not reported yet", o.Cluster)
	case len(v.Workloads) == 0:
		v.Waiting = fmt.Sprintf("no workload labelled %s=%s reported by cluster %s yet", LabelDeployID, deployID, o.Cluster)
	case len(waiting) > 0:
		v.Waiting = strings.Join(waiting, "; ")
	default:
		v.Ready = true
	}
	return v
}

// NoticePrefix starts the notice a waiting step shows when the agent has
// not reported for a while.
const NoticePrefix = "no report from the agent since "

// DefaultStaleAfter is how long without a report before the notice shows.
const DefaultStaleAfter = 60 * time.Second

// Notice returns "no report from the agent since <time>" when the cluster
// has not reported for more than staleAfter — or, never having reported,
// when the wait started more than staleAfter ago — and "" otherwise.
func Notice(o Observation, started, now time.Time, staleAfter time.Duration) string {
	if staleAfter <= 0 {
		staleAfter = DefaultStaleAfter
	}
	if o.Reported {
		if now.Sub(o.LastReportAt) > staleAfter {
			return NoticePrefix + o.LastReportAt.UTC().Format(time.RFC3339)
		}
		return ""
	}
	if now.Sub(started) > staleAfter {
		return NoticePrefix + started.UTC().Format(time.RFC3339) + fmt.Sprintf(" (cluster %s has never reported)", o.Cluster)
	}
	return ""
}

// Source reads what the server knows about a deploy on a cluster
// (*store.Store implements it).
type Source interface {
	Observe(ctx context.Context, cluster, deployID string) (Observation, error)
}

// WaitOptions tune Wait.
type WaitOptions struct {
	// Every is the polling period (default 1 s).
	Every time.Duration
	// StaleAfter is how long without a report before OnNotice is told
	// (default 60 s).
	StaleAfter time.Duration
	// OnNotice is called when the notice changes: the notice text when
	// reports stop, "" when they resume.
	OnNotice func(notice string)
	// OnWaiting is called when what is awaited (Verdict.Waiting) changes.
	OnWaiting func(waiting string)
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// FailedError is a deploy that failed on the cluster; its message names the
// failing pods.
type FailedError struct{ Message string }

func (e *FailedError) Error() string { return e.Message }

// Wait polls src until deployID is ready on cluster (nil error), failed
// (*FailedError), or ctx ends (ctx.Err(), with the last verdict, whose
// Waiting says what was still awaited). Read errors are retried on the next
// poll; the last one is returned with ctx.Err() when ctx ends.
func Wait(ctx context.Context, src Source, cluster, deployID string, o WaitOptions) (Verdict, error) {
	if o.Every <= 0 {
		o.Every = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	started := o.Now()
	notice, waiting := "", ""
	var last Verdict
	var lastErr error
	tick := time.NewTicker(o.Every)
	defer tick.Stop()
	for {
		obs, err := src.Observe(ctx, cluster, deployID)
		if err == nil {
			lastErr = nil
			last = Decide(obs, deployID)
			if n := Notice(obs, started, o.Now(), o.StaleAfter); n != notice {
				notice = n
				if o.OnNotice != nil {
					o.OnNotice(n)
				}
			}
			if last.Waiting != waiting {
				waiting = last.Waiting
				if o.OnWaiting != nil && waiting != "" {
					o.OnWaiting(waiting)
				}
			}
			switch {
			case last.Failed != "":
				return last, &FailedError{Message: last.Failed}
			case last.Ready:
				return last, nil
			}
		} else if ctx.Err() == nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			if lastErr != nil {
				return last, fmt.Errorf("%w (last read error: %v)", ctx.Err(), lastErr)
			}
			return last, ctx.Err()
		case <-tick.C:
		}
	}
}
