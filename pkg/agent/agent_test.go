package agent_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/manent-io/manent/pkg/agent"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/enginetest"
)

func labels(deploy, version string) map[string]string {
	l := map[string]string{
		clusterstate.LabelDeployID:    deploy,
		clusterstate.LabelApplication: "billing",
		clusterstate.LabelEnvironment: "prod",
	}
	if version != "" {
		l[clusterstate.LabelVersion] = version
	}
	return l
}

func ptr[T any](v T) *T { return &v }

func testPod(ns, name string, lbl map[string]string, phase corev1.PodPhase, ready bool, statuses ...corev1.ContainerStatus) *corev1.Pod {
	cond := corev1.ConditionFalse
	if ready {
		cond = corev1.ConditionTrue
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "billing-7d9f", UID: "rs", Controller: ptr(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/billing:1.2.0"}}},
		Status: corev1.PodStatus{Phase: phase, ContainerStatuses: statuses,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: cond}}},
	}
}

func testDeployment(ns, name string, lbl map[string]string, replicas, ready int32, generation, observed int64) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl, Generation: generation},
		Spec: appsv1.DeploymentSpec{Replicas: ptr(replicas), Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/billing:1.2.0"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, ReadyReplicas: ready,
			UpdatedReplicas: ready, AvailableReplicas: ready,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}},
	}
}

func TestCollect(t *testing.T) {
	kube := fake.NewClientset(
		testPod("shop", "billing-1", labels("dpl_2", "1.2.0"), corev1.PodRunning, true,
			corev1.ContainerStatus{Name: "app", Image: "registry.example/billing:1.2.0", Ready: true, RestartCount: 2,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}),
		testPod("shop", "billing-2", labels("dpl_2", "1.2.0"), corev1.PodPending, false,
			corev1.ContainerStatus{Name: "app", Image: "registry.example/billing:1.2.0",
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}),
		testPod("shop", "unlabelled", map[string]string{"app": "other"}, corev1.PodRunning, true),
		testPod("shop", "empty-label", map[string]string{clusterstate.LabelDeployID: ""}, corev1.PodRunning, true),
		testPod("other", "billing-3", labels("dpl_2", "1.2.0"), corev1.PodRunning, true),
		testDeployment("shop", "billing", labels("dpl_2", "1.2.0"), 3, 3, 2, 2),
		testDeployment("shop", "rolling", labels("dpl_2", "1.2.0"), 3, 1, 3, 2),
		&appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cache", Labels: labels("dpl_2", ""), Generation: 1},
			Spec:       appsv1.StatefulSetSpec{Replicas: ptr(int32(2))},
			Status:     appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 2, ReadyReplicas: 2, CurrentReplicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2},
		},
		&appsv1.DaemonSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "logs", Labels: labels("dpl_1", ""), Generation: 1},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 4, NumberReady: 4,
				UpdatedNumberScheduled: 4, NumberAvailable: 4, CurrentNumberScheduled: 4},
		},
	)
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)

	tests := []struct {
		name      string
		namespace string
		pods      []string
		workloads map[string]string // key -> kstatus
	}{
		{"all namespaces", "", []string{"other/billing-3", "shop/billing-1", "shop/billing-2"}, map[string]string{
			"Deployment/shop/billing": "Current", "Deployment/shop/rolling": "InProgress",
			"StatefulSet/shop/cache": "Current", "DaemonSet/shop/logs": "Current"}},
		{"one namespace", "other", []string{"other/billing-3"}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap, err := agent.Collect(context.Background(), kube, tt.namespace, "c1", now)
			if err != nil {
				t.Fatal(err)
			}
			if snap.Cluster != "c1" || !snap.Time.Equal(now) {
				t.Errorf("cluster/time = %s %s", snap.Cluster, snap.Time)
			}
			var pods []string
			for _, p := range snap.Pods {
				pods = append(pods, p.Key())
			}
			if len(pods) != len(tt.pods) {
				t.Fatalf("pods = %v, want %v", pods, tt.pods)
			}
			for i := range pods {
				if pods[i] != tt.pods[i] {
					t.Fatalf("pods = %v, want %v", pods, tt.pods)
				}
			}
			got := map[string]string{}
			for _, w := range snap.Workloads {
				got[w.Key()] = w.KStatus
			}
			if len(got) != len(tt.workloads) {
				t.Fatalf("workloads = %v, want %v", got, tt.workloads)
			}
			for k, want := range tt.workloads {
				if got[k] != want {
					t.Errorf("%s kstatus = %q, want %q", k, got[k], want)
				}
			}
			if problems := clusterstate.Validate(snap); len(problems) > 0 {
				t.Errorf("the collected snapshot is invalid: %v", problems)
			}
		})
	}

	t.Run("fields", func(t *testing.T) {
		snap, err := agent.Collect(context.Background(), kube, "shop", "c1", now)
		if err != nil {
			t.Fatal(err)
		}
		byKey := map[string]clusterstate.Pod{}
		for _, p := range snap.Pods {
			byKey[p.Key()] = p
		}
		p1, p2 := byKey["shop/billing-1"], byKey["shop/billing-2"]
		if !p1.Ready || p1.Restarts != 2 || p1.Phase != "Running" || p1.Owner != "ReplicaSet/billing-7d9f" ||
			p1.DeployID != "dpl_2" || p1.Application != "billing" || p1.Environment != "prod" {
			t.Errorf("billing-1 = %+v", p1)
		}
		if p2.Ready || len(p2.Containers) != 1 || p2.Containers[0].WaitingReason != "ImagePullBackOff" ||
			p2.Containers[0].Message != "Back-off pulling image" {
			t.Errorf("billing-2 = %+v", p2)
		}
		for _, w := range snap.Workloads {
			switch w.Key() {
			case "Deployment/shop/billing":
				if w.Version != "1.2.0" || w.Replicas != (clusterstate.Replicas{Desired: 3, Ready: 3, Updated: 3, Available: 3}) ||
					len(w.Images) != 1 || w.Images[0] != "registry.example/billing:1.2.0" {
					t.Errorf("billing = %+v", w)
				}
			case "DaemonSet/shop/logs":
				if w.Replicas.Desired != 4 || w.Replicas.Ready != 4 || w.DeployID != "dpl_1" {
					t.Errorf("logs = %+v", w)
				}
			case "Deployment/shop/rolling":
				if w.KStatusMessage == "" {
					t.Errorf("rolling has no kstatus message: %+v", w)
				}
			}
		}
	})
}

