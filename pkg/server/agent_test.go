package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/plugins/clusterready"
	"github.com/manent-io/manent/plugins/local"
)

const (
	agentAdminToken = "agent-test-admin"
	agentC1Token    = "agent-c1-token"
)

// clusterGuard is a test double of the auth layer (pkg/server.Guard), not
// the real RBAC guard: the admin token may do everything, and
// agentC1Token may only report on cluster c1 (agent.report scoped to one
// cluster). It lets these tests check 401/403 on the agent routes without
// depending on how RBAC is configured.
type clusterGuard struct{ admin server.Guard }

func (g clusterGuard) Authenticate(ctx context.Context, authorization string) (manent.Identity, error) {
	if authorization == "Bearer "+agentC1Token {
		return manent.Identity{Subject: "token:agent-c1"}, nil
	}
	return g.admin.Authenticate(ctx, authorization)
}

func (g clusterGuard) Authorize(p manent.Identity, permission, application, environment string) error {
	return g.admin.Authorize(p, permission, application, environment)
}

func (g clusterGuard) AuthorizeSomewhere(p manent.Identity, permission, application, environment string) error {
	return g.admin.AuthorizeSomewhere(p, permission, application, environment)
}

func (g clusterGuard) AuthorizeCluster(p manent.Identity, cluster string) error {
	if p.Subject == "token:agent-c1" && cluster == "c1" {
		return nil
	}
	if g.admin.AuthorizeCluster(p, cluster) == nil {
		return nil
	}
	return manent.Errorf(manent.EForbidden, "%s may not %s on cluster %s", p.Subject, server.PermAgent, cluster)
}

// agentServer is a real manent server (store, DBOS engine, HTTP API on
// loopback) with the cluster-ready step plugin polling every 20 ms.
type agentServer struct {
	URL   string
	st    *store.Store
	admin *api.Client
	agent *api.Client
	dir   string
}

func newAgentServer(t testing.TB, db string) *agentServer {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := servertest.Config(dir)
	cfg.Database, cfg.ExecutorID = db, "agent-test"
	n, err := node.Open(ctx, cfg, node.Options{
		Guard: clusterGuard{admin: server.NewAdminGuard(agentAdminToken)},
		Plugins: func(reg *plugin.Registry, host node.Host) error {
			return errors.Join(
				reg.RegisterTarget("local", local.New(local.Options{})),
				reg.RegisterRunner("cluster-ready", clusterready.New(host.Store).WithPollInterval(20*time.Millisecond)),
			)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(n.API)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		n.Close(5 * time.Second)
	})
	return &agentServer{URL: hs.URL, st: n.Store, dir: dir,
		admin: api.NewClient(hs.URL, agentAdminToken, nil), agent: api.NewClient(hs.URL, agentC1Token, nil)}
}

// submit submits a billing/prod deploy of version whose step "cluster"
// waits on cluster c1 (before activation); staleAfter tunes the notice.
// With staleAfter "" the deploy has no such step.
func (s *agentServer) submit(t testing.TB, version, staleAfter string) string {
	t.Helper()
	art := filepath.Join(s.dir, "app.txt")
	if err := os.WriteFile(art, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := map[string]any{
		"apiVersion": "manent/v1", "application": "billing", "environment": "prod", "version": version,
		"artifact": map[string]any{"url": "file://" + art},
	}
	if staleAfter != "" {
		d["steps"] = []any{map[string]any{
			"name": "cluster", "before": "activation", "plugin": "cluster-ready", "max_retries": 0,
			"with": map[string]any{"cluster": "c1", "timeout": "2m", "stale_after": staleAfter},
		}}
	}
	b, _ := json.Marshal(d)
	res, err := s.admin.Submit(context.Background(), b, false)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return res.ID
}

func (s *agentServer) step(t testing.TB, id, name string) manent.Step {
	t.Helper()
	steps, err := s.admin.Steps(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Name == name {
			return st
		}
	}
	return manent.Step{}
}

func (s *agentServer) waitStep(t testing.TB, id, name string, cond func(manent.Step) bool, what string) manent.Step {
	t.Helper()
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		got := s.step(t, id, name)
		if cond(got) {
			return got
		}
		select {
		case <-deadline.C:
			t.Fatalf("step %s of %s: %s: not after 60s (last: %+v, output %s)", name, id, what, got, got.Output)
		case <-tick.C:
		}
	}
}

// keepReporting posts snap every 50 ms, as an agent would, until stop is
// called (at most 2,000 reports).
func (s *agentServer) keepReporting(snap func() *clusterstate.Snapshot) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 2000 {
			_, _ = s.agent.Report(context.Background(), snap())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done); <-finished }
}

