package clusterstate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
)

func pod(name, deploy string, containers ...clusterstate.Container) clusterstate.Pod {
	return clusterstate.Pod{Namespace: "shop", Name: name, DeployID: deploy, Phase: "Running", Containers: containers}
}

func waiting(reason string) clusterstate.Container {
	return clusterstate.Container{Name: "app", Image: "billing:1.0", WaitingReason: reason}
}

func terminated(reason string) clusterstate.Container {
	return clusterstate.Container{Name: "app", Image: "billing:1.0", TerminatedReason: reason}
}

func deployment(deploy, version, kstatus string, ready int32) clusterstate.Workload {
	return clusterstate.Workload{
		Kind: clusterstate.KindDeployment, Namespace: "shop", Name: "billing", DeployID: deploy,
		Version: version, Images: []string{"registry.example/billing:" + version},
		Replicas: clusterstate.Replicas{Desired: 3, Ready: ready, Updated: ready, Available: ready},
		KStatus:  kstatus,
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name string
		pod  clusterstate.Pod
		want int
	}{
		{"image pull backoff", pod("a", "d1", waiting("ImagePullBackOff")), 1},
		{"err image pull", pod("a", "d1", waiting("ErrImagePull")), 1},
		{"invalid image name", pod("a", "d1", waiting("InvalidImageName")), 1},
		{"crash loop", pod("a", "d1", waiting("CrashLoopBackOff")), 1},
		{"config error", pod("a", "d1", waiting("CreateContainerConfigError")), 1},
		{"create error", pod("a", "d1", waiting("CreateContainerError")), 1},
		{"terminated error", pod("a", "d1", terminated("Error")), 1},
		{"oom killed", pod("a", "d1", terminated("OOMKilled")), 1},
		{"container creating", pod("a", "d1", waiting("ContainerCreating")), 0},
		{"completed", pod("a", "d1", terminated("Completed")), 0},
		{"not ready only", pod("a", "d1", clusterstate.Container{Name: "app", Ready: false}), 0},
		{"succeeded pod with an error reason", func() clusterstate.Pod {
			p := pod("a", "d1", terminated("Error"))
			p.Phase = "Succeeded"
			return p
		}(), 0},
		{"init container crash", pod("a", "d1", clusterstate.Container{Name: "migrate", Init: true, WaitingReason: "CrashLoopBackOff"}), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(tt.pod.Failures()); got != tt.want {
				t.Errorf("Failures() = %v, want %d", tt.pod.Failures(), tt.want)
			}
		})
	}
}

