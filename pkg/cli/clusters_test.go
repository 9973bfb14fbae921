package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
)

// sampleClusterStatus has a workload still deploying, one failing, one
// current, one drifted (its deploy ended, another version runs), and pods
// waiting, crashing, completed and ready.
func sampleClusterStatus() *clusterstate.Status {
	declared := &clusterstate.Declared{DeployID: "dpl_2", Application: "billing", Environment: "prod", Version: "1.4.2", State: manent.StatePending}
	ended := &clusterstate.Declared{DeployID: "dpl_1", Application: "billing", Environment: "prod", Version: "1.4.1", State: manent.StateSuccess}
	wl := func(name, kstatus string, ready int32) clusterstate.Workload {
		return clusterstate.Workload{Kind: "Deployment", Namespace: "shop", Name: name, DeployID: "dpl_2",
			Application: "billing", Environment: "prod", Version: "1.4.2", Images: []string{"registry.example/" + name + ":1.4.2"},
			Replicas: clusterstate.Replicas{Desired: 3, Ready: ready, Updated: 3, Available: ready}, KStatus: kstatus}
	}
	pods := []clusterstate.Pod{
		{Namespace: "shop", Name: "api-7d9f-a", DeployID: "dpl_2", Phase: "Pending", Owner: "ReplicaSet/api-7d9f",
			Containers: []clusterstate.Container{{Name: "app", WaitingReason: "ImagePullBackOff"}}},
		{Namespace: "shop", Name: "billing-5c6d-a", DeployID: "dpl_2", Phase: "Running", Ready: true, Restarts: 1, Owner: "ReplicaSet/billing-5c6d",
			Containers: []clusterstate.Container{{Name: "app", Ready: true, Restarts: 1}, {Name: "migrate", Init: true, TerminatedReason: "Completed"}}},
		{Namespace: "shop", Name: "billing-5c6d-b", DeployID: "dpl_2", Phase: "Running", Owner: "ReplicaSet/billing-5c6d",
			Containers: []clusterstate.Container{{Name: "app"}}},
	}
	st := &clusterstate.Status{Cluster: "prod-eu-1", LastReportAt: *ts(95), ReportedAt: *ts(94), Pods: pods}
	for _, w := range []clusterstate.Workload{wl("api", "InProgress", 0), wl("billing", "InProgress", 2), wl("web", "Current", 3)} {
		st.Workloads = append(st.Workloads, clusterstate.Evaluate(w, declared, pods))
	}
	cron := wl("cron", "Current", 3)
	cron.DeployID, cron.Version, cron.Images = "dpl_1", "9.9.9", []string{"registry.example/cron:9.9.9"}
	st.Workloads = append(st.Workloads, clusterstate.Evaluate(cron, ended, pods))
	return st
}

func TestRenderClusterStatus(t *testing.T) {
	s, out := testStreams(nil)
	if err := renderClusterStatus(s, out, sampleClusterStatus(), now()); err != nil {
		t.Fatal(err)
	}
	golden(t, "cluster_status", out.Bytes())
}

// On a colour terminal the workloads' STATE column is coloured as deploy
// states are: CURRENT green, FAILED red, DRIFTED yellow (a warning: changed
// outside manent), DEPLOYING cyan (moving).
func TestRenderClusterStatusColours(t *testing.T) {
	s, out := testStreams(map[string]string{"MANENT_FORCE_TTY": "1"})
	if err := renderClusterStatus(s, out, sampleClusterStatus(), now()); err != nil {
		t.Fatal(err)
	}
	for state, sgr := range map[string]string{
		clusterstate.StateCurrent: "\x1b[32m", clusterstate.StateFailed: "\x1b[31m",
		clusterstate.StateDrifted: "\x1b[33m", clusterstate.StateDeploying: "\x1b[36m",
	} {
		if !strings.Contains(out.String(), sgr+state) {
			t.Errorf("%s not coloured %q in\n%q", state, sgr, out.String())
		}
	}
}

// The list marks a cluster silent once no report came for 2 minutes: its
// agent or the agent's network is down, and what it last said may be stale.
func TestRenderClustersSilent(t *testing.T) {
	s, out := testStreams(nil)
	items := []api.ClusterSummary{
		{Cluster: "eu-1", LastReportAt: now().Add(-5 * time.Second), Pods: 12, Workloads: 3},
		{Cluster: "us-1", LastReportAt: now().Add(-10 * time.Minute)},
	}
	if err := renderClusters(s, items, now()); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"eu-1     just now", "us-1     10m ago (silent)"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
	if strings.Count(got, "silent") != 1 {
		t.Errorf("one silent cluster, got\n%s", got)
	}
}