func (s *agentServer) waitFinal(t testing.TB, id string) *manent.Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := s.admin.Wait(ctx, id, 20*time.Millisecond)
	if err != nil {
		t.Fatalf("wait for %s: %v", id, err)
	}
	return d
}

func (s *agentServer) logHas(t testing.TB, id, text string) bool {
	t.Helper()
	res, err := s.admin.Logs(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range res.Lines {
		if strings.Contains(l.Text, text) {
			return true
		}
	}
	return false
}

func (s *agentServer) report(t testing.TB, snap *clusterstate.Snapshot) *api.ReportResult {
	t.Helper()
	res, err := s.agent.Report(context.Background(), snap)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	return res
}

func runningPod(name, deploy string) clusterstate.Pod {
	return clusterstate.Pod{Namespace: "shop", Name: name, DeployID: deploy, Application: "billing", Environment: "prod",
		Phase: "Running", Ready: true, Containers: []clusterstate.Container{{Name: "app", Image: "billing:1", Ready: true}}}
}

func pullingPod(name, deploy string) clusterstate.Pod {
	p := runningPod(name, deploy)
	p.Phase, p.Ready = "Pending", false
	p.Containers[0].Ready, p.Containers[0].WaitingReason = false, "ImagePullBackOff"
	return p
}

func billing(deploy, version, kstatus string, ready int32) clusterstate.Workload {
	return clusterstate.Workload{Kind: clusterstate.KindDeployment, Namespace: "shop", Name: "billing", DeployID: deploy,
		Application: "billing", Environment: "prod", Version: version, Images: []string{"registry.example/billing:" + version},
		Replicas: clusterstate.Replicas{Desired: 3, Ready: ready, Updated: ready, Available: ready}, KStatus: kstatus}
}

// relabelled is w labelled for application and environment.
func relabelled(w clusterstate.Workload, application, environment string) clusterstate.Workload {
	w.Application, w.Environment = application, environment
	return w
}

func snapshot(pods []clusterstate.Pod, workloads ...clusterstate.Workload) *clusterstate.Snapshot {
	if pods == nil {
		pods = []clusterstate.Pod{}
	}
	if workloads == nil {
		workloads = []clusterstate.Workload{}
	}
	return &clusterstate.Snapshot{Cluster: "c1", Time: time.Now().UTC(), Pods: pods, Workloads: workloads}
}

func postRaw(t testing.TB, url, token string, body []byte) (int, api.Problem) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p api.Problem
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &p)
	return resp.StatusCode, p
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAgentReportRefusals: 401 without or with an invalid token, 403 for
// another cluster, 413 beyond 16 MiB or 50,000 objects, 422 for anything
// malformed (listing the problem), 409 for an older snapshot — and a
// refused snapshot changes nothing.
func TestAgentReportRefusals(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newAgentServer(t, db)
		good := snapshot([]clusterstate.Pod{runningPod("a", "dpl_1"), runningPod("b", "dpl_1")}, billing("dpl_1", "1", "Current", 3))
		srv.report(t, good)

		bad := func(edit func(s *clusterstate.Snapshot)) []byte {
			s := snapshot([]clusterstate.Pod{runningPod("c", "dpl_1"), runningPod("d", "dpl_1")})
			edit(s)
			return mustJSON(t, s)
		}
		tooMany := snapshot(nil)
		for i := range clusterstate.MaxObjects + 1 {
			tooMany.Pods = append(tooMany.Pods, clusterstate.Pod{Namespace: "n", Name: fmt.Sprintf("p%d", i), DeployID: "d"})
		}
		reports := srv.URL + "/api/v1/agent/reports"
		tests := []struct {
			name      string
			url       string
			token     string
			body      []byte
			want      int
			wantField string
		}{
			{"no token", reports, "", mustJSON(t, snapshot(nil)), 401, ""},
			{"invalid token", reports, "not-a-token", mustJSON(t, snapshot(nil)), 401, ""},
			{"another cluster", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Cluster = "c2" }), 403, ""},
			{"larger than 16 MiB", reports, agentC1Token, bytes.Repeat([]byte(" "), clusterstate.MaxBytes+1), 413, ""},
			{"more than 50,000 objects", reports, agentC1Token, mustJSON(t, tooMany), 413, ""},
			{"not JSON", reports, agentC1Token, []byte(`{"cluster": "c1", "pods": [`), 422, ""},
			{"no cluster", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Cluster = "" }), 422, "/cluster"},
			{"pod without a name", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Pods[1].Name = "" }), 422, "/pods/1/name"},
			{"duplicate pod", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Pods[1].Name = "c" }), 422, "/pods/1"},
			{"unknown workload kind", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) {
				s.Workloads = []clusterstate.Workload{{Kind: "CronJob", Namespace: "shop", Name: "x", DeployID: "d", KStatus: "Current"}}
			}), 422, "/workloads/0/kind"},
			{"no time", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Time = time.Time{} }), 422, "/time"},
			{"time far ahead", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Time = time.Now().Add(time.Hour) }), 422, "/time"},
			{"path and body disagree", srv.URL + "/api/v1/clusters/c2/reports", agentC1Token, bad(func(*clusterstate.Snapshot) {}), 422, "/cluster"},
			{"older than the last one", reports, agentC1Token, bad(func(s *clusterstate.Snapshot) { s.Time = good.Time.Add(-time.Minute) }), 409, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				got, p := postRaw(t, tt.url, tt.token, tt.body)
				if got != tt.want {
					t.Fatalf("status %d, want %d: %+v", got, tt.want, p)
				}
				if p.Detail == "" {
					t.Errorf("problem without detail: %+v", p)
				}
				if tt.wantField != "" {
					var paths []string
					for _, fe := range p.Errors {
						paths = append(paths, fe.Path)
					}
					if !strings.Contains(" "+strings.Join(paths, " ")+" ", " "+tt.wantField+" ") {
						t.Errorf("field errors %v, want one at %s", p.Errors, tt.wantField)
					}
				}
			})
		}

		st, err := srv.admin.ClusterStatus(context.Background(), "c1")
		if err != nil {
			t.Fatal(err)
		}
		if len(st.Pods) != 2 || st.Pods[0].Name != "a" || st.Pods[1].Name != "b" || len(st.Workloads) != 1 {
			t.Errorf("a refused snapshot changed the stored state: %+v", st)
		}

		t.Run("the cluster in the path too", func(t *testing.T) {
			got, p := postRaw(t, srv.URL+"/api/v1/clusters/c1/reports", agentC1Token, mustJSON(t, snapshot(nil)))
			if got != 200 {
				t.Fatalf("status %d: %+v", got, p)
			}
		})
		t.Run("status of an unknown cluster", func(t *testing.T) {
			_, err := srv.admin.ClusterStatus(context.Background(), "nowhere")
			if manent.ErrorCode(err) != manent.ENotFound {
				t.Errorf("err = %v, want not found", err)
			}
		})
	})
}