func TestEvaluate(t *testing.T) {
	declared := &clusterstate.Declared{DeployID: "d2", Version: "1.2.0", State: manent.StatePending}
	ended := func(s manent.State) *clusterstate.Declared {
		return &clusterstate.Declared{DeployID: "d2", Version: "1.2.0", State: s}
	}
	tests := []struct {
		name     string
		w        clusterstate.Workload
		declared *clusterstate.Declared
		pods     []clusterstate.Pod
		want     string
		reason   string // the whole reason, when given
	}{
		{"current and matching", deployment("d2", "1.2.0", "Current", 3), declared, nil, clusterstate.StateCurrent, ""},
		{"replicas not ready", deployment("d2", "1.2.0", "InProgress", 1), declared, nil, clusterstate.StateDeploying, ""},
		{"kstatus current but ready short", deployment("d2", "1.2.0", "Current", 2), declared, nil, clusterstate.StateDeploying, ""},
		{"old version label", deployment("d2", "1.1.0", "Current", 3), declared, nil, clusterstate.StateDeploying, ""},
		{"kstatus failed", deployment("d2", "1.2.0", "Failed", 1), declared, nil, clusterstate.StateFailed, ""},
		{"failing pod of the deploy", deployment("d2", "1.2.0", "InProgress", 2), declared,
			[]clusterstate.Pod{pod("billing-x", "d2", waiting("ImagePullBackOff"))}, clusterstate.StateFailed, ""},
		{"failing pod of an earlier deploy is not held against it", deployment("d2", "1.2.0", "Current", 3), declared,
			[]clusterstate.Pod{pod("billing-old", "d1", waiting("CrashLoopBackOff"))}, clusterstate.StateCurrent, ""},
		{"failing pod of another workload", deployment("d2", "1.2.0", "Current", 3), declared,
			[]clusterstate.Pod{func() clusterstate.Pod {
				p := pod("cache-0", "d2", waiting("CrashLoopBackOff"))
				p.Owner = "StatefulSet/cache"
				return p
			}()}, clusterstate.StateCurrent, ""},
		{"owned through its replica set", deployment("d2", "1.2.0", "InProgress", 2), declared,
			[]clusterstate.Pod{func() clusterstate.Pod {
				p := pod("billing-7d9f-abc", "d2", terminated("OOMKilled"))
				p.Owner = "ReplicaSet/billing-7d9f"
				return p
			}()}, clusterstate.StateFailed, ""},
		{"unknown deploy follows kstatus", deployment("d9", "9", "Current", 3), nil, nil, clusterstate.StateCurrent, ""},
		{"unknown deploy in progress", deployment("d9", "9", "InProgress", 1), nil, nil, clusterstate.StateDeploying, ""},
		{"terminating", deployment("d2", "1.2.0", "Terminating", 3), declared, nil, clusterstate.StateTerminating, ""},
		{"image tag matches without label", func() clusterstate.Workload {
			w := deployment("d2", "1.2.0", "Current", 3)
			w.Version = ""
			return w
		}(), declared, nil, clusterstate.StateCurrent, ""},
		{"image tag differs without label", func() clusterstate.Workload {
			w := deployment("d2", "1.1.0", "Current", 3)
			w.Version = ""
			return w
		}(), declared, nil, clusterstate.StateDeploying, ""},
		{"image by digest only", func() clusterstate.Workload {
			w := deployment("d2", "", "Current", 3)
			w.Images = []string{"registry.example:5000/billing@sha256:abc"}
			return w
		}(), declared, nil, clusterstate.StateCurrent, ""},
		// Once the declared deploy is final, another version will never
		// converge by itself: it was changed outside manent (kubectl set
		// image, a Helm release), not deploying.
		{"deploy ended SUCCESS, another version runs", deployment("d2", "9.9.9", "Current", 3), ended(manent.StateSuccess), nil,
			clusterstate.StateDrifted, "version 9.9.9 runs; deploy d2 ended SUCCESS with 1.2.0 (changed outside manent?)"},
		{"deploy ended ERROR, another version runs", deployment("d2", "1.1.0", "Current", 3), ended(manent.StateError), nil,
			clusterstate.StateDrifted, "version 1.1.0 runs; deploy d2 ended ERROR with 1.2.0 (changed outside manent?)"},
		{"deploy ended, another version still rolling out", deployment("d2", "9.9.9", "InProgress", 1), ended(manent.StateCancelled), nil,
			clusterstate.StateDrifted, "version 9.9.9 runs; deploy d2 ended CANCELLED with 1.2.0 (changed outside manent?); 1/3 ready, 1 updated; kstatus InProgress"},
		{"deploy ended, another image tag without label", func() clusterstate.Workload {
			w := deployment("d2", "9.9.9", "Current", 3)
			w.Version = ""
			return w
		}(), ended(manent.StateSuccess), nil, clusterstate.StateDrifted, "version 9.9.9 runs; deploy d2 ended SUCCESS with 1.2.0 (changed outside manent?)"},
		{"deploy running (PENDING), another version", deployment("d2", "9.9.9", "Current", 3), ended(manent.StatePending), nil,
			clusterstate.StateDeploying, "version 9.9.9, declared 1.2.0"},
		{"deploy ended, its version with pods restarting", deployment("d2", "1.2.0", "InProgress", 1), ended(manent.StateSuccess), nil,
			clusterstate.StateDeploying, "1/3 ready, 1 updated; kstatus InProgress"},
		{"deploy ended, its version", deployment("d2", "1.2.0", "Current", 3), ended(manent.StateSuccess), nil, clusterstate.StateCurrent, ""},
		{"deploy ended, another version failing", deployment("d2", "9.9.9", "InProgress", 2), ended(manent.StateSuccess),
			[]clusterstate.Pod{pod("billing-x", "d2", waiting("CrashLoopBackOff"))}, clusterstate.StateFailed, "1 pod with failing containers"},
		{"deploy ended, another version terminating", deployment("d2", "9.9.9", "Terminating", 3), ended(manent.StateSuccess), nil,
			clusterstate.StateTerminating, "kstatus Terminating"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clusterstate.Evaluate(tt.w, tt.declared, tt.pods)
			if got.State != tt.want {
				t.Errorf("state = %s (%s), want %s", got.State, got.Reason, tt.want)
			}
			if tt.reason != "" && got.Reason != tt.reason {
				t.Errorf("reason = %q, want %q", got.Reason, tt.reason)
			}
			if got.State != clusterstate.StateCurrent && got.Reason == "" {
				t.Errorf("state %s without a reason", got.State)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	declared := &clusterstate.Declared{DeployID: "d2", Version: "1.2.0"}
	many := []clusterstate.Pod{}
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
		many = append(many, pod(n, "d2", waiting("ImagePullBackOff")))
	}
	tests := []struct {
		name        string
		obs         clusterstate.Observation
		ready       bool
		failed      []string // substrings of the failure
		notFailed   []string
		waitingLike string
	}{
		{name: "never reported", obs: clusterstate.Observation{Cluster: "c1"}, waitingLike: "has not reported"},
		{name: "no workload yet", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared}, waitingLike: "no workload"},
		{name: "ready", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{deployment("d2", "1.2.0", "Current", 3)}}, ready: true},
		{name: "in progress", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{deployment("d2", "1.2.0", "InProgress", 1)}}, waitingLike: "1/3 ready"},
		{name: "image pull names the pod", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{deployment("d2", "1.2.0", "InProgress", 0)},
			Pods:      []clusterstate.Pod{pod("billing-abc", "d2", waiting("ImagePullBackOff")), pod("billing-def", "d2")}},
			failed: []string{"shop/billing-abc", "ImagePullBackOff"}, notFailed: []string{"billing-def"}},
		{name: "at most five pods named", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{deployment("d2", "1.2.0", "InProgress", 0)}, Pods: many},
			failed: []string{"shop/p1", "shop/p5", "and 2 more"}, notFailed: []string{"shop/p6", "shop/p7"}},
		{name: "kstatus failed", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{func() clusterstate.Workload {
				w := deployment("d2", "1.2.0", "Failed", 1)
				w.KStatusMessage = "Progress deadline exceeded"
				return w
			}()}},
			failed: []string{"Deployment shop/billing", "Progress deadline exceeded"}},
		{name: "objects of another deploy are ignored", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{deployment("d1", "1.1.0", "Failed", 0)},
			Pods:      []clusterstate.Pod{pod("billing-old", "d1", waiting("CrashLoopBackOff"))}},
			waitingLike: "no workload"},
		{name: "readiness failure is not a failure", obs: clusterstate.Observation{Cluster: "c1", Reported: true, Declared: declared,
			Workloads: []clusterstate.Workload{deployment("d2", "1.2.0", "InProgress", 2)},
			Pods:      []clusterstate.Pod{pod("billing-x", "d2", clusterstate.Container{Name: "app", Ready: false})}},
			waitingLike: "2/3 ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := clusterstate.Decide(tt.obs, "d2")
			if got.Ready != tt.ready {
				t.Errorf("ready = %v, want %v (%+v)", got.Ready, tt.ready, got)
			}
			if (got.Failed != "") != (len(tt.failed) > 0) {
				t.Errorf("failed = %q, want it to mention %v", got.Failed, tt.failed)
			}
			for _, s := range tt.failed {
				if !strings.Contains(got.Failed, s) {
					t.Errorf("failed = %q, want it to contain %q", got.Failed, s)
				}
			}
			for _, s := range tt.notFailed {
				if strings.Contains(got.Failed, s) {
					t.Errorf("failed = %q, must not name %q", got.Failed, s)
				}
			}
			if tt.waitingLike != "" && !strings.Contains(got.Waiting, tt.waitingLike) {
				t.Errorf("waiting = %q, want it to contain %q", got.Waiting, tt.waitingLike)
			}
		})
	}
}

