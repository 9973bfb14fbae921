// Package agent is `manent agent` (SPEC §9): next to a Kubernetes cluster,
// every interval it reads — read-only, with client-go — the pods,
// Deployments, StatefulSets and DaemonSets labelled manent.io/deploy-id,
// computes each workload's state with kstatus, and posts the full snapshot
// to manent-server. Polling, not watching: no long-lived connections, no
// resync logic, no missed events. A failed read or post is logged and tried
// again next cycle; the agent stops cleanly when its context ends.
//
// It imports pkg/clusterstate (the snapshot) and pkg/api (the client), and
// k8s.io/client-go and sigs.k8s.io/cli-utils; the server never imports it.
package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
)

// DefaultInterval is how often the agent reports.
const DefaultInterval = 5 * time.Second

// Reporter sends a snapshot to manent-server (*api.Client).
type Reporter interface {
	Report(ctx context.Context, snap *clusterstate.Snapshot) (*api.ReportResult, error)
}

// Config configures an Agent.
type Config struct {
	// Cluster is the name the agent reports under; its token must have
	// agent.report on it.
	Cluster string
	// Namespace limits the agent to one namespace ("" reads all).
	Namespace string
	// Interval is the time between two cycles (default 5 s).
	Interval time.Duration
	// Kube reads the cluster.
	Kube kubernetes.Interface
	// Server receives the snapshots.
	Server Reporter
	Logger *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Agent reports one cluster.
type Agent struct {
	cfg Config
	log *slog.Logger
}

// New checks cfg and returns an agent.
func New(cfg Config) (*Agent, error) {
	if !clusterstate.ValidClusterName(cfg.Cluster) {
		return nil, fmt.Errorf("cluster name %q is not valid: lower-case letters, digits, '-' and '.', at most 63", cfg.Cluster)
	}
	if cfg.Kube == nil || cfg.Server == nil {
		return nil, errors.New("agent: Kube and Server are required")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Agent{cfg: cfg, log: cfg.Logger.With("cluster", cfg.Cluster)}, nil
}

// FailureLogEvery is how often a failure that goes on is logged again.
const FailureLogEvery = 5 * time.Minute

// Run reports every interval until ctx ends, then returns nil. A cycle that
// fails (cluster or server unreachable, snapshot refused) is logged and the
// next one starts on time: each cycle sends the whole state, so nothing is
// lost by skipping one.
//
// A failure is logged when it starts, when its error changes, and then
// every FailureLogEvery while it lasts (with since when and how many
// cycles failed), not at every cycle: a mistake that only an operator
// fixes (a revoked token, a missing RBAC grant) would write 720 lines an
// hour at the default interval.
func (a *Agent) Run(ctx context.Context) error {
	a.log.Info("agent started", "interval", a.cfg.Interval.String(), "namespace", nsLabel(a.cfg.Namespace))
	tick := time.NewTicker(a.cfg.Interval)
	defer tick.Stop()
	var (
		failing           bool
		failed            int
		lastErr           string
		since, lastLogged time.Time
	)
	for {
		err := a.Once(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			now := a.cfg.Now()
			if !failing {
				since, failed = now, 0
			}
			failed++
			if !failing || err.Error() != lastErr || now.Sub(lastLogged) >= FailureLogEvery {
				a.log.Error("report failed; trying again next cycle", "error", err,
					"failing_since", since.UTC().Format(time.RFC3339), "failed_cycles", failed)
				lastErr, lastLogged = err.Error(), now
			}
			failing = true
		case failing:
			a.log.Info("reporting again", "failing_since", since.UTC().Format(time.RFC3339), "failed_cycles", failed)
			failing = false
		}
		select {
		case <-ctx.Done():
			a.log.Info("agent stopped")
			return nil
		case <-tick.C:
		}
	}
}

// Once runs one cycle: read the cluster, post the snapshot. Each half is
// bounded by the interval (at least 10 s) so a hung call cannot stall the
// agent. A snapshot over the server's limits is not sent (checkSize).
func (a *Agent) Once(ctx context.Context) error {
	budget := max(a.cfg.Interval, 10*time.Second)
	rctx, cancel := context.WithTimeout(ctx, budget)
	snap, err := Collect(rctx, a.cfg.Kube, a.cfg.Namespace, a.cfg.Cluster, a.cfg.Now())
	cancel()
	if err != nil {
		return fmt.Errorf("read the cluster: %w", err)
	}
	if err := checkSize(snap); err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	start := time.Now()
	res, err := a.cfg.Server.Report(pctx, snap)
	if err != nil {
		if na := (*api.NotAPIAnswerError)(nil); errors.As(err, &na) && na.Status == http.StatusRequestEntityTooLarge {
			return proxyTooLarge(snap, err)
		}
		return fmt.Errorf("post the snapshot (%d pods, %d workloads): %w", len(snap.Pods), len(snap.Workloads), err)
	}
	a.log.Debug("reported", "pods", res.Pods, "workloads", res.Workloads, "inserted", res.Inserted,
		"updated", res.Updated, "deleted", res.Deleted, "duration", time.Since(start))
	return nil
}

// proxyTooLarge is the error of a snapshot that something between the
// agent and manent-server (a reverse proxy, an ingress) refused as too
// large: its 413 is no manent answer, and manent-server, which takes up to
// clusterstate.MaxBytes, never saw the snapshot. Its own words ("413
// Request Entity Too Large" in HTML) say neither how large the snapshot
// was nor what to change.
func proxyTooLarge(snap *clusterstate.Snapshot, err error) error {
	size := "?"
	if b, merr := json.Marshal(snap); merr == nil {
		size = mib(len(b))
	}
	return fmt.Errorf("post the snapshot (%d pods, %d workloads, %s): refused as too large (413) by a proxy in front of manent-server, "+
		"not by manent-server, which takes up to %s; nothing was sent, the server keeps the last report: raise that proxy's body limit "+
		"for /api/v1/agent/reports to %s (nginx: client_max_body_size 16m; ingress-nginx: the annotation "+
		"nginx.ingress.kubernetes.io/proxy-body-size: 16m): %w",
		len(snap.Pods), len(snap.Workloads), size, mib(clusterstate.MaxBytes), mib(clusterstate.MaxBytes), err)
}

func nsLabel(ns string) string {
	if ns == "" {
		return "(all)"
	}
	return ns
}

// KubeConfig returns the REST config to read the cluster: kubeconfig when
// set; else the in-cluster config when KUBERNETES_SERVICE_HOST is set; else
// the usual kubeconfig rules ($KUBECONFIG, ~/.kube/config).
func KubeConfig(kubeconfig string, getenv func(string) string) (*rest.Config, error) {
	if getenv == nil {
		getenv = os.Getenv
	}
	if kubeconfig == "" && getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	} else if v := getenv("KUBECONFIG"); v != "" {
		rules.Precedence = filepath.SplitList(v)
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if clientcmd.IsEmptyConfig(err) {
		// client-go's own words suggest KUBERNETES_MASTER, which is not how
		// the agent finds a cluster.
		where := strings.Join(rules.Precedence, string(filepath.ListSeparator))
		if getenv("KUBECONFIG") != "" {
			where = "$KUBECONFIG (" + where + ")"
		}
		return nil, fmt.Errorf("no Kubernetes cluster configured: %s has none; give --kubeconfig, or run the agent in the cluster (its ServiceAccount, KUBERNETES_SERVICE_HOST)", where)
	}
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}