// TestAgentStaleRemoval: each snapshot replaces the cluster's rows, so a
// deleted pod is gone after one cycle, and a changed one is rewritten.
func TestAgentStaleRemoval(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newAgentServer(t, db)
		ctx := context.Background()
		steps := []struct {
			name      string
			snap      *clusterstate.Snapshot
			wantPods  []string
			wantWl    int
			wantCount store.IngestResult
		}{
			{"first report", snapshot([]clusterstate.Pod{runningPod("a", "d1"), runningPod("b", "d1"), runningPod("c", "d1")}, billing("d1", "1", "Current", 3)),
				[]string{"a", "b", "c"}, 1, store.IngestResult{Inserted: 4}},
			{"pod b deleted", snapshot([]clusterstate.Pod{runningPod("a", "d1"), runningPod("c", "d1")}, billing("d1", "1", "Current", 3)),
				[]string{"a", "c"}, 1, store.IngestResult{Deleted: 1}},
			{"pod c changed, d new", snapshot([]clusterstate.Pod{runningPod("a", "d1"), pullingPod("c", "d1"), runningPod("d", "d1")}, billing("d1", "1", "Current", 3)),
				[]string{"a", "c", "d"}, 1, store.IngestResult{Inserted: 1, Updated: 1}},
			{"everything deleted", snapshot(nil), nil, 0, store.IngestResult{Deleted: 4}},
		}
		for _, s := range steps {
			res := srv.report(t, s.snap)
			if got := (store.IngestResult{Inserted: res.Inserted, Updated: res.Updated, Deleted: res.Deleted}); got != s.wantCount {
				t.Errorf("%s: counts %+v, want %+v", s.name, got, s.wantCount)
			}
			st, err := srv.admin.ClusterStatus(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range st.Pods {
				names = append(names, p.Name)
			}
			if strings.Join(names, ",") != strings.Join(s.wantPods, ",") || len(st.Workloads) != s.wantWl {
				t.Errorf("%s: pods %v and %d workloads, want %v and %d", s.name, names, len(st.Workloads), s.wantPods, s.wantWl)
			}
			if st.LastReportAt.IsZero() || !st.ReportedAt.Equal(s.snap.Time) {
				t.Errorf("%s: last report %s, reported %s, want %s", s.name, st.LastReportAt, st.ReportedAt, s.snap.Time)
			}
		}
	})
}

