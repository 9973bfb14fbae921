package clusterstate

import (
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Labels manent puts on the objects it deploys (SPEC §6, kubernetes plugin).
// The agent reports only objects carrying LabelDeployID.
const (
	LabelDeployID    = "manent.io/deploy-id"
	LabelApplication = "manent.io/application"
	LabelEnvironment = "manent.io/environment"
	// LabelVersion, when present, is the released version the object runs;
	// it is compared with the declared deploy's version.
	LabelVersion = "manent.io/version"
)

// Limits of one snapshot: larger ones are refused whole with 413.
const (
	MaxObjects = 50_000
	MaxBytes   = 16 << 20
)

// Workload kinds the agent reports.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
)

// kstatus results (sigs.k8s.io/cli-utils/pkg/kstatus/status), as reported.
const (
	KStatusInProgress  = "InProgress"
	KStatusFailed      = "Failed"
	KStatusCurrent     = "Current"
	KStatusTerminating = "Terminating"
	KStatusNotFound    = "NotFound"
	KStatusUnknown     = "Unknown"
)

// Snapshot is one full report of an agent: every manent-labelled pod and
// workload it could read. The server replaces the cluster's rows with it.
type Snapshot struct {
	Cluster string `json:"cluster"`
	// Time is when the agent read the cluster (the agent's clock).
	Time      time.Time  `json:"time"`
	Pods      []Pod      `json:"pods"`
	Workloads []Workload `json:"workloads"`
}

// Pod is one pod as the agent read it.
type Pod struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	DeployID    string `json:"deploy_id"`
	Application string `json:"application,omitempty"`
	Environment string `json:"environment,omitempty"`
	// Phase is the pod's status.phase: Pending, Running, Succeeded, Failed, Unknown.
	Phase string `json:"phase"`
	// Ready is the PodReady condition.
	Ready bool `json:"ready"`
	// Restarts adds up the containers' restart counts.
	Restarts int32 `json:"restarts"`
	// Owner is the controlling owner, "<Kind>/<name>" (e.g. ReplicaSet/billing-7d9f8).
	Owner      string      `json:"owner,omitempty"`
	Containers []Container `json:"containers"`
}

// Container is one container (or init container) of a pod.
type Container struct {
	Name     string `json:"name"`
	Image    string `json:"image"`
	Init     bool   `json:"init,omitempty"`
	Ready    bool   `json:"ready"`
	Restarts int32  `json:"restarts"`
	// WaitingReason is state.waiting.reason (e.g. ImagePullBackOff).
	WaitingReason string `json:"waiting_reason,omitempty"`
	// TerminatedReason is state.terminated.reason (e.g. OOMKilled, Completed).
	TerminatedReason string `json:"terminated_reason,omitempty"`
	// Message is the waiting or terminated message, shortened.
	Message string `json:"message,omitempty"`
}

// Workload is one Deployment, StatefulSet or DaemonSet.
type Workload struct {
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	DeployID    string `json:"deploy_id"`
	Application string `json:"application,omitempty"`
	Environment string `json:"environment,omitempty"`
	// Version is the manent.io/version label, "" when absent.
	Version string `json:"version,omitempty"`
	// Images are the images of the pod template's containers, in order.
	Images   []string `json:"images"`
	Replicas Replicas `json:"replicas"`
	// KStatus is kstatus's verdict on the object; KStatusMessage its message.
	KStatus        string `json:"kstatus"`
	KStatusMessage string `json:"kstatus_message,omitempty"`
}

// Replicas are a workload's replica counts. For a DaemonSet, Desired is
// desiredNumberScheduled and the others the matching number* fields.
type Replicas struct {
	Desired   int32 `json:"desired"`
	Ready     int32 `json:"ready"`
	Updated   int32 `json:"updated"`
	Available int32 `json:"available"`
}

// Key names a pod within its cluster.
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }

// Key names a workload within its cluster.
func (w Workload) Key() string { return w.Kind + "/" + w.Namespace + "/" + w.Name }

// Objects counts the pods and workloads of s.
func (s *Snapshot) Objects() int { return len(s.Pods) + len(s.Workloads) }

// ValidClusterName reports whether name can name a cluster: lower-case
// letters, digits, '-' and '.', at most 63 characters, starting and ending
// with a letter or digit.
func ValidClusterName(name string) bool { return dnsName(name, 63) }

// validObjectName accepts DNS subdomains (RFC 1123), what Kubernetes allows
// for namespaces, pods and workloads (a hand-written check: it runs for
// every object of every snapshot).
func validObjectName(name string) bool { return dnsName(name, 253) }

