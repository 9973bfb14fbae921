package cli

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/manent-io/manent/pkg/agent"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
)

// AgentOptions are the inputs of `manent agent`.
type AgentOptions struct {
	IO     *IOStreams
	Client func() (*api.Client, error)
	Getenv func(string) string

	Cluster    string
	Interval   time.Duration
	Kubeconfig string
	Namespace  string
	LogFormat  string
	LogLevel   string
}

// NewCmdAgent builds `manent agent`.
func NewCmdAgent(f *Factory, runF func(*AgentOptions) error) *cobra.Command {
	opts := &AgentOptions{IO: f.IOStreams, Client: f.Client, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "agent --cluster <name>",
		Short: "Report what runs in a Kubernetes cluster to manent-server",
		Long: `Report what runs in a Kubernetes cluster to manent-server (SPEC §9).

Every --interval the agent reads, read-only, the pods, Deployments,
StatefulSets and DaemonSets labelled ` + clusterstate.LabelDeployID + `, computes each
workload's state with kstatus, and posts the full snapshot to
POST /api/v1/agent/reports under --cluster. It polls; it never watches.

The token (--token or MANENT_TOKEN) needs the permission agent.report on
that cluster. Inside a cluster (KUBERNETES_SERVICE_HOST set) the agent uses
its ServiceAccount; elsewhere --kubeconfig, $KUBECONFIG or ~/.kube/config.

A failed read or post is logged and tried again next cycle; the agent keeps
going while the cluster's API server or manent-server is down. SIGTERM or
SIGINT stop it cleanly (exit 0). Logs are JSON on stderr.`,
		Example: `  manent agent --server https://manent.example --cluster prod-eu-1
  MANENT_TOKEN=… manent agent --cluster staging --namespace shop --interval 10s`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Cluster == "" {
				opts.Cluster = opts.Getenv("MANENT_CLUSTER")
			}
			if opts.Cluster == "" {
				return usageErrorf("--cluster is required (or MANENT_CLUSTER)")
			}
			if !clusterstate.ValidClusterName(opts.Cluster) {
				return usageErrorf("--cluster %q is not a cluster name: lower-case letters, digits, '-' and '.', at most 63", opts.Cluster)
			}
			if opts.Interval < time.Second {
				return usageErrorf("--interval must be at least 1s, got %s", opts.Interval)
			}
			if opts.LogFormat != "json" && opts.LogFormat != "text" {
				return usageErrorf("--log-format must be json or text")
			}
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(opts.LogLevel)); err != nil {
				return usageErrorf("--log-level must be debug, info, warn or error")
			}
			if runF != nil {
				return runF(opts)
			}
			return agentRun(cmd.Context(), opts, lvl)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Cluster, "cluster", "", "name this cluster reports under (env MANENT_CLUSTER)")
	fl.DurationVar(&opts.Interval, "interval", agent.DefaultInterval, "time between two reports")
	fl.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&opts.Namespace, "namespace", "", "read only this namespace (default: all)")
	fl.StringVar(&opts.LogFormat, "log-format", "json", "log format on stderr: json or text")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

func agentRun(ctx context.Context, opts *AgentOptions, level slog.Level) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	rc, err := agent.KubeConfig(opts.Kubeconfig, opts.Getenv)
	if err != nil {
		return usageErrorf("%v", err)
	}
	rc.UserAgent = "manent-agent"
	rc.Timeout = max(opts.Interval, 10*time.Second)
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return usageErrorf("kubernetes client: %v", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(opts.IO.ErrOut, hopts)
	if opts.LogFormat == "text" {
		h = slog.NewTextHandler(opts.IO.ErrOut, hopts)
	}
	a, err := agent.New(agent.Config{
		Cluster: opts.Cluster, Namespace: opts.Namespace, Interval: opts.Interval,
		Kube: kube, Server: client, Logger: slog.New(h).With("server", client.Server()),
	})
	if err != nil {
		return usageErrorf("%v", err)
	}
	if err := a.Run(ctx); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil // stopped by SIGTERM/SIGINT: a clean exit
}