// TestClusterStatusObservedVsDeclared: a workload is DEPLOYING until it
// runs the declared version with every replica ready and kstatus Current;
// FAILED when a pod of its deploy cannot pull its image; DRIFTED when its
// deploy has ended (here SUCCESS) and it runs another version.
func TestClusterStatusObservedVsDeclared(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newAgentServer(t, db)
		id := srv.submit(t, "1.2.0", "")
		if d := srv.waitFinal(t, id); d.State != manent.StateSuccess {
			t.Fatalf("deploy ended %s: %s", d.State, d.Error)
		}
		tests := []struct {
			name   string
			snap   *clusterstate.Snapshot
			want   string
			reason string
		}{
			{"older version", snapshot(nil, billing(id, "1.1.0", "Current", 3)), clusterstate.StateDrifted, "version 1.1.0 runs; deploy " + id + " ended SUCCESS with 1.2.0"},
			{"replicas not ready", snapshot(nil, billing(id, "1.2.0", "InProgress", 1)), clusterstate.StateDeploying, "1/3 ready"},
			{"image pull failure", snapshot([]clusterstate.Pod{pullingPod("billing-x", id)}, billing(id, "1.2.0", "InProgress", 1)), clusterstate.StateFailed, "failing"},
			{"unknown deploy follows kstatus", snapshot(nil, billing("dpl_unknown", "9", "Current", 3)), clusterstate.StateCurrent, ""},
			// Labelled for another application with this deploy's id: the
			// deploy (its version, its state) is not shown with it, so a
			// reader of that application learns nothing of billing/prod.
			{"another application's labels", snapshot(nil, relabelled(billing(id, "1.1.0", "Current", 3), "shop", "dev")), clusterstate.StateCurrent, ""},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				srv.report(t, tt.snap)
				st, err := srv.admin.ClusterStatus(context.Background(), "c1")
				if err != nil {
					t.Fatal(err)
				}
				if len(st.Workloads) != 1 {
					t.Fatalf("workloads: %+v", st.Workloads)
				}
				w := st.Workloads[0]
				if w.State != tt.want || !strings.Contains(w.Reason, tt.reason) {
					t.Errorf("state %s (%s), want %s (%s)", w.State, w.Reason, tt.want, tt.reason)
				}
				if w.DeployID == id && w.Application == "billing" && (w.Declared == nil || w.Declared.Version != "1.2.0" || w.Declared.DeployID != id) {
					t.Errorf("declared = %+v", w.Declared)
				}
				if w.Application != "billing" && w.Declared != nil {
					t.Errorf("a workload of %s/%s shows deploy %+v", w.Application, w.Environment, w.Declared)
				}
			})
		}
		srv.report(t, snapshot([]clusterstate.Pod{runningPod("billing-y", id)}, billing(id, "1.2.0", "Current", 3)))
		st, err := srv.admin.ClusterStatus(context.Background(), "c1")
		if err != nil {
			t.Fatal(err)
		}
		if w := st.Workloads[0]; w.State != clusterstate.StateCurrent {
			t.Errorf("matching workload: %s (%s), want CURRENT", w.State, w.Reason)
		}
	})
}

