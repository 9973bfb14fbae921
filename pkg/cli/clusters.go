package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
)

// ClustersStatusOptions are the inputs of `manent clusters status`.
type ClustersStatusOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time

	Cluster string
}

// ClustersListOptions are the inputs of `manent clusters list`.
type ClustersListOptions struct {
	IO       *IOStreams
	Client   func() (*api.Client, error)
	Exporter *Exporter
	Now      func() time.Time
}

// NewCmdClusters builds `manent clusters` (the list) and its subcommands.
func NewCmdClusters(f *Factory, runF func(*ClustersStatusOptions) error) *cobra.Command {
	list := newCmdClustersList(f)
	cmd := &cobra.Command{
		Use:   "clusters [list | status <cluster>]",
		Short: "Show what the agents report about Kubernetes clusters",
		Long: `Show what the agents (manent agent) report about Kubernetes clusters:
'manent clusters' (or 'manent clusters list') lists the clusters that have
reported, 'manent clusters status <cluster>' shows one cluster's workloads
and pods beside what was deployed.`,
		Example: `  manent clusters
  manent clusters status prod-eu-1`,
		Args:        groupArgs,
		Annotations: map[string]string{showOne: "status"},
		RunE:        list.RunE,
	}
	cmd.AddCommand(list, newCmdClustersStatus(f, runF))
	return cmd
}

func newCmdClustersList(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the clusters whose agents have reported",
		Long: `List the clusters whose agents have reported: when the last report arrived
(LAST REPORT, relative; "silent" after 2 minutes without one, when the agent
or its network is down) and how many pods and workloads it holds. A token
with agent.report on a cluster sees all of it; another token sees the
clusters that hold objects of the applications and environments it may
read, counting only those.

-o json prints the list as the API returns it, with RFC 3339 times.`,
		Example: `  manent clusters list
  manent clusters list --jq '.items[].cluster'`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return clustersListRun(cmd.Context(), &ClustersListOptions{IO: f.IOStreams, Client: f.Client, Exporter: f.Exporter(), Now: f.Now})
		},
	}
}

func clustersListRun(ctx context.Context, opts *ClustersListOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	res, err := client.Clusters(ctx)
	if err != nil {
		return err
	}
	if res.Items == nil {
		res.Items = []api.ClusterSummary{}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, res)
	}
	if len(res.Items) == 0 {
		fmt.Fprintln(opts.IO.ErrOut, "no cluster this token may see has reported (agents report with 'manent agent'; see 'manent agent --help')")
		return nil
	}
	return renderClusters(opts.IO, res.Items, opts.Now())
}

// renderClusters prints the clusters as a table, marking those silent for
// more than clusterstate.SilentAfter.
func renderClusters(s *IOStreams, items []api.ClusterSummary, now time.Time) error {
	t := s.NewTable("CLUSTER", "LAST REPORT", "PODS", "WORKLOADS")
	for _, c := range items {
		last := relativeTime(c.LastReportAt, now)
		if now.Sub(c.LastReportAt) > clusterstate.SilentAfter {
			last += " (silent)"
		}
		t.AddRow(c.Cluster, last, strconv.Itoa(c.Pods), strconv.Itoa(c.Workloads))
	}
	return t.Render()
}

func newCmdClustersStatus(f *Factory, runF func(*ClustersStatusOptions) error) *cobra.Command {
	opts := &ClustersStatusOptions{IO: f.IOStreams, Client: f.Client, Now: f.Now}
	return &cobra.Command{
		Use:   "status <cluster>",
		Short: "Show a cluster's workloads and pods as its agent last reported them",
		Long: `Show a cluster as its agent (manent agent) last reported it: when, then
each workload — observed (version, images, replicas ready/desired, kstatus)
beside declared (the deploy named by its manent.io/deploy-id label) with its
state: DEPLOYING until observed matches declared, DRIFTED when the deploy has
ended (SUCCESS, ERROR…) and another version runs (changed outside manent),
FAILED when kstatus says Failed or a pod's container waits or ended with
ImagePullBackOff, CrashLoopBackOff, OOMKilled…, else CURRENT — then each pod
with its phase, readiness, restarts and container reasons.

-o json prints the status as the API returns it.`,
		Example: `  manent clusters status prod-eu-1
  manent clusters status prod-eu-1 -o json | jq '.workloads[] | select(.state != "CURRENT")'`,
		Args: idArg("cluster name"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Cluster = args[0]
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return clustersStatusRun(cmd.Context(), opts)
		},
	}
}

