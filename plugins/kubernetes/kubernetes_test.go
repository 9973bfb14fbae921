package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		with map[string]any
		err  string // "" for valid
	}{
		{"defaults", map[string]any{}, ""},
		{"full", map[string]any{"kubeconfig": "/etc/kube", "context": "prod", "namespace": "billing", "manifests": "k8s/",
			"image": "localhost:5000/billing", "wait": false, "timeout": "90s"}, ""},
		{"unknown key", map[string]any{"namespac": "x"}, `unknown setting with.namespac (did you mean "namespace"?`},
		{"empty namespace", map[string]any{"namespace": ""}, "with.namespace must not be empty"},
		{"bad namespace", map[string]any{"namespace": "Billing_Prod"}, "not a namespace name"},
		{"empty manifests", map[string]any{"manifests": " "}, "with.manifests must not be empty"},
		{"absolute manifests", map[string]any{"manifests": "/etc/k8s"}, "relative path inside the artifact"},
		{"escaping manifests", map[string]any{"manifests": "k8s/../../x"}, "relative path inside the artifact"},
		{"image with tag", map[string]any{"image": "registry.example/billing:1"}, "without tag or digest"},
		{"bad timeout", map[string]any{"timeout": "soon"}, "positive duration"},
		{"timeout not a string", map[string]any{"timeout": 300}, "with.timeout must be a duration such as 30s or 10m, with its unit, got the number 300"},
		{"wait not a bool", map[string]any{"wait": "yes"}, "with.wait must be true or false"},
	}
	p := New(Options{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Validate(tc.with)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("Validate = %v, want an error containing %q", err, tc.err)
			}
		})
	}
	c, err := parse(map[string]any{})
	if err != nil || c.Namespace != "default" || c.Manifests != "." || !c.Wait || c.Timeout != DefaultTimeout {
		t.Errorf("defaults = %+v, %v", c, err)
	}
}

func TestStrip(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "x", "namespace": "ns", "uid": "u", "resourceVersion": "7", "generation": int64(2),
			"creationTimestamp": "2026-01-01T00:00:00Z", "managedFields": []any{map[string]any{"manager": "m"}},
			"labels": map[string]any{"a": "b"}},
		"data":   map[string]any{"k": "v"},
		"status": map[string]any{"x": "y"},
	}}
	got := strip(u)
	b, _ := json.Marshal(got)
	if want := `{"apiVersion":"v1","data":{"k":"v"},"kind":"ConfigMap","metadata":{"labels":{"a":"b"},"name":"x","namespace":"ns"}}`; string(b) != want {
		t.Errorf("strip = %s, want %s", b, want)
	}
	if u.Object["status"] == nil {
		t.Error("strip changed its argument")
	}
}