// TestClusterStatusDrifted: QA found a workload whose deploy had long
// ended SUCCESS, running another version (kubectl set image, a Helm
// release of its own), shown "DEPLOYING … version 9.9.9, declared 1.0.0"
// for ever. Through the report route and GET /api/v1/clusters/{cluster}/status:
// another version is DEPLOYING while its deploy runs (the cluster-ready step
// waits on it), then, once the deploy is final, DRIFTED naming what runs,
// what the deploy declared and how it ended; the deploy's own version with
// pods restarting is DEPLOYING again, not DRIFTED.
func TestClusterStatusDrifted(t *testing.T) {
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newAgentServer(t, db)
		ctx := context.Background()
		workload := func() clusterstate.WorkloadStatus {
			t.Helper()
			st, err := srv.admin.ClusterStatus(ctx, "c1")
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Workloads) != 1 {
				t.Fatalf("workloads: %+v", st.Workloads)
			}
			return st.Workloads[0]
		}
		id := srv.submit(t, "1.0.0", "1m")
		srv.waitStep(t, id, "cluster", func(s manent.Step) bool { return s.State == manent.StepRunning }, "to run")
		srv.report(t, snapshot(nil, billing(id, "0.9.0", "Current", 3)))
		if w := workload(); w.State != clusterstate.StateDeploying || w.Reason != "version 0.9.0, declared 1.0.0" {
			t.Errorf("while the deploy runs: %s (%s), want DEPLOYING (version 0.9.0, declared 1.0.0)", w.State, w.Reason)
		}
		srv.report(t, snapshot([]clusterstate.Pod{runningPod("billing-a", id)}, billing(id, "1.0.0", "Current", 3)))
		if d := srv.waitFinal(t, id); d.State != manent.StateSuccess {
			t.Fatalf("deploy ended %s: %s", d.State, d.Error)
		}
		if w := workload(); w.State != clusterstate.StateCurrent {
			t.Errorf("after the deploy: %s (%s), want CURRENT", w.State, w.Reason)
		}

		srv.report(t, snapshot([]clusterstate.Pod{runningPod("billing-b", id)}, billing(id, "9.9.9", "Current", 3)))
		w := workload()
		want := "version 9.9.9 runs; deploy " + id + " ended SUCCESS with 1.0.0 (changed outside manent?)"
		if w.State != clusterstate.StateDrifted || w.Reason != want {
			t.Errorf("another version after the deploy: %s (%s), want DRIFTED (%s)", w.State, w.Reason, want)
		}
		if w.Declared == nil || w.Declared.State != manent.StateSuccess || w.Declared.Version != "1.0.0" || w.Version != "9.9.9" {
			t.Errorf("observed %s, declared %+v", w.Version, w.Declared)
		}

		srv.report(t, snapshot(nil, billing(id, "1.0.0", "InProgress", 1)))
		if w := workload(); w.State != clusterstate.StateDeploying || !strings.Contains(w.Reason, "1/3 ready") {
			t.Errorf("its own version, pods restarting: %s (%s), want DEPLOYING (1/3 ready)", w.State, w.Reason)
		}
	})
}

