package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeclient "k8s.io/client-go/kubernetes"

	"github.com/manent-io/manent/pkg/kubetest"
	"github.com/manent-io/manent/pkg/plugin"
)

// An autoscaled Deployment: its manifests leave replicas to the autoscaler.
const deploymentAutoscaled = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: billing
spec:
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

// TestE2ERollbackLeavesWhatOthersChanged: someone scales the Deployment
// (kubectl edit) while version 2 is being deployed; the rollback returns
// what the deploy changed (the template) and leaves the replicas as they
// were set, saying so. Before, the rollback forced the checkpoint's
// replicas back (scaling down in the middle of an incident) and took the
// field over, so that the next deploy, whose manifests leave replicas out,
// reset the Deployment to 1 replica.
func TestE2ERollbackLeavesWhatOthersChanged(t *testing.T) {
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
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	const ns = "hpa-e2e"
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)

	var mu sync.Mutex
	var logs bytes.Buffer
	p := New(Options{PollInterval: 50 * time.Millisecond})
	with := map[string]any{"kubeconfig": kubeconfig, "context": "e2e", "namespace": ns, "image": "registry.invalid/billing", "wait": false}
	root := t.TempDir()
	pcOf := func(id, version, manifest string) plugin.Context {
		pc := plugin.Context{DeployID: id, Application: "billing", Environment: "prod", Version: version, Step: "deploy",
			WorkDir: filepath.Join(root, id), With: with, Log: syncLog{&mu, &logs}}
		pc.Artifact = artifactOf(t, pc.WorkDir, map[string]string{"deployment.yaml": manifest})
		return pc
	}
	// scale is someone raising the replicas with kubectl edit (an Update
	// under its own field manager). The scale subresource (kubectl scale,
	// the autoscaler) is TestE2ERollbackLeavesReplicasSetThroughScale's.
	scale := func(n int32) {
		t.Helper()
		_, err := kube.AppsV1().Deployments(ns).Patch(ctx, "billing", types.MergePatchType,
			fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n), metav1.PatchOptions{FieldManager: "kubectl-edit"})
		must(err)
	}
	state := func() (replicas int32, image string) {
		t.Helper()
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "billing", metav1.GetOptions{})
		must(err)
		return *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image
	}

	pc1 := pcOf("dpl_hpa1", "1.0.0", deploymentAutoscaled)
	_, err = p.Deploy(ctx, pc1)
	must(err)
	scale(4)

	pc2 := pcOf("dpl_hpa2", "2.0.0", deploymentAutoscaled)
	cp, err := p.Live(ctx, pc2)
	must(err)
	_, err = p.Deploy(ctx, pc2)
	must(err)
	scale(7) // the new version is slow: someone adds pods
	// and tries a fix by hand: the rollback still puts version 1 back.
	_, err = kube.AppsV1().Deployments(ns).Patch(ctx, "billing", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"registry.invalid/billing:hotfix"}]}}}}`),
		metav1.PatchOptions{FieldManager: "kubectl-edit"})
	must(err)

	for i := range 2 { // a crash re-runs the compensation: the same outcome
		res, err := p.RollbackDeploy(ctx, pc2, cp)
		must(err)
		if replicas, image := state(); replicas != 7 || image != "registry.invalid/billing:1.0.0" {
			t.Fatalf("after rollback #%d: %d replicas, image %s; want 7 (as kubectl edit set them) and version 1's image", i+1, replicas, image)
		}
		left, _ := json.Marshal(res["left_as_changed"])
		if !strings.Contains(string(left), "Deployment hpa-e2e/billing spec.replicas (set by kubectl-edit: 7 now, 4 in the checkpoint)") {
			t.Errorf("rollback #%d: left_as_changed = %s, want it to name spec.replicas", i+1, left)
		}
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if !strings.Contains(out, "left Deployment hpa-e2e/billing spec.replicas (set by kubectl-edit: 7 now, 4 in the checkpoint) as it is") {
		t.Errorf("the log does not say the replicas were left as kubectl edit set them:\n%s", out)
	}

	// The next deploy leaves replicas out too: the 7 stay.
	_, err = p.Deploy(ctx, pcOf("dpl_hpa3", "3.0.0", deploymentAutoscaled))
	must(err)
	if replicas, image := state(); replicas != 7 || image != "registry.invalid/billing:3.0.0" {
		t.Errorf("after the next deploy: %d replicas, image %s; want 7 and version 3's image", replicas, image)
	}
}

// syncLog is a plugin log read while it is written.
type syncLog struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w syncLog) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
