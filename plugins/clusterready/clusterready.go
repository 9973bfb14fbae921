// Package clusterready is the `cluster-ready` step plugin: a deploy step
// that waits until the deploy's workloads on a Kubernetes cluster are
// Current, as the cluster's manent agent reports them (SPEC §9).
//
//	steps:
//	  - name: wait-cluster
//	    after: deploy
//	    plugin: cluster-ready
//	    with: {cluster: prod-eu-1, timeout: 10m, stale_after: 60s}
//
// It polls the server's store about once a second. The step succeeds when
// every workload labelled with the deploy's id is Current and matches the
// deploy's version; it fails at once (no retry) when one reports failure,
// naming up to five pods whose containers wait or ended with
// ImagePullBackOff, ErrImagePull, InvalidImageName, CrashLoopBackOff,
// CreateContainerConfigError, CreateContainerError, Error or OOMKilled; it
// fails when timeout passes. While the agent has not reported for
// stale_after, the step's output and log show "no report from the agent
// since <time>"; the notice goes with the next report.
//
// AwaitReady is the same wait for the kubernetes plugin's health gate
// between rollout waves, restricted to the workloads the wave changed.
//
// It imports pkg/plugin and pkg/clusterstate; the store is handed in.
package clusterready

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
)

// Defaults of `with`.
const (
	DefaultTimeout = 10 * time.Minute
	DefaultEvery   = time.Second
)

// Store is what the plugin reads and writes (*store.Store).
type Store interface {
	clusterstate.Source
	// SetStepNotice shows a notice on a running step ("" clears it).
	SetStepNotice(ctx context.Context, deployID, step, notice string) error
}

// Plugin is the cluster-ready step plugin.
type Plugin struct {
	st    Store
	every time.Duration
}

// New returns the plugin reading st.
func New(st Store) *Plugin { return &Plugin{st: st, every: DefaultEvery} }

// WithPollInterval returns a copy of p polling every d (tests).
func (p *Plugin) WithPollInterval(d time.Duration) *Plugin {
	c := *p
	c.every = d
	return &c
}

type config struct {
	cluster    string
	timeout    time.Duration
	staleAfter time.Duration
}

func parse(with map[string]any) (config, error) {
	c := config{timeout: DefaultTimeout, staleAfter: clusterstate.DefaultStaleAfter}
	s := plugin.ReadSettings(with, "cluster", "timeout", "stale_after")
	if s.Require("cluster") && s.String("cluster", &c.cluster) && !clusterstate.ValidClusterName(c.cluster) {
		s.Fail("cluster", "with.cluster %q must name a cluster (lower-case letters, digits, '-' and '.')", c.cluster)
	}
	s.Duration("timeout", &c.timeout)
	s.Duration("stale_after", &c.staleAfter)
	if err := s.Err(); err != nil {
		return c, fmt.Errorf("cluster-ready: %w", err)
	}
	return c, nil
}

// Validate checks `with`.
func (p *Plugin) Validate(with map[string]any) error {
	_, err := parse(with)
	return err
}