// TestAgentAttribution: reports about an earlier deploy's objects — even
// failing ones — never change a later deploy's step; the later deploy's
// own failing pod fails it, naming the pod, and leaves the earlier one's
// step as it was.
func TestAgentAttribution(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newAgentServer(t, db)
		a := srv.submit(t, "1.1.0", "1m")
		srv.waitStep(t, a, "cluster", func(s manent.Step) bool { return s.State == manent.StepRunning }, "to run")
		srv.report(t, snapshot([]clusterstate.Pod{runningPod("billing-a1", a)}, billing(a, "1.1.0", "Current", 3)))
		if d := srv.waitFinal(t, a); d.State != manent.StateSuccess {
			t.Fatalf("earlier deploy ended %s: %s", d.State, d.Error)
		}
		stepA := srv.step(t, a, "cluster")

		b := srv.submit(t, "1.2.0", "1m")
		before := srv.waitStep(t, b, "cluster", func(s manent.Step) bool { return s.State == manent.StepRunning }, "to run")

		// The earlier deploy's objects now fail, and the later deploy's
		// workload is in progress: B keeps waiting.
		// So does a pod of another application that carries B's deploy id.
		intruder := pullingPod("intruder", b)
		intruder.Application = "other"
		earlierFailing := []clusterstate.Pod{pullingPod("billing-a1", a), pullingPod("billing-a2", a), intruder}
		failedA := billing(a, "1.1.0", "Failed", 0)
		failedA.Name = "billing-old"
		srv.report(t, snapshot(earlierFailing, failedA, billing(b, "1.2.0", "InProgress", 1)))
		enginetest.Eventually(t, 30*time.Second, func() bool { return srv.logHas(t, b, "1/3 ready") },
			"the later deploy's step to read the report")
		if got := srv.step(t, b, "cluster"); got.State != manent.StepRunning || got.Error != "" || got.Attempts != before.Attempts {
			t.Fatalf("a report about the earlier deploy changed the later deploy's step: %+v", got)
		}

		// B's own pod fails: its step fails, naming it.
		srv.report(t, snapshot(append(earlierFailing, pullingPod("billing-b1", b)), failedA, billing(b, "1.2.0", "InProgress", 1)))
		got := srv.waitStep(t, b, "cluster", func(s manent.Step) bool { return s.State == manent.StepError }, "to fail")
		if !strings.Contains(got.Error, "shop/billing-b1") || !strings.Contains(got.Error, "ImagePullBackOff") {
			t.Errorf("error %q does not name the failing pod", got.Error)
		}
		for _, earlier := range []string{"billing-a1", "billing-a2", "intruder"} {
			if strings.Contains(got.Error, earlier) {
				t.Errorf("error %q names the earlier deploy's pod %s", got.Error, earlier)
			}
		}
		if d := srv.waitFinal(t, b); d.State != manent.StateError {
			t.Errorf("later deploy ended %s, want ERROR", d.State)
		}
		if now := srv.step(t, a, "cluster"); now.State != stepA.State || now.Error != stepA.Error || now.Attempts != stepA.Attempts {
			t.Errorf("the earlier deploy's step changed: %+v, was %+v", now, stepA)
		}
	})
}