func dnsName(s string, maxLen int) bool {
	if s == "" || len(s) > maxLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && ((c != '-' && c != '.') || i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

// maxFieldErrors bounds how many problems one refusal lists.
const maxFieldErrors = 20

// Validate checks a snapshot the server is about to apply and returns every
// problem (at most 20 listed), each with a JSON path: a missing or bad
// cluster name or time, objects without a namespace or name or deploy id,
// unknown workload kinds, negative counts, duplicate objects. A snapshot
// with any problem is refused whole.
func Validate(s *Snapshot) []manent.FieldError {
	var errs []manent.FieldError
	more := 0
	add := func(path, format string, args ...any) {
		if len(errs) >= maxFieldErrors {
			more++
			return
		}
		errs = append(errs, manent.FieldError{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case s.Cluster == "":
		add("/cluster", "cluster is required")
	case !ValidClusterName(s.Cluster):
		add("/cluster", "%s is not a cluster name (lower-case letters, digits, '-' and '.', at most 63)", echo(s.Cluster))
	}
	if s.Time.IsZero() {
		add("/time", "time is required (when the agent read the cluster, RFC 3339)")
	}
	seen := make(map[string]int, len(s.Pods))
	for i, p := range s.Pods {
		at := fmt.Sprintf("/pods/%d", i)
		checkName(add, at+"/namespace", p.Namespace)
		checkName(add, at+"/name", p.Name)
		if p.DeployID == "" {
			add(at+"/deploy_id", "deploy_id is required (the %s label)", LabelDeployID)
		}
		checkLabels(add, at, p.DeployID, p.Application, p.Environment, "")
		if p.Restarts < 0 {
			add(at+"/restarts", "restarts must not be negative")
		}
		for j, c := range p.Containers {
			if c.Name == "" {
				add(fmt.Sprintf("%s/containers/%d/name", at, j), "container name is required")
			}
			if c.Restarts < 0 {
				add(fmt.Sprintf("%s/containers/%d/restarts", at, j), "restarts must not be negative")
			}

		}
		if p.Namespace != "" && p.Name != "" {
			if first, dup := seen[p.Key()]; dup {
				add(at, "pod %s is reported twice (first at /pods/%d)", echo(p.Key()), first)
			} else {
				seen[p.Key()] = i
			}
		}
	}
	seen = make(map[string]int, len(s.Workloads))
	for i, w := range s.Workloads {
		at := fmt.Sprintf("/workloads/%d", i)
		switch w.Kind {
		case KindDeployment, KindStatefulSet, KindDaemonSet:
		default:
			add(at+"/kind", "kind %s is not one of Deployment, StatefulSet, DaemonSet", echo(w.Kind))
		}
		checkName(add, at+"/namespace", w.Namespace)
		checkName(add, at+"/name", w.Name)
		if w.DeployID == "" {
			add(at+"/deploy_id", "deploy_id is required (the %s label)", LabelDeployID)
		}
		checkLabels(add, at, w.DeployID, w.Application, w.Environment, w.Version)
		r := w.Replicas
		if r.Desired < 0 || r.Ready < 0 || r.Updated < 0 || r.Available < 0 {
			add(at+"/replicas", "replica counts must not be negative")
		}
		switch w.KStatus {
		case KStatusInProgress, KStatusFailed, KStatusCurrent, KStatusTerminating, KStatusNotFound, KStatusUnknown:
		default:
			add(at+"/kstatus", "kstatus %s is not one of InProgress, Failed, Current, Terminating, NotFound, Unknown", echo(w.KStatus))
		}
		if w.Kind != "" && w.Namespace != "" && w.Name != "" {
			if first, dup := seen[w.Key()]; dup {
				add(at, "workload %s is reported twice (first at /workloads/%d)", echo(w.Key()), first)
			} else {
				seen[w.Key()] = i
			}
		}
	}
	if more > 0 {
		errs = append(errs, manent.FieldError{Path: "", Message: fmt.Sprintf("and %d more problems", more)})
	}
	return errs
}

func checkName(add func(path, format string, args ...any), path, v string) {
	switch {
	case v == "":
		add(path, "is required")
	case !validObjectName(v):
		add(path, "%s is not a Kubernetes object name", echo(v))
	}
}

// maxLabel is the longest Kubernetes label value; maxText bounds the other
// texts of an object (images, reasons, messages): a snapshot of the 16 MiB
// allowed must not carry a 10 MiB "name" the pages then show.
const (
	maxLabel = 63
	maxText  = 4096
)

// checkLabels checks the label values of an object (SPEC §9's labels).
func checkLabels(add func(path, format string, args ...any), at, deployID, application, environment, version string) {
	for _, l := range []struct{ field, v string }{
		{"deploy_id", deployID}, {"application", application}, {"environment", environment}, {"version", version},
	} {
		switch {
		case len(l.v) > maxLabel:
			add(at+"/"+l.field, "is %d bytes, longer than a label value may be (%d)", len(l.v), maxLabel)
		case !labelValue.MatchString(l.v):
			// A cluster holds no other (the API server refuses it): such
			// a value, a terminal escape or a right-to-left override
			// meant for a reader's screen, comes from no agent.
			add(at+"/"+l.field, "%s is not a label value (letters, digits, '-', '_' and '.', beginning and ending with a letter or digit)", echo(l.v))
		}
	}
}

// labelValue is the syntax of a Kubernetes label value (empty, or at most
// 63 such characters: the length is checked apart).
var labelValue = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

// Bound cuts the free texts of a snapshot's objects (owners, container
// names, images, reasons, messages, kstatus messages) to maxText bytes,
// marking the cut: what a page shows stays readable, and an agent whose
// cluster holds one odd object still reports the rest.
func Bound(s *Snapshot) {
	for i := range s.Pods {
		p := &s.Pods[i]
		clip(&p.Owner)
		for j := range p.Containers {
			c := &p.Containers[j]
			for _, f := range []*string{&c.Name, &c.Image, &c.WaitingReason, &c.TerminatedReason, &c.Message} {
				clip(f)
			}
		}
	}
	for i := range s.Workloads {
		w := &s.Workloads[i]
		for j := range w.Images {
			clip(&w.Images[j])
		}
		clip(&w.KStatusMessage)
	}
}

func clip(v *string) { *v = manent.ClipText(*v, maxText) }

// maxEcho bounds how much of a bad value a problem quotes back.
const maxEcho = 64

// echo quotes v for a problem, cut to maxEcho bytes (manent.ClipText, as
// every refusal quotes input) and followed by its length when cut.
func echo(v string) string {
	q := strconv.Quote(manent.ClipText(v, maxEcho))
	if len(v) > maxEcho {
		q += fmt.Sprintf(" (%d bytes)", len(v))
	}
	return q
}