// Run waits for the deploy's workloads on the cluster.
func (p *Plugin) Run(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	c, err := parse(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	return p.AwaitReady(ctx, pc, Await{Cluster: c.cluster, Timeout: c.timeout, StaleAfter: c.staleAfter})
}

// Await is what AwaitReady waits for.
type Await struct {
	Cluster string
	// Timeout bounds the wait (default DefaultTimeout).
	Timeout time.Duration
	// StaleAfter is how long without a report before the notice shows
	// (default 60 s).
	StaleAfter time.Duration
	// Workloads, when set, are the only workloads of the deploy looked at
	// ("Deployment ns/name"); each must be reported. A kubernetes rollout
	// wave waits for the workloads that wave changed.
	Workloads []string
}

// AwaitReady is Run's wait, for the kubernetes plugin's health gate
// between rollout waves: pc's deploy on a.Cluster, as the agent reports it.
func (p *Plugin) AwaitReady(ctx context.Context, pc plugin.Context, a Await) (plugin.Result, error) {
	c := config{cluster: a.Cluster, timeout: a.Timeout, staleAfter: a.StaleAfter}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.staleAfter <= 0 {
		c.staleAfter = clusterstate.DefaultStaleAfter
	}
	logf := func(format string, args ...any) {
		if pc.Log != nil {
			fmt.Fprintf(pc.Log, format+"\n", args...)
		}
	}
	logf("waiting up to %s for deploy %s on cluster %s", c.timeout, pc.DeployID, c.cluster)
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, err := clusterstate.Wait(wctx, nudgingSource{p.st, pc.Log, a.Workloads}, c.cluster, pc.DeployID, clusterstate.WaitOptions{
		Every:      p.every,
		StaleAfter: c.staleAfter,
		OnWaiting:  func(waiting string) { logf("waiting: %s", waiting) },
		OnNotice: func(notice string) {
			if notice != "" {
				logf("%s", notice)
			} else {
				logf("the agent of cluster %s reports again", c.cluster)
			}
			if err := p.st.SetStepNotice(ctx, pc.DeployID, pc.Step, notice); err != nil {
				logf("cannot show the notice on the step: %v", err)
			}
		},
	})
	var failed *clusterstate.FailedError
	switch {
	case err == nil:
		logf("deploy %s is ready on cluster %s: %s", pc.DeployID, c.cluster, summary(v))
		return plugin.Result{"cluster": c.cluster, "ready": true, "workloads": v.Workloads}, nil
	case errors.As(err, &failed):
		logf("%s", failed.Message)
		return nil, plugin.Permanent(failed)
	case ctx.Err() != nil:
		return nil, ctx.Err() // the deploy is stopping: not this step's verdict
	case errors.Is(err, context.DeadlineExceeded):
		msg := fmt.Sprintf("cluster-ready: deploy %s not ready on cluster %s after %s", pc.DeployID, c.cluster, c.timeout)
		if v.Waiting != "" {
			msg += ": " + v.Waiting
		}
		return nil, plugin.Permanent(errors.New(msg))
	}
	return nil, err
}

// nudgingSource reads the store and, at each poll, writes nothing to the
// step's log: a log writer that batches lines gets the chance to flush
// those waiting, so the notice shows while the step still waits.
type nudgingSource struct {
	st   Store
	log  io.Writer
	only []string // the workloads looked at, all when empty
}

func (n nudgingSource) Observe(ctx context.Context, cluster, deployID string) (clusterstate.Observation, error) {
	if n.log != nil {
		_, _ = n.log.Write(nil)
	}
	o, err := n.st.Observe(ctx, cluster, deployID)
	if err != nil || len(n.only) == 0 {
		return o, err
	}
	// Only the workloads asked for; one not reported yet is awaited (a
	// report older than the wave's change shows the previous workloads).
	seen := map[string]bool{}
	kept := o.Workloads[:0:0]
	for _, w := range o.Workloads {
		k := w.Kind + " " + w.Namespace + "/" + w.Name
		if slices.Contains(n.only, k) {
			kept = append(kept, w)
			seen[k] = true
		}
	}
	for _, k := range n.only {
		if seen[k] {
			continue
		}
		kind, rest, _ := strings.Cut(k, " ")
		ns, name, _ := strings.Cut(rest, "/")
		kept = append(kept, clusterstate.Workload{Kind: kind, Namespace: ns, Name: name, DeployID: deployID,
			KStatus: clusterstate.KStatusNotFound, KStatusMessage: "not reported by the agent yet"})
	}
	o.Workloads = kept
	return o, nil
}

func summary(v clusterstate.Verdict) string {
	parts := make([]string, 0, len(v.Workloads))
	for _, w := range v.Workloads {
		parts = append(parts, fmt.Sprintf("%s %s/%s %d/%d ready", w.Kind, w.Namespace, w.Name, w.Replicas.Ready, w.Replicas.Desired))
	}
	return strings.Join(parts, ", ")
}
