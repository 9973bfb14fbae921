package cli

import (
	"log/slog"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
)

// DefaultAgentInterval is the default --interval of `manent agent`, the
// agent package's DefaultInterval (pkg/agentcmd checks they agree; manent
// does not link the agent, see sibling.go).
const DefaultAgentInterval = 5 * time.Second

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

// NewCmdAgent builds `manent agent`. runF runs the checked options: nil in
// manent, which runs the command in the manent-agent binary (see
// sibling.go); pkg/agentcmd gives the real agent; tests check flag parsing.
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
that cluster. --kubeconfig, when given, is used everywhere; otherwise,
inside a cluster (KUBERNETES_SERVICE_HOST set) the agent uses its
ServiceAccount, and elsewhere $KUBECONFIG or ~/.kube/config.

A failed read or post is logged and tried again next cycle; the agent keeps
going while the cluster's API server or manent-server is down. Credentials
the API server refuses (401: a wrong or expired token or certificate in the
kubeconfig) and a missing permission (403) are logged with what to fix,
and so is a proxy in front of manent-server that refuses the snapshot as
too large (413; manent-server takes up to 16 MiB).
SIGTERM or
SIGINT stop it cleanly (exit 0). Logs are JSON on stderr.

The agent is a separate binary, manent-agent, shipped beside manent (the
release archive, the image): manent runs it with the same flags, so that
the other commands do not carry the Kubernetes client. 'manent-agent
--cluster x' is the same as 'manent agent --cluster x'.`,
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
			if _, err := opts.Level(); err != nil {
				return usageErrorf("--log-level must be debug, info, warn or error")
			}
			if runF != nil {
				return runF(opts)
			}
			return runSibling(cmd.Context(), f, cmd, AgentBinary, nil, args)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Cluster, "cluster", "", "name this cluster reports under (env MANENT_CLUSTER)")
	fl.DurationVar(&opts.Interval, "interval", DefaultAgentInterval, "time between two reports")
	fl.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: in-cluster when KUBERNETES_SERVICE_HOST is set, else $KUBECONFIG or ~/.kube/config)")
	fl.StringVar(&opts.Namespace, "namespace", "", "read only this namespace (default: all)")
	fl.StringVar(&opts.LogFormat, "log-format", "json", "log format on stderr: json or text")
	fl.StringVar(&opts.LogLevel, "log-level", "info", "log level: debug, info, warn or error")
	return cmd
}

// Level is the parsed --log-level.
func (o *AgentOptions) Level() (slog.Level, error) {
	var lvl slog.Level
	err := lvl.UnmarshalText([]byte(o.LogLevel))
	return lvl, err
}