func TestNotice(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		obs     clusterstate.Observation
		started time.Time
		want    string
	}{
		{"fresh report", clusterstate.Observation{Reported: true, LastReportAt: now.Add(-10 * time.Second)}, now.Add(-time.Hour), ""},
		{"stale report", clusterstate.Observation{Reported: true, LastReportAt: now.Add(-61 * time.Second)}, now, "no report from the agent since 2026-12-02T11:58:59Z"},
		{"never reported, step young", clusterstate.Observation{Cluster: "c1"}, now.Add(-30 * time.Second), ""},
		{"never reported, step old", clusterstate.Observation{Cluster: "c1"}, now.Add(-2 * time.Minute), "no report from the agent since 2026-12-02T11:58:00Z (cluster c1 has never reported)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := clusterstate.Notice(tt.obs, tt.started, now, time.Minute); got != tt.want {
				t.Errorf("Notice = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	now := time.Now()
	good := func() *clusterstate.Snapshot {
		return &clusterstate.Snapshot{Cluster: "c1", Time: now,
			Pods:      []clusterstate.Pod{pod("a", "d1"), pod("b", "d1")},
			Workloads: []clusterstate.Workload{deployment("d1", "1", "Current", 3)}}
	}
	tests := []struct {
		name  string
		edit  func(s *clusterstate.Snapshot)
		paths []string
	}{
		{"valid", func(*clusterstate.Snapshot) {}, nil},
		{"no cluster", func(s *clusterstate.Snapshot) { s.Cluster = "" }, []string{"/cluster"}},
		{"bad cluster", func(s *clusterstate.Snapshot) { s.Cluster = "Prod EU" }, []string{"/cluster"}},
		{"no time", func(s *clusterstate.Snapshot) { s.Time = time.Time{} }, []string{"/time"}},
		{"pod without name", func(s *clusterstate.Snapshot) { s.Pods[1].Name = "" }, []string{"/pods/1/name"}},
		{"pod without namespace", func(s *clusterstate.Snapshot) { s.Pods[0].Namespace = "" }, []string{"/pods/0/namespace"}},
		{"pod without deploy id", func(s *clusterstate.Snapshot) { s.Pods[0].DeployID = "" }, []string{"/pods/0/deploy_id"}},
		{"duplicate pod", func(s *clusterstate.Snapshot) { s.Pods[1].Name = "a" }, []string{"/pods/1"}},
		{"unknown kind", func(s *clusterstate.Snapshot) { s.Workloads[0].Kind = "CronJob" }, []string{"/workloads/0/kind"}},
		{"bad kstatus", func(s *clusterstate.Snapshot) { s.Workloads[0].KStatus = "Green" }, []string{"/workloads/0/kstatus"}},
		{"negative replicas", func(s *clusterstate.Snapshot) { s.Workloads[0].Replicas.Ready = -1 }, []string{"/workloads/0/replicas"}},
		{"duplicate workload", func(s *clusterstate.Snapshot) { s.Workloads = append(s.Workloads, s.Workloads[0]) }, []string{"/workloads/1"}},
		{"several at once", func(s *clusterstate.Snapshot) { s.Cluster = ""; s.Pods[0].Name = "" }, []string{"/cluster", "/pods/0/name"}},
		{"label values past 63 bytes", func(s *clusterstate.Snapshot) {
			s.Pods[0].Application = strings.Repeat("a", 64)
			s.Workloads[0].Version = strings.Repeat("1", 64)
		}, []string{"/pods/0/application", "/workloads/0/version"}},
		// No cluster holds such label values: a terminal escape, a
		// right-to-left override, a space, a leading dot.
		{"label values no cluster holds", func(s *clusterstate.Snapshot) {
			s.Pods[0].DeployID = "d1\x1b[2J"
			s.Pods[1].Environment = "prod\u202egpj.exe"
			s.Workloads[0].Application = "shop front"
			s.Workloads[0].Version = ".1"
		}, []string{"/pods/0/deploy_id", "/pods/1/environment", "/workloads/0/application", "/workloads/0/version"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := good()
			tt.edit(s)
			got := clusterstate.Validate(s)
			var paths []string
			for _, fe := range got {
				paths = append(paths, fe.Path)
			}
			if strings.Join(paths, " ") != strings.Join(tt.paths, " ") {
				t.Errorf("problems at %v, want %v (%v)", paths, tt.paths, got)
			}
		})
	}
}

// A problem quotes at most 64 bytes of a bad value: 20 problems about
// 500 KB names are not answered with 10 MB.
func TestValidateQuotesLittle(t *testing.T) {
	huge := strings.Repeat("X", 500_000)
	s := &clusterstate.Snapshot{Cluster: huge, Time: time.Now(), Workloads: []clusterstate.Workload{deployment("d1", "1", huge, 3)}}
	s.Workloads[0].Kind, s.Workloads[0].Name = huge, huge
	twice := pod("a", "d1")
	twice.Name = huge
	s.Pods = []clusterstate.Pod{twice, twice, twice} // "reported twice" names the pod
	size := 0
	for _, fe := range clusterstate.Validate(s) {
		size += len(fe.Message)
	}
	if size > 2000 || size == 0 {
		t.Fatalf("the problems quote %d bytes", size)
	}
}

// Bound cuts the free texts of objects to 4096 bytes, marking the cut,
// and leaves the rest as they were.
func TestBound(t *testing.T) {
	s := &clusterstate.Snapshot{Cluster: "c1", Time: time.Now(), Pods: []clusterstate.Pod{pod("a", "d1")},
		Workloads: []clusterstate.Workload{deployment("d1", "1", "Current", 3)}}
	s.Pods[0].Containers = []clusterstate.Container{{Name: "app", Message: strings.Repeat("é", 5000)}}
	s.Workloads[0].KStatusMessage = "short"
	clusterstate.Bound(s)
	if m := s.Pods[0].Containers[0].Message; len(m) > 4096+len("…") || !strings.HasSuffix(m, "…") || !utf8.ValidString(m) {
		t.Errorf("message of %d bytes, valid UTF-8 %v", len(m), utf8.ValidString(m))
	}
	if s.Workloads[0].KStatusMessage != "short" || s.Pods[0].Containers[0].Name != "app" {
		t.Errorf("short texts changed: %+v", s)
	}
}

// fakeSource serves a sequence of observations, the last one forever.
type fakeSource struct {
	mu   sync.Mutex
	seq  []clusterstate.Observation
	errs []error
	n    int
}

func (f *fakeSource) Observe(ctx context.Context, cluster, deployID string) (clusterstate.Observation, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := min(f.n, len(f.seq)-1)
	f.n++
	var err error
	if i < len(f.errs) {
		err = f.errs[i]
	}
	return f.seq[i], err
}

func TestWait(t *testing.T) {
	declared := &clusterstate.Declared{DeployID: "d2", Version: "1.2.0"}
	base := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	inProgress := clusterstate.Observation{Cluster: "c1", Reported: true, LastReportAt: base, Declared: declared,
		Workloads: []clusterstate.Workload{deployment("d2", "1.2.0", "InProgress", 1)}}
	current := inProgress
	current.Workloads = []clusterstate.Workload{deployment("d2", "1.2.0", "Current", 3)}
	failing := inProgress
	failing.Pods = []clusterstate.Pod{pod("billing-abc", "d2", waiting("ErrImagePull"))}
	stale := inProgress
	stale.LastReportAt = base.Add(-time.Hour)

	tests := []struct {
		name    string
		src     *fakeSource
		wantErr string
		notices []string
	}{
		{"ready after progress", &fakeSource{seq: []clusterstate.Observation{inProgress, inProgress, current}}, "", nil},
		{"fails naming the pod", &fakeSource{seq: []clusterstate.Observation{inProgress, failing}}, "shop/billing-abc (app waiting: ErrImagePull)", nil},
		{"read errors are retried", &fakeSource{seq: []clusterstate.Observation{{}, current}, errs: []error{errors.New("db down")}}, "", nil},
		{"notice comes and goes", &fakeSource{seq: []clusterstate.Observation{stale, stale, inProgress, current}}, "",
			[]string{"no report from the agent since 2026-12-02T11:00:00Z", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			var notices []string
			_, err := clusterstate.Wait(ctx, tt.src, "c1", "d2", clusterstate.WaitOptions{
				Every: time.Millisecond, StaleAfter: time.Minute,
				Now:      func() time.Time { return base.Add(time.Second) },
				OnNotice: func(n string) { notices = append(notices, n) },
			})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Wait: %v", err)
			case tt.wantErr != "":
				var fe *clusterstate.FailedError
				if !errors.As(err, &fe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Wait error = %v, want a FailedError containing %q", err, tt.wantErr)
				}
			}
			if strings.Join(notices, "|") != strings.Join(tt.notices, "|") {
				t.Errorf("notices = %q, want %q", notices, tt.notices)
			}
		})
	}

	t.Run("context end returns what is awaited", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		v, err := clusterstate.Wait(ctx, &fakeSource{seq: []clusterstate.Observation{inProgress}}, "c1", "d2",
			clusterstate.WaitOptions{Every: 5 * time.Millisecond})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
		if !strings.Contains(v.Waiting, "1/3 ready") {
			t.Errorf("waiting = %q", v.Waiting)
		}
	})
}
