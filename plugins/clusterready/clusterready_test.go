package clusterready_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/clusterready"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		with map[string]any
		ok   bool
	}{
		{"cluster only", map[string]any{"cluster": "prod-eu-1"}, true},
		{"everything", map[string]any{"cluster": "c1", "timeout": "10m", "stale_after": "60s"}, true},
		{"no cluster", map[string]any{}, false},
		{"bad cluster", map[string]any{"cluster": "Prod EU"}, false},
		{"cluster not a string", map[string]any{"cluster": 3}, false},
		{"bad timeout", map[string]any{"cluster": "c1", "timeout": "soon"}, false},
		{"negative stale_after", map[string]any{"cluster": "c1", "stale_after": "-1s"}, false},
		{"unknown key", map[string]any{"cluster": "c1", "namespace": "shop"}, false},
	}
	p := clusterready.New(nil)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := p.Validate(tt.with); (err == nil) != tt.ok {
				t.Errorf("Validate = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// fakeStore returns one observation and records the notices set.
type fakeStore struct {
	mu      sync.Mutex
	obs     clusterstate.Observation
	notices []string
}

func (f *fakeStore) Observe(context.Context, string, string) (clusterstate.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.obs, nil
}

func (f *fakeStore) SetStepNotice(_ context.Context, _, _, notice string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notices = append(f.notices, notice)
	return nil
}

func TestRun(t *testing.T) {
	declared := &clusterstate.Declared{DeployID: "d1", Version: "1"}
	wl := func(kstatus string, ready int32) clusterstate.Workload {
		return clusterstate.Workload{Kind: "Deployment", Namespace: "shop", Name: "billing", DeployID: "d1", Version: "1",
			Replicas: clusterstate.Replicas{Desired: 2, Ready: ready, Updated: ready}, KStatus: kstatus}
	}
	recent := time.Now()
	tests := []struct {
		name       string
		obs        clusterstate.Observation
		with       map[string]any
		wantErr    string
		permanent  bool
		wantNotice bool
	}{
		{"ready", clusterstate.Observation{Cluster: "c1", Reported: true, LastReportAt: recent, Declared: declared,
			Workloads: []clusterstate.Workload{wl("Current", 2)}}, map[string]any{"cluster": "c1"}, "", false, false},
		{"failed", clusterstate.Observation{Cluster: "c1", Reported: true, LastReportAt: recent, Declared: declared,
			Workloads: []clusterstate.Workload{wl("InProgress", 1)},
			Pods: []clusterstate.Pod{{Namespace: "shop", Name: "billing-x", DeployID: "d1", Phase: "Running",
				Containers: []clusterstate.Container{{Name: "app", WaitingReason: "CrashLoopBackOff"}}}}},
			map[string]any{"cluster": "c1"}, "shop/billing-x (app waiting: CrashLoopBackOff)", true, false},
		{"timeout says what it waited for", clusterstate.Observation{Cluster: "c1", Reported: true, LastReportAt: recent, Declared: declared,
			Workloads: []clusterstate.Workload{wl("InProgress", 1)}},
			map[string]any{"cluster": "c1", "timeout": "100ms"}, "not ready on cluster c1 after 100ms: Deployment shop/billing: 1/2 ready", true, false},
		{"silent agent", clusterstate.Observation{Cluster: "c1", Reported: true, LastReportAt: recent.Add(-time.Hour), Declared: declared,
			Workloads: []clusterstate.Workload{wl("InProgress", 1)}},
			map[string]any{"cluster": "c1", "timeout": "100ms", "stale_after": "1s"}, "after 100ms", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := &fakeStore{obs: tt.obs}
			var log bytes.Buffer
			res, err := clusterready.New(st).WithPollInterval(5*time.Millisecond).Run(context.Background(),
				plugin.Context{DeployID: "d1", Step: "wait", With: tt.with, Log: &log})
			if tt.wantErr == "" {
				if err != nil || res["ready"] != true {
					t.Fatalf("Run = %v, %v", res, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tt.wantErr) || plugin.IsPermanent(err) != tt.permanent {
				t.Fatalf("Run error = %v (permanent %v), want %q (permanent %v)", err, plugin.IsPermanent(err), tt.wantErr, tt.permanent)
			}
			st.mu.Lock()
			defer st.mu.Unlock()
			if got := len(st.notices) > 0 && strings.HasPrefix(st.notices[0], clusterstate.NoticePrefix); got != tt.wantNotice {
				t.Errorf("notices %q, want a notice: %v", st.notices, tt.wantNotice)
			}
			if tt.wantNotice && !strings.Contains(log.String(), clusterstate.NoticePrefix) {
				t.Errorf("log %q has no notice", log.String())
			}
		})
	}
}

// AwaitReady looks only at the workloads it is given: the 100 % wave of a
// kubernetes rollout waits for stable even when a report still shows the
// deploy's canary ready and stable not yet under the deploy's id; the
// silent agent's notice shows on the gate's step.
func TestAwaitReadyWorkloads(t *testing.T) {
	declared := &clusterstate.Declared{DeployID: "d1", Version: "2"}
	canary := clusterstate.Workload{Kind: "Deployment", Namespace: "shop", Name: "billing-canary", DeployID: "d1", Version: "2",
		Replicas: clusterstate.Replicas{Desired: 2, Ready: 2, Updated: 2}, KStatus: "Current"}
	st := &fakeStore{obs: clusterstate.Observation{Cluster: "c1", Reported: true, LastReportAt: time.Now().Add(-time.Hour),
		Declared: declared, Workloads: []clusterstate.Workload{canary}}}
	p := clusterready.New(st).WithPollInterval(5 * time.Millisecond)
	pc := plugin.Context{DeployID: "d1", Step: "health-gate[100%]"}
	if _, err := p.AwaitReady(context.Background(), pc, clusterready.Await{Cluster: "c1"}); err != nil {
		t.Fatalf("all the deploy's workloads: %v, want ready (the canary is)", err)
	}
	_, err := p.AwaitReady(context.Background(), pc, clusterready.Await{Cluster: "c1", Timeout: 100 * time.Millisecond,
		StaleAfter: time.Second, Workloads: []string{"Deployment shop/billing"}})
	if err == nil || !strings.Contains(err.Error(), "Deployment shop/billing: kstatus NotFound: not reported by the agent yet") {
		t.Fatalf("stable only: %v, want a timeout saying stable is not reported", err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.notices) == 0 || !strings.HasPrefix(st.notices[len(st.notices)-1], clusterstate.NoticePrefix) {
		t.Errorf("notices %q, want the silent agent's notice on the gate", st.notices)
	}
}
