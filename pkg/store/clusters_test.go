package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// A snapshot read before the one applied is refused while the cluster's
// agent reports (two agents under one name, a delayed request): but an
// agent whose clock is behind the last one's — rescheduled onto a node an
// hour late, or its clock stepped back — is taken once the cluster has been
// silent for SnapshotOrderWindow, not refused until its clock catches up.
func TestReplaceSnapshotOrder(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, url string) {
		ctx := context.Background()
		st := openStore(t, url)
		t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
		snap := func(read time.Time, pods ...string) *clusterstate.Snapshot {
			s := &clusterstate.Snapshot{Cluster: "c1", Time: read, Pods: []clusterstate.Pod{}, Workloads: []clusterstate.Workload{}}
			for _, p := range pods {
				s.Pods = append(s.Pods, clusterstate.Pod{Namespace: "shop", Name: p, DeployID: "dpl_1", Containers: []clusterstate.Container{}})
			}
			return s
		}
		if _, err := st.ReplaceSnapshot(ctx, snap(t0, "a"), t0); err != nil {
			t.Fatal(err)
		}
		// An hour behind, 5 s after the last report: refused, saying why.
		_, err := st.ReplaceSnapshot(ctx, snap(t0.Add(-time.Hour), "b"), t0.Add(5*time.Second))
		if !errors.Is(err, manent.Errorf(manent.EConflict, "")) {
			t.Fatalf("an older snapshot 5 s after the last one: %v, want a conflict", err)
		}
		for _, want := range []string{"another agent", "clock"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("refusal %q does not mention %q", err, want)
			}
		}
		// The same, once the cluster has been silent long enough: taken.
		late := t0.Add(store.SnapshotOrderWindow + time.Second)
		if _, err := st.ReplaceSnapshot(ctx, snap(t0.Add(-time.Hour), "b"), late); err != nil {
			t.Fatalf("a late agent's snapshot after the cluster was silent for %s: %v", store.SnapshotOrderWindow+time.Second, err)
		}
		got, err := st.ClusterStatus(ctx, "c1")
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Pods) != 1 || got.Pods[0].Name != "b" || !got.LastReportAt.Equal(late) {
			t.Fatalf("cluster holds %+v (last report %s), want pod b reported at %s", got.Pods, got.LastReportAt, late)
		}
		// And its next one, a cycle later by its own clock.
		if _, err := st.ReplaceSnapshot(ctx, snap(t0.Add(-time.Hour+5*time.Second), "c"), late.Add(5*time.Second)); err != nil {
			t.Fatalf("the late agent's next snapshot: %v", err)
		}
	})
}