// TestAgentSilenceNotice: while reports stop for longer than stale_after,
// the waiting step shows "no report from the agent since <time>" in its
// output and log; the next report takes the notice away.
func TestAgentSilenceNotice(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newAgentServer(t, db)
		id := srv.submit(t, "1.2.0", "1s")
		srv.waitStep(t, id, "cluster", func(s manent.Step) bool { return s.State == manent.StepRunning }, "to run")
		srv.report(t, snapshot(nil, billing(id, "1.2.0", "InProgress", 1)))

		hasNotice := func(s manent.Step) bool {
			return s.State == manent.StepRunning && strings.Contains(string(s.Output), clusterstate.NoticePrefix)
		}
		got := srv.waitStep(t, id, "cluster", hasNotice, "to show the notice")
		var out struct{ Notice string }
		if err := json.Unmarshal(got.Output, &out); err != nil || !strings.HasPrefix(out.Notice, clusterstate.NoticePrefix) {
			t.Fatalf("output %s: %v", got.Output, err)
		}
		enginetest.Eventually(t, 30*time.Second, func() bool { return srv.logHas(t, id, clusterstate.NoticePrefix) },
			"the notice to be in the log")

		// The agent is back, reporting every cycle.
		stop := srv.keepReporting(func() *clusterstate.Snapshot { return snapshot(nil, billing(id, "1.2.0", "InProgress", 2)) })
		srv.waitStep(t, id, "cluster", func(s manent.Step) bool {
			return s.State == manent.StepRunning && !strings.Contains(string(s.Output), clusterstate.NoticePrefix)
		}, "to drop the notice")
		stop()

		srv.report(t, snapshot(nil, billing(id, "1.2.0", "Current", 3)))
		if d := srv.waitFinal(t, id); d.State != manent.StateSuccess {
			t.Fatalf("deploy ended %s: %s", d.State, d.Error)
		}
		if got := srv.step(t, id, "cluster"); strings.Contains(string(got.Output), clusterstate.NoticePrefix) {
			t.Errorf("the finished step still shows the notice: %s", got.Output)
		}
	})
}