func TestJudge(t *testing.T) {
	const id = "dpl_2"
	dep := Ref{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "billing"}
	workload := func(deployID, kstatus string) clusterstate.Workload {
		return clusterstate.Workload{Kind: "Deployment", Namespace: "ns", Name: "billing", DeployID: deployID, KStatus: kstatus,
			Replicas: clusterstate.Replicas{Desired: 1, Ready: 1, Updated: 1, Available: 1}}
	}
	pod := func(name, deployID, waiting, terminated string) clusterstate.Pod {
		return clusterstate.Pod{Namespace: "ns", Name: name, DeployID: deployID, Phase: "Pending",
			Containers: []clusterstate.Container{{Name: "app", WaitingReason: waiting, TerminatedReason: terminated}}}
	}
	obs := func(ws []clusterstate.Workload, ps ...clusterstate.Pod) clusterstate.Observation {
		return clusterstate.Observation{Cluster: "test", Reported: true, Workloads: ws, Pods: ps}
	}
	tests := []struct {
		name      string
		obs       clusterstate.Observation
		ready     bool
		failed    string // substring of the failure, "" for none
		permanent bool
		waiting   string
	}{
		{"current", obs([]clusterstate.Workload{workload(id, "Current")}), true, "", false, ""},
		{"in progress", obs([]clusterstate.Workload{workload(id, "InProgress")}), false, "", false, "kstatus InProgress"},
		{"another deploy's workload", obs([]clusterstate.Workload{workload("dpl_1", "Current")}), false, "", false, "Deployment ns/billing not seen"},
		{"image pull", obs([]clusterstate.Workload{workload(id, "InProgress")}, pod("billing-a", id, "ImagePullBackOff", "")),
			false, "ns/billing-a (app waiting: ImagePullBackOff)", true, ""},
		{"config error", obs([]clusterstate.Workload{workload(id, "InProgress")}, pod("billing-a", id, "CreateContainerConfigError", "")),
			false, "CreateContainerConfigError", true, ""},
		{"crash loop", obs([]clusterstate.Workload{workload(id, "InProgress")}, pod("billing-a", id, "CrashLoopBackOff", "")),
			false, "ns/billing-a (app waiting: CrashLoopBackOff)", false, ""},
		{"oom", obs([]clusterstate.Workload{workload(id, "InProgress")}, pod("billing-a", id, "", "OOMKilled")),
			false, "app terminated: OOMKilled", false, ""},
		{"another deploy's failing pod", obs([]clusterstate.Workload{workload(id, "Current")}, pod("old", "dpl_1", "ImagePullBackOff", "")),
			true, "", false, ""},
		{"progress deadline", obs([]clusterstate.Workload{workload(id, "Failed")}), false, "kstatus Failed", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := judge(tc.obs, id, []Ref{dep})
			if r.Ready != tc.ready {
				t.Errorf("ready = %v, want %v (%+v)", r.Ready, tc.ready, r)
			}
			switch {
			case tc.failed == "" && r.Failed != nil:
				t.Errorf("failed = %v, want none", r.Failed)
			case tc.failed != "" && (r.Failed == nil || !strings.Contains(r.Failed.Error(), tc.failed)):
				t.Errorf("failed = %v, want it to contain %q", r.Failed, tc.failed)
			case tc.failed != "" && plugin.IsPermanent(r.Failed) != tc.permanent:
				t.Errorf("failure permanent = %v, want %v", plugin.IsPermanent(r.Failed), tc.permanent)
			}
			if !strings.Contains(r.Waiting, tc.waiting) {
				t.Errorf("waiting = %q, want it to contain %q", r.Waiting, tc.waiting)
			}
		})
	}
	// Five pods are named at most.
	var pods []clusterstate.Pod
	for _, n := range []string{"p1", "p2", "p3", "p4", "p5", "p6", "p7"} {
		pods = append(pods, pod(n, id, "ErrImagePull", ""))
	}
	r := judge(obs([]clusterstate.Workload{workload(id, "InProgress")}, pods...), id, []Ref{dep})
	if r.Failed == nil || strings.Contains(r.Failed.Error(), "ns/p6") || !strings.Contains(r.Failed.Error(), "and 2 more") {
		t.Errorf("failure naming 7 pods = %v, want 5 named and 2 more", r.Failed)
	}
}

// TestActionsWithoutCluster covers what the actions refuse before they
// reach a cluster.
func TestActionsWithoutCluster(t *testing.T) {
	p := New(Options{})
	ctx := context.Background()
	pc := plugin.Context{DeployID: "dpl_1", Application: "billing", Environment: "prod", Version: "1.0.0",
		WorkDir: t.TempDir(), With: map[string]any{"namespace": "billing"}}
	if _, err := p.Deploy(ctx, pc); err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "no artifact") {
		t.Errorf("Deploy without artifact = %v, want a permanent error", err)
	}
	pc.Artifact = filepath.Join(t.TempDir(), "gone.tgz")
	if _, err := p.Live(ctx, pc); err == nil || !plugin.IsPermanent(err) {
		t.Errorf("Live with a missing artifact = %v, want a permanent error", err)
	}
	pc.With = map[string]any{"bogus": true}
	if _, err := p.Activate(ctx, pc); err == nil || !plugin.IsPermanent(err) {
		t.Errorf("Activate with a bad with = %v, want a permanent error", err)
	}
	pc.With = map[string]any{}
	for _, cp := range []string{"", "null", "{"} {
		if _, err := p.RollbackDeploy(ctx, pc, json.RawMessage(cp)); err == nil || !plugin.IsPermanent(err) {
			t.Errorf("RollbackDeploy(%q) = %v, want a permanent error", cp, err)
		}
	}
	if _, err := p.RollbackActivation(ctx, pc, nil); err != nil {
		t.Errorf("RollbackActivation = %v, want nil (nothing to undo)", err)
	}
}