func clustersStatusRun(ctx context.Context, opts *ClustersStatusOptions) error {
	client, err := opts.Client()
	if err != nil {
		return err
	}
	st, err := client.ClusterStatus(ctx, opts.Cluster)
	if err != nil {
		return err
	}
	if st.Pods == nil {
		st.Pods = []clusterstate.Pod{}
	}
	if st.Workloads == nil {
		st.Workloads = []clusterstate.WorkloadStatus{}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, st)
	}
	return renderClusterStatus(opts.IO, opts.IO.Out, st, opts.Now())
}

func renderClusterStatus(s *IOStreams, w io.Writer, st *clusterstate.Status, now time.Time) error {
	f := s.NewFields()
	f.Add("Cluster", st.Cluster)
	f.Add("Last report", fmt.Sprintf("%s (%s ago)", formatTime(st.LastReportAt), formatDuration(now.Sub(st.LastReportAt).Truncate(time.Second))))
	f.Add("Workloads", strconv.Itoa(len(st.Workloads)))
	f.Add("Pods", strconv.Itoa(len(st.Pods)))
	if err := f.RenderTo(w); err != nil {
		return err
	}
	if len(st.Workloads) > 0 {
		fmt.Fprintln(w)
		t := s.NewTable("WORKLOAD", "DEPLOY", "STATE", "VERSION", "DECLARED", "READY", "UPDATED", "KSTATUS", "REASON").StateColumn(2)
		for _, wl := range st.Workloads {
			declared := ""
			if wl.Declared != nil {
				declared = wl.Declared.Version
			}
			version := wl.Version
			if version == "" {
				version = strings.Join(wl.Images, ",")
			}
			t.AddRow(wl.Kind+" "+wl.Namespace+"/"+wl.Name, wl.DeployID, wl.State, version, declared,
				fmt.Sprintf("%d/%d", wl.Replicas.Ready, wl.Replicas.Desired), strconv.Itoa(int(wl.Replicas.Updated)),
				wl.KStatus, workloadReason(wl))
		}
		if err := t.RenderTo(w); err != nil {
			return err
		}
	}
	if len(st.Pods) > 0 {
		fmt.Fprintln(w)
		t := s.NewTable("POD", "DEPLOY", "PHASE", "READY", "RESTARTS", "CONTAINERS")
		for _, p := range st.Pods {
			ready := "no"
			if p.Ready {
				ready = "yes"
			}
			t.AddRow(p.Namespace+"/"+p.Name, p.DeployID, p.Phase, ready, strconv.Itoa(int(p.Restarts)), containerSummary(p.Containers))
		}
		if err := t.RenderTo(w); err != nil {
			return err
		}
	}
	return nil
}

func workloadReason(wl clusterstate.WorkloadStatus) string {
	r := wl.Reason
	if len(wl.FailingPods) > 0 {
		r += " (" + strings.Join(wl.FailingPods, ", ") + ")"
	}
	return r
}

// containerSummary prints each container that is not simply running, e.g.
// "app waiting ImagePullBackOff, migrate terminated Completed".
func containerSummary(cs []clusterstate.Container) string {
	var parts []string
	for _, c := range cs {
		name := c.Name
		if c.Init {
			name = "init:" + name
		}
		switch {
		case c.WaitingReason != "":
			parts = append(parts, name+" waiting "+c.WaitingReason)
		case c.TerminatedReason != "":
			parts = append(parts, name+" terminated "+c.TerminatedReason)
		case !c.Ready && !c.Init:
			parts = append(parts, name+" not ready")
		}
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d ready", len(cs))
	}
	return strings.Join(parts, ", ")
}
