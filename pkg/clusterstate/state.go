package clusterstate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// FailureReasons are the container waiting/terminated reasons that fail a
// deploy waiting on the cluster (SPEC §9). A pod that merely fails its
// readiness probe, or has completed, has none of them.
var FailureReasons = []string{
	"ImagePullBackOff", "ErrImagePull", "InvalidImageName", "CrashLoopBackOff",
	"CreateContainerConfigError", "CreateContainerError", "Error", "OOMKilled",
}

// IsFailureReason reports whether reason is one of FailureReasons.
func IsFailureReason(reason string) bool { return slices.Contains(FailureReasons, reason) }

// Failures lists the containers of p that wait or ended with a failure
// reason, as "app waiting: ImagePullBackOff" or "app terminated: OOMKilled".
// A pod that has completed (phase Succeeded) has none.
func (p Pod) Failures() []string {
	if p.Phase == "Succeeded" {
		return nil
	}
	var out []string
	for _, c := range p.Containers {
		name := c.Name
		if c.Init {
			name = "init " + name
		}
		if IsFailureReason(c.WaitingReason) {
			out = append(out, name+" waiting: "+c.WaitingReason)
		}
		if IsFailureReason(c.TerminatedReason) {
			out = append(out, name+" terminated: "+c.TerminatedReason)
		}
	}
	return out
}

// Workload states shown by GET /api/v1/clusters/{cluster}/status.
const (
	// StateDeploying: observed does not match declared yet, and may still
	// come to: the declared deploy is not final, or the workload runs its
	// version with replicas not ready or kstatus not Current (pods
	// restarting), or, without a known deploy, kstatus InProgress.
	StateDeploying = "DEPLOYING"
	// StateDrifted: the declared deploy is final (manent.State.Final) and
	// the workload runs another version, which will not converge by
	// itself: it was changed outside manent (a Helm release of its own
	// that set another manent.io/version label; without the label, another
	// image tag) or by a deploy that did not label it. The label, when
	// there is one, is the version: `kubectl set image` alone is not seen.
	StateDrifted = "DRIFTED"
	// StateFailed: kstatus Failed, or a pod of the workload has a failure reason.
	StateFailed = "FAILED"
	// StateCurrent: observed matches declared (or, without a known deploy, kstatus Current).
	StateCurrent = "CURRENT"
	// StateTerminating: kstatus Terminating (the workload is being deleted).
	StateTerminating = "TERMINATING"
	// StateUnknown: no known deploy, and kstatus neither Current nor InProgress.
	StateUnknown = "UNKNOWN"
)

// WorkloadStates lists every workload state.
var WorkloadStates = []string{StateDeploying, StateDrifted, StateFailed, StateCurrent, StateTerminating, StateUnknown}

// Declared is what should run: the deploy named by an object's
// manent.io/deploy-id label, as the deployments table has it.
type Declared struct {
	DeployID    string       `json:"deploy_id"`
	Application string       `json:"application"`
	Environment string       `json:"environment"`
	Version     string       `json:"version"`
	State       manent.State `json:"state"`
}

// WorkloadStatus is a workload as observed, beside what its deploy declared.
type WorkloadStatus struct {
	Workload
	// Declared is nil when the deploy-id label names no deploy this server knows.
	Declared *Declared `json:"declared"`
	// State is DEPLOYING, DRIFTED, FAILED, CURRENT, TERMINATING or UNKNOWN.
	State string `json:"state"`
	// Reason says why the state is not CURRENT.
	Reason string `json:"reason,omitempty"`
	// FailingPods names the pods of this deploy with a failure reason (at most five).
	FailingPods []string `json:"failing_pods,omitempty"`
}

// Status is a cluster as last reported (GET /api/v1/clusters/{cluster}/status).
type Status struct {
	Cluster string `json:"cluster"`
	// LastReportAt is when the server received the last snapshot.
	LastReportAt time.Time `json:"last_report_at"`
	// ReportedAt is when the agent read the cluster for it (the agent's clock).
	ReportedAt time.Time        `json:"reported_at"`
	Pods       []Pod            `json:"pods"`
	Workloads  []WorkloadStatus `json:"workloads"`
}

// SilentAfter is how long without a report makes a cluster "silent" where
// people look at clusters (`manent clusters`, the web pages): its agent or
// the agent's network is down, and what it last reported may be stale.
const SilentAfter = 2 * time.Minute

// maxNamedPods bounds how many pods a failure message names.
const maxNamedPods = 5

