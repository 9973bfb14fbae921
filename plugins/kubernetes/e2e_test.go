package kubernetes

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeclient "k8s.io/client-go/kubernetes"

	"github.com/manent-io/manent/pkg/kubetest"
	"github.com/manent-io/manent/pkg/plugin"
)

// testLog sends a plugin's log lines to the test log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Logf("plugin: %s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// artifactOf writes the files (path inside the artifact → content) as a
// .tar.gz in dir.
func artifactOf(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	src := t.TempDir()
	for name, content := range files {
		p := filepath.Join(src, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return writeArchive(t, src, filepath.Join(dir, "billing.tar.gz"), "", true)
}

const deploymentV1 = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: billing
spec:
  replicas: 2
  selector:
    matchLabels: {app: billing}
  template:
    metadata:
      labels: {app: billing}
    spec:
      containers:
        - name: app
          image: registry.invalid/billing:dev
          env:
            - {name: VERSION, value: "${MANENT_VERSION}"}
`

const configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: billing-config
data:
  version: "${MANENT_VERSION}"
`

const clusterRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: billing-reader
rules:
  - apiGroups: [""]
    resources: [configmaps]
    verbs: [get]
`

// Version 2 adds an environment variable, a Service and a ConfigMap.
const deploymentV2 = deploymentV1 + `            - {name: FEATURE, value: "on"}
---
apiVersion: v1
kind: Service
metadata:
  name: billing
spec:
  selector: {app: billing}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: billing-extra
data: {a: b}
`

// TestE2ERealAPIServer deploys with the plugin against a real
// kube-apiserver (built by scripts/k8s-test-env.sh). Nothing runs the
// controllers, so the test writes the Deployment's status and a pod's
// container status itself: version 1 deploys from a .tar.gz and activates
// once its Deployment looks rolled out; version 2's activation fails on a
// pod in ImagePullBackOff, naming it; rollback:deploy restores version 1's
// objects and deletes what version 2 added.
func TestE2ERealAPIServer(t *testing.T) {
	kubeAPI := kubetest.Start(t, kubetest.BinDir(t))
	kubeconfig := kubeAPI.Kubeconfig(t, kubeAPI.Token)
	rc, err := RESTConfig(kubeconfig, "e2e")
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubeclient.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const ns = "billing-e2e"
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	must(err)

	p := New(Options{PollInterval: 50 * time.Millisecond})
	with := map[string]any{"kubeconfig": kubeconfig, "context": "e2e", "namespace": ns, "manifests": "k8s/",
		"image": "registry.invalid/billing", "timeout": "30s"}
	must(p.Validate(with))
	root := t.TempDir()
	pc1 := plugin.Context{DeployID: "dpl_e2e1", Application: "billing", Environment: "prod", Version: "1.0.0", Step: "deploy",
		WorkDir: filepath.Join(root, "dpl_e2e1"), With: with, Log: testLog{t}}
	pc1.Artifact = artifactOf(t, pc1.WorkDir, map[string]string{
		"k8s/deployment.yaml": deploymentV1, "k8s/config.yaml": configMap + "---\n" + clusterRole,
		"k8s/notes.txt": "not a manifest", "bin/billing": "the application itself",
	})

	// checkpoint:deploy — nothing is there yet.
	raw, err := p.Live(ctx, pc1)
	must(err)
	var cp1 Checkpoint
	must(json.Unmarshal(raw, &cp1))
	if len(cp1.Objects) != 3 {
		t.Fatalf("checkpoint of version 1 = %s, want 3 objects", raw)
	}
	for _, o := range cp1.Objects {
		if !o.Absent {
			t.Errorf("checkpoint before the first deploy: %s is not absent", o.Ref)
		}
	}

	// deploy version 1, twice (idempotent).
	res, err := p.Deploy(ctx, pc1)
	must(err)
	applied := fmt.Sprint(res["applied"])
	for _, want := range []string{"ConfigMap billing-e2e/billing-config", "ClusterRole billing-reader", "Deployment billing-e2e/billing"} {
		if !strings.Contains(fmt.Sprint(res["applied"].([]Ref)), want) {
			t.Errorf("applied = %s, want %s", applied, want)
		}
	}
	if b, err := os.ReadFile(res["manifests"].(string)); err != nil || !strings.Contains(string(b), "registry.invalid/billing:1.0.0") {
		t.Errorf("rendered manifests %v: %v\n%s", res["manifests"], err, b)
	}
	_, err = p.Deploy(ctx, pc1)
	must(err)
	d, err := kube.AppsV1().Deployments(ns).Get(ctx, "billing", metav1.GetOptions{})
	must(err)
	want1 := map[string]string{"app": "billing", "manent.io/application": "billing", "manent.io/environment": "prod",
		"manent.io/deploy-id": "dpl_e2e1", "manent.io/version": "1.0.0"}
	for k, v := range want1 {
		if d.Labels[k] != v && k != "app" {
			t.Errorf("deployment label %s = %q, want %q", k, d.Labels[k], v)
		}
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("pod template label %s = %q, want %q", k, d.Spec.Template.Labels[k], v)
		}
	}
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.invalid/billing:1.0.0" {
		t.Errorf("image = %q, want registry.invalid/billing:1.0.0", img)
	}
	if env := d.Spec.Template.Spec.Containers[0].Env; len(env) != 1 || env[0].Value != "1.0.0" {
		t.Errorf("env = %v", env)
	}
	if d.Generation != 1 {
		t.Errorf("generation after deploying twice = %d, want 1 (server-side apply of the same manifests changes nothing)", d.Generation)
	}
	if !slices.ContainsFunc(d.ManagedFields, func(m metav1.ManagedFieldsEntry) bool {
		return m.Manager == FieldManager && m.Operation == metav1.ManagedFieldsOperationApply
	}) {
		t.Errorf("managed fields = %+v, want an Apply by %s", d.ManagedFields, FieldManager)
	}
	cr, err := kube.RbacV1().ClusterRoles().Get(ctx, "billing-reader", metav1.GetOptions{})
	must(err)
	if cr.Labels["manent.io/deploy-id"] != "dpl_e2e1" {
		t.Errorf("cluster role labels = %v", cr.Labels)
	}

	// post-test before the Deployment is rolled out: not ready, retryable.
	pc1.Step = "post-test"
	if _, err := p.Health(ctx, pc1); err == nil || plugin.IsPermanent(err) || !strings.Contains(err.Error(), "not ready") {
		t.Errorf("Health before rollout = %v, want a retryable not-ready error", err)
	}
	rolledOut := func(generation int64) {
		t.Helper()
		_, err := kube.AppsV1().Deployments(ns).Patch(ctx, "billing", types.MergePatchType, fmt.Appendf(nil,
			`{"status":{"observedGeneration":%d,"replicas":2,"updatedReplicas":2,"readyReplicas":2,"availableReplicas":2,`+
				`"conditions":[{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"},`+
				`{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}}`, generation),
			metav1.PatchOptions{}, "status")
		must(err)
	}
	// Activation gives up after with.timeout, retryably, saying what it waited for.
	short := maps.Clone(with)
	short["timeout"] = "300ms"
	pcShort := pc1
	pcShort.With = short
	if _, err := p.Activate(ctx, pcShort); err == nil || plugin.IsPermanent(err) ||
		!strings.Contains(err.Error(), "not ready after 300ms: Deployment billing-e2e/billing") {
		t.Errorf("Activate before rollout = %v, want a retryable timeout naming the Deployment", err)
	}
	rolledOut(d.Generation)

	// activation waits for readiness: Current at once.
	pc1.Step = "activation"
	res, err = p.Activate(ctx, pc1)
	if err != nil {
		t.Fatalf("Activate version 1: %v", err)
	}
	if fmt.Sprint(res["workloads"]) != "[Deployment billing-e2e/billing: CURRENT]" {
		t.Errorf("activate = %v", res)
	}
	if _, err := p.Health(ctx, pc1); err != nil {
		t.Errorf("Health after rollout = %v", err)
	}

	// Version 2: checkpoint, deploy.
	pc2 := plugin.Context{DeployID: "dpl_e2e2", Application: "billing", Environment: "prod", Version: "2.0.0", Step: "checkpoint:deploy",
		WorkDir: filepath.Join(root, "dpl_e2e2"), With: with, Log: testLog{t}}
	pc2.Artifact = artifactOf(t, pc2.WorkDir, map[string]string{
		"k8s/deployment.yaml": deploymentV2, "k8s/config.yaml": configMap + "---\n" + clusterRole,
	})
	cpDeploy, err := p.Live(ctx, pc2)
	must(err)
	var cp2 Checkpoint
	must(json.Unmarshal(cpDeploy, &cp2))
	live := map[string]LiveObject{}
	for _, o := range cp2.Objects {
		live[o.Ref.String()] = o
	}
	if len(cp2.Objects) != 5 || !live["Service billing-e2e/billing"].Absent || !live["ConfigMap billing-e2e/billing-extra"].Absent ||
		live["Deployment billing-e2e/billing"].Object == nil {
		t.Fatalf("checkpoint of version 2 = %s", cpDeploy)
	}
	dep := live["Deployment billing-e2e/billing"].Object
	if md := dep["metadata"].(map[string]any); md["resourceVersion"] != nil || md["uid"] != nil || md["managedFields"] != nil || dep["status"] != nil {
		t.Errorf("checkpointed deployment keeps server fields: %v", md)
	}
	pc2.Step = "deploy"
	_, err = p.Deploy(ctx, pc2)
	must(err)
	d, err = kube.AppsV1().Deployments(ns).Get(ctx, "billing", metav1.GetOptions{})
	must(err)
	if img := d.Spec.Template.Spec.Containers[0].Image; img != "registry.invalid/billing:2.0.0" || d.Labels["manent.io/deploy-id"] != "dpl_e2e2" {
		t.Fatalf("after deploying version 2: image %q, labels %v", img, d.Labels)
	}
	_, err = kube.CoreV1().Services(ns).Get(ctx, "billing", metav1.GetOptions{})
	must(err)

	// A pod of version 2 cannot pull its image.
	const podName = "billing-5c8d-pull"
	_, err = kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: d.Spec.Template.Labels, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "billing-5c8d", UID: "e2e-rs-uid", Controller: new(true)}}},
		Spec: d.Spec.Template.Spec,
	}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().Pods(ns).Patch(ctx, podName, types.StrategicMergePatchType, []byte(
		`{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}],`+
			`"containerStatuses":[{"name":"app","image":"registry.invalid/billing:2.0.0","imageID":"","ready":false,"restartCount":0,`+
			`"state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image"}}}]}}`),
		metav1.PatchOptions{}, "status")
	must(err)

	pc2.Step = "activation"
	start := time.Now()
	_, err = p.Activate(ctx, pc2)
	if err == nil || !strings.Contains(err.Error(), ns+"/"+podName) || !strings.Contains(err.Error(), "ImagePullBackOff") {
		t.Fatalf("Activate version 2 = %v, want a failure naming %s/%s", err, ns, podName)
	}
	if !plugin.IsPermanent(err) {
		t.Errorf("Activate version 2 = %v, want permanent (the image cannot be pulled)", err)
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("Activate took %s to fail; a failing pod should fail it at once, not at the timeout", took)
	}
	if _, err := p.Health(ctx, pc2); err == nil || !strings.Contains(err.Error(), podName) {
		t.Errorf("Health of version 2 = %v, want the failure", err)
	}

	// Someone else takes over billing-extra: the rollback must keep it.
	_, err = kube.CoreV1().ConfigMaps(ns).Patch(ctx, "billing-extra", types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"manent.io/deploy-id":"someone-else"}}}`), metav1.PatchOptions{})
	must(err)

	// Compensation: rollback:activation, then rollback:deploy (twice: idempotent).
	pc2.Step = "rollback:activation"
	_, err = p.RollbackActivation(ctx, pc2, json.RawMessage(`{"objects":[]}`))
	must(err)
	pc2.Step = "rollback:deploy"
	for i := range 2 {
		res, err = p.RollbackDeploy(ctx, pc2, cpDeploy)
		if err != nil {
			t.Fatalf("RollbackDeploy #%d: %v", i+1, err)
		}
	}
	t.Logf("rollback: %v", res)
	d, err = kube.AppsV1().Deployments(ns).Get(ctx, "billing", metav1.GetOptions{})
	must(err)
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.invalid/billing:1.0.0" || len(c.Env) != 1 || c.Env[0].Value != "1.0.0" {
		t.Errorf("after rollback: image %q, env %v; want version 1's (registry.invalid/billing:1.0.0, VERSION=1.0.0 only)", c.Image, c.Env)
	}
	if d.Labels["manent.io/deploy-id"] != "dpl_e2e1" || d.Spec.Template.Labels["manent.io/version"] != "1.0.0" {
		t.Errorf("after rollback: labels %v, template labels %v; want version 1's", d.Labels, d.Spec.Template.Labels)
	}
	if _, err := kube.CoreV1().Services(ns).Get(ctx, "billing", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Service billing after rollback: %v, want it deleted (absent before version 2)", err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "billing-extra", metav1.GetOptions{}); err != nil {
		t.Errorf("ConfigMap billing-extra after rollback: %v, want it kept (no longer labelled with this deploy)", err)
	}
	cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "billing-config", metav1.GetOptions{})
	must(err)
	if cm.Data["version"] != "1.0.0" || cm.Labels["manent.io/deploy-id"] != "dpl_e2e1" {
		t.Errorf("billing-config after rollback: data %v, labels %v", cm.Data, cm.Labels)
	}

	// A deploy that brings its own CustomResourceDefinition: the checkpoint
	// finds the kind unknown (absent), the deploy applies the CRD first and
	// waits for its kind, activation has no workload to wait for.
	pc3 := plugin.Context{DeployID: "dpl_e2e3", Application: "billing", Environment: "prod", Version: "3.0.0", Step: "deploy",
		WorkDir: filepath.Join(root, "dpl_e2e3"), With: with, Log: testLog{t}}
	pc3.Artifact = artifactOf(t, pc3.WorkDir, map[string]string{"k8s/widget.yaml": widget, "k8s/crd.yaml": widgetCRD})
	raw, err = p.Live(ctx, pc3)
	must(err)
	var cp3 Checkpoint
	must(json.Unmarshal(raw, &cp3))
	if len(cp3.Objects) != 2 || cp3.Objects[0].Kind != "CustomResourceDefinition" || !cp3.Objects[0].Absent || !cp3.Objects[1].Absent {
		t.Errorf("checkpoint before the CRD = %s", raw)
	}
	_, err = p.Deploy(ctx, pc3)
	must(err)
	res, err = p.Activate(ctx, pc3)
	if err != nil || fmt.Sprint(res["workloads"]) != "[]" {
		t.Errorf("Activate without workloads = %v, %v", res, err)
	}
	res, err = p.RollbackDeploy(ctx, pc3, raw)
	must(err)
	if got := fmt.Sprint(res["deleted"], res["kept"]); got != "[Widget billing-e2e/billing-widget] [CustomResourceDefinition widgets.example.manent.io]" {
		t.Errorf("rollback of the CRD deploy: deleted, kept = %s", got)
	}
	if _, err := kube.Discovery().ServerResourcesForGroupVersion("example.manent.io/v1"); err != nil {
		t.Errorf("the CRD's group after rollback: %v, want it kept (a rollback never deletes a CRD)", err)
	}
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.manent.io
spec:
  group: example.manent.io
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                size: {type: integer}
`

const widget = `apiVersion: example.manent.io/v1
kind: Widget
metadata:
  name: billing-widget
spec:
  size: 3
`