// BenchmarkIngest: a 10,000-pod snapshot replacing a 10,000-pod snapshot
// with 10% churn (1,000 pods gone, 1,000 new), through the HTTP API (decode,
// validate, one transaction). Reported as ms/ingest; the goal is < 1 s.
func BenchmarkIngest(b *testing.B) {
	for _, db := range []struct {
		name string
		url  func(testing.TB) string
	}{{"sqlite", enginetest.SQLite}, {"postgres", enginetest.Postgres}} {
		b.Run(db.name, func(b *testing.B) {
			srv := newAgentServer(b, db.url(b))
			const n, churn = 10_000, 1_000
			podsJSON := func(offset int) []byte {
				pods := make([]clusterstate.Pod, n)
				for i := range pods {
					p := runningPod(fmt.Sprintf("billing-%06d", offset+i), "dpl_bench")
					p.Namespace = fmt.Sprintf("ns-%02d", (offset+i)%50)
					pods[i] = p
				}
				return mustJSON(b, pods)
			}
			// Two snapshots sharing 9,000 pods: each replaces the other.
			sets := [2][]byte{podsJSON(0), podsJSON(churn)}
			body := func(i int) []byte {
				var buf bytes.Buffer
				fmt.Fprintf(&buf, `{"cluster":"c1","time":%q,"workloads":[],"pods":`, time.Now().UTC().Format(time.RFC3339Nano))
				buf.Write(sets[i%2])
				buf.WriteString("}")
				return buf.Bytes()
			}
			url := srv.URL + "/api/v1/agent/reports"
			if code, p := postRaw(b, url, agentC1Token, body(0)); code != 200 {
				b.Fatalf("first snapshot: %d %+v", code, p)
			}
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				req := body(i + 1)
				b.StartTimer()
				if code, p := postRaw(b, url, agentC1Token, req); code != 200 {
					b.Fatalf("ingest %d: %d %+v", i, code, p)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/ingest")
		})
	}
}

// GET /api/v1/clusters lists the clusters that reported as their status
// shows them: whole to a token with agent.report on the cluster; to a
// reader, only the clusters holding objects of what it may read, counting
// those only; nothing of the others, and nothing to a token that may read
// nothing (real RBAC, not the test guard).
func TestClustersList(t *testing.T) {
	t.Parallel()
	tokens := []auth.TokenConfig{
		{Name: "ops", SHA256: auth.HashToken("ops-token")},
		{Name: "reader", SHA256: auth.HashToken("reader-token")},
		{Name: "nobody", SHA256: auth.HashToken("nobody-token")},
	}
	rules := []auth.RBACRule{
		{Subjects: []string{"token:ops"}, Permissions: []string{"agent.report"}, Clusters: []string{"c1"}},
		{Subjects: []string{"token:reader"}, Permissions: []string{"deployment.read"}, Applications: []string{"billing"}, Environments: []string{"prod"}},
	}
	enginetest.Databases(t, func(t *testing.T, db string) {
		srv := newTestServer(t, db, tokens, rules)
		ctx := context.Background()
		admin := api.NewClient(srv.URL, "admin-token", nil)
		id := manent.NewDeploymentID()
		staging := func(p clusterstate.Pod) clusterstate.Pod { p.Environment = "staging"; return p }
		unlabelled := runningPod("sidecar", id) // no application/environment labels
		unlabelled.Application, unlabelled.Environment = "", ""
		c1 := snapshot([]clusterstate.Pod{runningPod("billing-1", id), runningPod("billing-2", id), staging(runningPod("billing-s", id)), unlabelled},
			billing(id, "1", "Current", 2))
		c2 := snapshot([]clusterstate.Pod{staging(runningPod("billing-s", id))})
		c2.Cluster = "c2"
		for _, snap := range []*clusterstate.Snapshot{c2, c1} {
			if _, err := admin.Report(ctx, snap); err != nil {
				t.Fatalf("report %s: %v %+v", snap.Cluster, err, err.(*manent.Error).Fields)
			}
		}

		list := func(token string) string {
			t.Helper()
			res, err := api.NewClient(srv.URL, token, nil).Clusters(ctx)
			if err != nil {
				t.Fatalf("%s: %v", token, err)
			}
			var b strings.Builder
			for _, c := range res.Items {
				if c.LastReportAt.IsZero() || c.ReportedAt.IsZero() {
					t.Errorf("%s: %s has no report times: %+v", token, c.Cluster, c)
				}
				fmt.Fprintf(&b, "%s:%d/%d ", c.Cluster, c.Pods, c.Workloads)
			}
			return strings.TrimSpace(b.String())
		}
		for token, want := range map[string]string{
			"admin-token":  "c1:4/1 c2:1/0",
			"ops-token":    "c1:4/1",
			"reader-token": "c1:2/1",
			"nobody-token": "",
		} {
			if got := list(token); got != want {
				t.Errorf("%s sees %q, want %q", token, got, want)
			}
		}
		if status, body, _ := do(t, "GET", srv.URL+"/api/v1/clusters", "", ""); status != http.StatusUnauthorized {
			t.Errorf("no token: %d %s, want 401", status, body)
		}

		// QA: a reader asking for the status of a cluster with nothing it
		// may read was told it "may not agent.report" — a permission to
		// send snapshots, not to read. It is a 404 saying what it may
		// read, the same whether the cluster reported or not (the list
		// does not show it either).
		for _, tt := range []struct{ token, cluster string }{{"reader-token", "c2"}, {"reader-token", "nowhere"}, {"nobody-token", "c1"}} {
			status, body, _ := do(t, "GET", srv.URL+"/api/v1/clusters/"+tt.cluster+"/status", tt.token, "")
			if status != http.StatusNotFound || strings.Contains(string(body), "agent.report") || !strings.Contains(string(body), "deployment.read") {
				t.Errorf("%s, status of %s: %d %s; want 404 naming deployment.read, not agent.report", tt.token, tt.cluster, status, body)
			}
		}
		if status, body, _ := do(t, "GET", srv.URL+"/api/v1/clusters/c1/status", "reader-token", ""); status != http.StatusOK {
			t.Errorf("reader, status of c1: %d %s, want 200", status, body)
		}
	})
}