// owns reports whether pod p belongs to workload w: same namespace and
// deploy, and an owner that is w (directly, or a ReplicaSet of a
// Deployment). A pod whose owner the agent did not report is taken as w's.
func owns(w Workload, p Pod) bool {
	if p.Namespace != w.Namespace || p.DeployID != w.DeployID {
		return false
	}
	if p.Owner == "" {
		return true
	}
	kind, name, _ := strings.Cut(p.Owner, "/")
	if w.Kind == KindDeployment {
		return kind == "ReplicaSet" && strings.HasPrefix(name, w.Name+"-")
	}
	return kind == w.Kind && name == w.Name
}

// Evaluate computes a workload's state from what was observed (the
// workload and the pods reported with it) and what was declared (nil when
// the deploy is unknown):
//
//   - FAILED when kstatus says Failed or one of its pods (of the same
//     deploy) has a container with a failure reason;
//   - TERMINATING when kstatus says Terminating;
//   - DRIFTED when the declared deploy is final and the observed version
//     (the manent.io/version label, or else the image tags) is another
//     one: nothing is deploying, and it will not converge by itself;
//   - DEPLOYING until the observed version is the declared one, every
//     desired replica is ready and updated, and kstatus says Current (with
//     the declared version, replicas not ready after the deploy ended are
//     pods restarting, still DEPLOYING);
//   - CURRENT then. Without a declared deploy the state follows kstatus.
func Evaluate(w Workload, declared *Declared, pods []Pod) WorkloadStatus {
	ws := WorkloadStatus{Workload: w, Declared: declared}
	for _, p := range pods {
		if owns(w, p) && len(p.Failures()) > 0 {
			ws.FailingPods = append(ws.FailingPods, p.Key())
		}
	}
	slices.Sort(ws.FailingPods)
	failing := len(ws.FailingPods)
	if failing > maxNamedPods {
		ws.FailingPods = ws.FailingPods[:maxNamedPods]
	}
	switch {
	case w.KStatus == KStatusFailed:
		ws.State, ws.Reason = StateFailed, kstatusReason(w)
	case failing > 0:
		ws.State = StateFailed
		ws.Reason = "1 pod with failing containers"
		if failing > 1 {
			ws.Reason = fmt.Sprintf("%d pods with failing containers", failing)
		}
	case w.KStatus == KStatusTerminating:
		ws.State, ws.Reason = StateTerminating, kstatusReason(w)
	case declared == nil:
		switch w.KStatus {
		case KStatusCurrent:
			ws.State = StateCurrent
		case KStatusInProgress:
			ws.State, ws.Reason = StateDeploying, kstatusReason(w)
		default:
			ws.State, ws.Reason = StateUnknown, kstatusReason(w)
		}
	default:
		v, same := observedVersion(w, declared.Version)
		var why []string
		switch {
		case same:
		case declared.State.Final():
			ws.State = StateDrifted
			why = append(why, fmt.Sprintf("version %s runs; deploy %s ended %s with %s (changed outside manent?)", v, declared.DeployID, declared.State, declared.Version))
		default:
			why = append(why, fmt.Sprintf("version %s, declared %s", v, declared.Version))
		}
		why = append(why, unsettled(w)...)
		switch {
		case ws.State == StateDrifted:
		case len(why) > 0:
			ws.State = StateDeploying
		default:
			ws.State = StateCurrent
		}
		ws.Reason = strings.Join(why, "; ")
	}
	return ws
}

// unsettled says why the workload has not settled yet, whatever version it
// runs: replicas not ready or not updated, kstatus not Current.
func unsettled(w Workload) []string {
	var why []string
	r := w.Replicas
	if r.Ready < r.Desired || r.Updated < r.Desired {
		why = append(why, fmt.Sprintf("%d/%d ready, %d updated", r.Ready, r.Desired, r.Updated))
	}
	if w.KStatus != KStatusCurrent {
		why = append(why, kstatusReason(w))
	}
	return why
}

// observedVersion returns the version the workload runs and whether it is
// want: the manent.io/version label when present; otherwise an image tag
// equal to want matches, and images without tags (digests) are not held
// against the deploy.
func observedVersion(w Workload, want string) (string, bool) {
	if w.Version != "" {
		return w.Version, w.Version == want
	}
	var tags []string
	for _, img := range w.Images {
		if t := imageTag(img); t != "" {
			if t == want {
				return t, true
			}
			tags = append(tags, t)
		}
	}
	if len(tags) == 0 {
		return "", true
	}
	return strings.Join(tags, ","), false
}

// imageTag returns the tag of an image reference, "" when it has none.
func imageTag(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndexByte(ref, '/')
	if colon := strings.LastIndexByte(ref, ':'); colon > slash {
		return ref[colon+1:]
	}
	return ""
}

func kstatusReason(w Workload) string {
	if w.KStatusMessage == "" {
		return "kstatus " + w.KStatus
	}
	return "kstatus " + w.KStatus + ": " + w.KStatusMessage
}
