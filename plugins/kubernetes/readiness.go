package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/agent"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
)

// permanentReasons are the container reasons retrying the step cannot
// fix: the image cannot be pulled or the container's configuration is
// wrong. The other failure reasons (CrashLoopBackOff, OOMKilled, …) fail
// the step too, but as retryable.
var permanentReasons = []string{"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CreateContainerConfigError"}

// observe reads the manent-labelled pods and workloads of the namespaces,
// as the agent does (agent.Collect), straight from the API server.
func (cl *cluster) observe(ctx context.Context, namespaces []string, now time.Time) (clusterstate.Observation, error) {
	obs := clusterstate.Observation{Cluster: cl.name, Reported: true, LastReportAt: now}
	for _, ns := range namespaces {
		snap, err := agent.Collect(ctx, cl.kube, ns, cl.name, now)
		if err != nil {
			return obs, classify(err)
		}
		obs.Pods = append(obs.Pods, snap.Pods...)
		obs.Workloads = append(obs.Workloads, snap.Workloads...)
	}
	return obs, nil
}

// readiness is one judgement of a deploy's workloads.
type readiness struct {
	Ready bool
	// Failed is the failure, nil when nothing failed.
	Failed error
	// Waiting says what is awaited while not ready and not failed.
	Waiting   string
	Workloads []string
}

// judge decides, with clusterstate.Decide, whether the workloads want of
// deployID are ready in obs: every one observed with the deploy's id and
// kstatus Current (no declared deploy is given, so readiness follows
// kstatus). A workload that reports failure, or a pod of the deploy with a
// failing container, fails it — permanently when a container cannot pull
// its image or is misconfigured.
func judge(obs clusterstate.Observation, deployID string, want []Ref) readiness {
	v := clusterstate.Decide(obs, deployID)
	var r readiness
	seen := map[string]bool{}
	for _, w := range v.Workloads {
		k := w.Kind + " " + w.Namespace + "/" + w.Name
		seen[k] = true
		r.Workloads = append(r.Workloads, k+": "+w.State)
	}
	if v.Failed != "" {
		err := fmt.Errorf("%s", v.Failed)
		if permanentFailure(obs, deployID) {
			err = plugin.Permanent(err)
		}
		r.Failed = err
		return r
	}
	var missing []string
	for _, ref := range want {
		if !seen[ref.String()] {
			missing = append(missing, ref.String())
		}
	}
	switch {
	case len(missing) > 0:
		r.Waiting = fmt.Sprintf("%s not seen with %s=%s", strings.Join(missing, ", "), clusterstate.LabelDeployID, deployID)
	case !v.Ready:
		r.Waiting = v.Waiting
	default:
		r.Ready = true
	}
	return r
}

// permanentFailure reports whether a pod of deployID has a container
// waiting or terminated with one of permanentReasons.
func permanentFailure(obs clusterstate.Observation, deployID string) bool {
	for _, p := range obs.Pods {
		if p.DeployID != deployID || p.Phase == "Succeeded" {
			continue
		}
		for _, c := range p.Containers {
			if slices.Contains(permanentReasons, c.WaitingReason) || slices.Contains(permanentReasons, c.TerminatedReason) {
				return true
			}
		}
	}
	return false
}

// workloads returns the workloads among refs and their namespaces.
func workloads(refs []Ref) (ws []Ref, namespaces []string) {
	for _, r := range refs {
		if !strings.HasPrefix(r.APIVersion, "apps/") || !slices.Contains(podTemplateKinds, r.Kind) {
			continue
		}
		ws = append(ws, r)
		if !slices.Contains(namespaces, r.Namespace) {
			namespaces = append(namespaces, r.Namespace)
		}
	}
	return ws, namespaces
}

// check reads the cluster once and judges the deploy's workloads.
func (cl *cluster) check(ctx context.Context, deployID string, refs []Ref) (readiness, error) {
	want, namespaces := workloads(refs)
	obs, err := cl.observe(ctx, namespaces, time.Now())
	if err != nil {
		return readiness{}, err
	}
	return judge(obs, deployID, want), nil
}

// wait checks every p.every until the deploy's workloads are ready, one
// fails, or timeout passes (a retryable error saying what was awaited).
func (p *Plugin) wait(ctx context.Context, cl *cluster, pc plugin.Context, refs []Ref, timeout time.Duration) (readiness, error) {
	log := logOf(pc)
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(p.every)
	defer tick.Stop()
	var last readiness
	var lastErr error
	said := ""
	for range int(timeout/p.every) + 2 {
		r, err := cl.check(ctx, pc.DeployID, refs)
		switch {
		case err == nil:
			last, lastErr = r, nil
			if r.Failed != nil {
				return r, r.Failed
			}
			if r.Ready {
				return r, nil
			}
			if r.Waiting != said {
				said = r.Waiting
				fmt.Fprintf(log, "waiting: %s\n", said)
			}
		case plugin.IsPermanent(err):
			return r, err
		case ctx.Err() == nil:
			lastErr = err
		}
		select {
		case <-ctx.Done():
			return last, waitTimeout(ctx, timeout, last, lastErr)
		case <-tick.C:
		}
	}
	return last, waitTimeout(ctx, timeout, last, lastErr)
}

func waitTimeout(ctx context.Context, timeout time.Duration, last readiness, lastErr error) error {
	if ctx.Err() != nil && ctx.Err() != context.DeadlineExceeded {
		return ctx.Err() // the step was cancelled
	}
	msg := fmt.Sprintf("not ready after %s", timeout)
	if last.Waiting != "" {
		msg += ": " + last.Waiting
	}
	if lastErr != nil {
		msg += fmt.Sprintf(" (last read error: %v)", lastErr)
	}
	return fmt.Errorf("%s", msg)
}