// with.kubeconfig must be one of Options.Kubeconfigs when the list is set
// (plugins.kubernetes.kubeconfigs): refused by Validate at submission and
// again when an action connects, before client-go reads the file (a
// kubeconfig's exec entry runs a command as the server).
func TestKubeconfigAllowed(t *testing.T) {
	read := 0
	rc := func(string, string) (*rest.Config, error) { read++; return nil, errors.New("read") }
	for _, tc := range []struct {
		name string
		list []string
		path string
		ok   bool
	}{
		{"any (nil list)", nil, "/anything", true},
		{"none (empty list)", []string{}, "/etc/kube/prod.yaml", false},
		{"listed", []string{"/etc/kube/prod.yaml"}, "/etc/kube/prod.yaml", true},
		{"listed, not clean", []string{"/etc/kube/prod.yaml"}, "/etc/kube/./x/../prod.yaml", true},
		{"not listed", []string{"/etc/kube/prod.yaml"}, "/tmp/planted.yaml", false},
		{"relative", []string{"/etc/kube/prod.yaml"}, "prod.yaml", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var list []Kubeconfig
			if tc.list != nil {
				list = []Kubeconfig{}
			}
			for _, f := range tc.list {
				list = append(list, Kubeconfig{Path: f})
			}
			p := New(Options{Kubeconfigs: list, RESTConfig: rc})
			with := map[string]any{"kubeconfig": tc.path}
			err := p.Validate(with)
			if (err == nil) != tc.ok {
				t.Fatalf("Validate: %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				var se *plugin.SettingError
				if !errors.As(err, &se) || se.Path != "kubeconfig" {
					t.Fatalf("Validate: %v, want a setting error at kubeconfig", err)
				}
			}
			before := read
			_, err = p.connect(config{Kubeconfig: tc.path})
			if tc.ok != (read == before+1) || err == nil {
				t.Fatalf("connect: %v, file read %d times, want read only when allowed", err, read-before)
			}
			if !tc.ok && !plugin.IsPermanent(err) {
				t.Fatalf("connect: %v, want a permanent error", err)
			}
		})
	}
	if err := New(Options{Kubeconfigs: []Kubeconfig{}}).Validate(map[string]any{}); err != nil {
		t.Fatalf("no with.kubeconfig: %v, want the default configuration allowed", err)
	}
}

// CheckEnvironment keeps a file of plugins.kubernetes.kubeconfigs to the
// environments its entry names (names or patterns, the path compared
// clean), lets the environment configuration's own file through, and
// leaves every other question to Validate.
func TestCheckEnvironment(t *testing.T) {
	p := New(Options{Kubeconfigs: []Kubeconfig{
		{Path: "/etc/kube/prod.yaml", Environments: []string{"prod", "prod-*"}},
		{Path: "/etc/kube/shared.yaml"},
	}})
	for _, tc := range []struct {
		env, file, envFile string
		ok                 bool
	}{
		{"prod", "/etc/kube/prod.yaml", "", true},
		{"prod-eu", "/etc/kube/./prod.yaml", "", true},
		{"dev", "/etc/kube/prod.yaml", "", false},
		{"dev", "/etc/kube/x/../prod.yaml", "", false},
		{"production", "/etc/kube/prod.yaml", "", false},
		{"dev", "/etc/kube/prod.yaml", "/etc/kube/./prod.yaml", true}, // the operator's choice
		{"dev", "/etc/kube/prod.yaml", "/etc/kube/shared.yaml", false},
		{"dev", "/etc/kube/shared.yaml", "", true},
		{"dev", "/etc/kube/unlisted.yaml", "", true}, // Validate refuses it
		{"dev", "", "", true},
	} {
		with := map[string]any{}
		if tc.file != "" {
			with["kubeconfig"] = tc.file
		}
		var envWith map[string]any
		if tc.envFile != "" {
			envWith = map[string]any{"kubeconfig": tc.envFile}
		}
		err := p.CheckEnvironment(tc.env, with, envWith)
		if (err == nil) != tc.ok {
			t.Errorf("%s naming %q (environment's %q): %v, want ok %v", tc.env, tc.file, tc.envFile, err, tc.ok)
			continue
		}
		if err != nil {
			var se *plugin.SettingError
			if !errors.As(err, &se) || se.Path != "kubeconfig" || !strings.Contains(err.Error(), "prod, prod-*") || strings.Contains(err.Error(), "shared.yaml") {
				t.Errorf("%s naming %q: %v, want a setting error at kubeconfig naming prod, prod-* and no other file", tc.env, tc.file, err)
			}
		}
	}
	// A file not listed, while some entry names environments: the list is
	// not shown.
	err := p.Validate(map[string]any{"kubeconfig": "/tmp/planted.yaml"})
	if err == nil || strings.Contains(err.Error(), "prod.yaml") || strings.Contains(err.Error(), "shared.yaml") {
		t.Errorf("Validate of an unlisted file: %v, want a refusal naming no listed file", err)
	}
}