// recorder is a Reporter that keeps what it is sent and fails while down.
type recorder struct {
	mu    sync.Mutex
	snaps []*clusterstate.Snapshot
	down  bool
	calls int
}

func (r *recorder) Report(_ context.Context, snap *clusterstate.Snapshot) (*api.ReportResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.down {
		return nil, &api.UnreachableError{Server: "http://127.0.0.1:1", Err: errors.New("connection refused")}
	}
	r.snaps = append(r.snaps, snap)
	return &api.ReportResult{Cluster: snap.Cluster, Pods: len(snap.Pods), Workloads: len(snap.Workloads)}, nil
}

func (r *recorder) state() (calls, received int, last *clusterstate.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.snaps) > 0 {
		last = r.snaps[len(r.snaps)-1]
	}
	return r.calls, len(r.snaps), last
}

func (r *recorder) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

// TestRunKeepsGoing: the agent reports every cycle, keeps going while the
// server is down, sends the full current state (a deleted pod is absent
// from the next snapshot) and returns nil when stopped.
func TestRunKeepsGoing(t *testing.T) {
	kube := fake.NewClientset(
		testPod("shop", "billing-1", labels("dpl_2", "1.2.0"), corev1.PodRunning, true),
		testPod("shop", "billing-2", labels("dpl_2", "1.2.0"), corev1.PodRunning, true),
	)
	rec := &recorder{down: true}
	a, err := agent.New(agent.Config{Cluster: "c1", Interval: 10 * time.Millisecond, Kube: kube, Server: rec,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()

	enginetest.Eventually(t, 10*time.Second, func() bool { c, _, _ := rec.state(); return c >= 3 }, "three failed posts")
	rec.setDown(false)
	enginetest.Eventually(t, 10*time.Second, func() bool { _, n, last := rec.state(); return n >= 1 && len(last.Pods) == 2 }, "a report once the server is back")

	if err := kube.CoreV1().Pods("shop").Delete(ctx, "billing-2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 10*time.Second, func() bool {
		_, _, last := rec.state()
		return len(last.Pods) == 1 && last.Pods[0].Name == "billing-1"
	}, "the deleted pod to be absent from the next snapshot")

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run returned %v after cancel, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	kube := fake.NewClientset()
	tests := []struct {
		name string
		cfg  agent.Config
	}{
		{"no cluster", agent.Config{Kube: kube, Server: &recorder{}}},
		{"bad cluster", agent.Config{Cluster: "Prod EU", Kube: kube, Server: &recorder{}}},
		{"no kube", agent.Config{Cluster: "c1", Server: &recorder{}}},
		{"no server", agent.Config{Cluster: "c1", Kube: kube}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := agent.New(tt.cfg); err == nil {
				t.Error("New accepted it")
			}
		})
	}
}

// With no cluster configured, the agent says where it looked and how to
// give one, not client-go's advice to set KUBERNETES_MASTER; a kubeconfig
// that does not exist is named as such.
func TestKubeConfigMissing(t *testing.T) {
	dir := t.TempDir()
	missing := dir + "/nowhere"
	t.Setenv("KUBECONFIG", missing)
	_, err := agent.KubeConfig("", func(k string) string {
		if k == "KUBECONFIG" {
			return missing
		}
		return ""
	})
	if err == nil || err.Error() != "no Kubernetes cluster configured: $KUBECONFIG ("+missing+") has none; give --kubeconfig, or run the agent in the cluster (its ServiceAccount, KUBERNETES_SERVICE_HOST)" {
		t.Fatalf("got %v", err)
	}
	if _, err := agent.KubeConfig(missing, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("an explicit missing kubeconfig: %v, want it named", err)
	}
}

// QA: a failure that only an operator fixes (a revoked token, a missing
// RBAC grant) was logged at every cycle — 720 ERROR lines an hour at the
// default interval. It is logged when it starts and changes (then every
// FailureLogEvery), and the recovery says how many cycles failed.
func TestRepeatedFailureLoggedOnce(t *testing.T) {
	kube := fake.NewClientset(testPod("shop", "billing-1", labels("dpl_2", "1.2.0"), corev1.PodRunning, true))
	rec := &recorder{down: true}
	var logs enginetest.SyncBuffer
	a, err := agent.New(agent.Config{Cluster: "c1", Interval: 5 * time.Millisecond, Kube: kube, Server: rec,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	enginetest.Eventually(t, 10*time.Second, func() bool { c, _, _ := rec.state(); return c >= 20 }, "20 failed posts")
	rec.setDown(false)
	enginetest.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), "reporting again") }, "the agent to report again")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if n := strings.Count(out, "report failed"); n != 1 {
		t.Errorf("%d lines of 'report failed' for one failure over 20 cycles, want 1:\n%s", n, out)
	}
	if !regexp.MustCompile(`reporting again.*failed_cycles=(2\d|[3-9]\d|\d{3,})`).MatchString(out) {
		t.Errorf("the recovery does not say how many cycles failed:\n%s", out)
	}
	if strings.Contains(out, "interval=5000000") {
		t.Errorf("the interval is logged in nanoseconds:\n%s", out)
	}
}

// TestProxyTooLargeSaysWhatToRaise: a reverse proxy in front of
// manent-server (nginx's default body limit is 1 MiB) refuses the snapshot
// with its own HTML 413. The agent's error says how large the snapshot was,
// that a proxy refused it (manent-server takes up to 16 MiB), and what to
// raise; the proxy is an httptest server answering as nginx does.
func TestProxyTooLargeSaysWhatToRaise(t *testing.T) {
	var posts atomic.Int32
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusRequestEntityTooLarge)
		_, _ = io.WriteString(w, "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>\n")
	}))
	defer proxy.Close()
	kube := fake.NewClientset(
		testPod("shop", "billing-1", labels("dpl_2", "1.2.0"), corev1.PodRunning, true),
		testPod("shop", "billing-2", labels("dpl_2", "1.2.0"), corev1.PodRunning, true),
	)
	a, err := agent.New(agent.Config{Cluster: "c1", Kube: kube, Server: api.NewClient(proxy.URL, "agent-token", nil)})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Once(context.Background())
	if err == nil {
		t.Fatal("the cycle succeeded though the proxy refused the snapshot")
	}
	if posts.Load() == 0 {
		t.Fatal("the snapshot never reached the proxy")
	}
	for _, want := range []string{"2 pods, 0 workloads, 0.0 MiB", "refused as too large (413) by a proxy in front of manent-server",
		"takes up to 16.0 MiB", "the server keeps the last report", "client_max_body_size 16m", "proxy-body-size", "nginx"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
