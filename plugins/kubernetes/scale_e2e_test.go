package kubernetes

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeclient "k8s.io/client-go/kubernetes"

	"github.com/manent-io/manent/pkg/kubetest"
	"github.com/manent-io/manent/pkg/plugin"
)

// TestE2ERollbackLeavesReplicasSetThroughScale: `kubectl scale` and the
// autoscaler change spec.replicas through the scale subresource, which the
// API server records as an Update of spec.replicas by their manager
// (subresource "scale"). Whether the manifests set replicas (manent owned
// them) or left them out, the rollback leaves the count they set, says so,
// and a rollback run again (a crash) does the same.
func TestE2ERollbackLeavesReplicasSetThroughScale(t *testing.T) {
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
	withReplicas := strings.Replace(deploymentAutoscaled, "spec:\n  selector:", "spec:\n  replicas: 2\n  selector:", 1)
	for _, tc := range []struct{ name, manifest, manager, said string }{
		{"manifests set replicas, kubectl scale", withReplicas, "kubectl", "set by kubectl"},
		// The scale subresource records no manager of a field no one
		// owned: the replicas the autoscaler sets belong to no one.
		{"manifests leave replicas, autoscaler", deploymentAutoscaled, "kube-controller-manager", "set outside manent, by no field manager the cluster names — the scale subresource, an autoscaler, a default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := "scale-" + map[string]string{"kubectl": "a", "kube-controller-manager": "b"}[tc.manager]
			_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			must(err)
			var mu sync.Mutex
			var logs bytes.Buffer
			p := New(Options{PollInterval: 50 * time.Millisecond})
			with := map[string]any{"kubeconfig": kubeconfig, "context": "e2e", "namespace": ns, "image": "registry.invalid/billing", "wait": false}
			root := t.TempDir()
			pcOf := func(id, version string) plugin.Context {
				pc := plugin.Context{DeployID: id, Application: "billing", Environment: "prod", Version: version, Step: "deploy",
					WorkDir: filepath.Join(root, id), With: with, Log: syncLog{&mu, &logs}}
				pc.Artifact = artifactOf(t, pc.WorkDir, map[string]string{"deployment.yaml": tc.manifest})
				return pc
			}
			scale := func(n int32) {
				t.Helper()
				_, err := kube.AppsV1().Deployments(ns).UpdateScale(ctx, "billing", &autoscalingv1.Scale{
					ObjectMeta: metav1.ObjectMeta{Name: "billing", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: n},
				}, metav1.UpdateOptions{FieldManager: tc.manager})
				must(err)
			}
			state := func() (replicas int32, image string) {
				t.Helper()
				d, err := kube.AppsV1().Deployments(ns).Get(ctx, "billing", metav1.GetOptions{})
				must(err)
				return *d.Spec.Replicas, d.Spec.Template.Spec.Containers[0].Image
			}
			_, err := p.Deploy(ctx, pcOf("dpl_s1", "1.0.0"))
			must(err)
			scale(3)
			pc2 := pcOf("dpl_s2", "2.0.0")
			cp, err := p.Live(ctx, pc2)
			must(err)
			_, err = p.Deploy(ctx, pc2)
			must(err)
			scale(6) // the incident: more pods
			for i := range 2 {
				res, err := p.RollbackDeploy(ctx, pc2, cp)
				must(err)
				if replicas, image := state(); replicas != 6 || image != "registry.invalid/billing:1.0.0" {
					t.Fatalf("after rollback #%d: %d replicas, image %s; want 6 (as %s set them through scale) and version 1's image", i+1, replicas, image, tc.manager)
				}
				left, _ := json.Marshal(res["left_as_changed"])
				if !strings.Contains(string(left), "Deployment "+ns+"/billing spec.replicas ("+tc.said+": 6 now, 3 in the checkpoint)") {
					t.Errorf("rollback #%d: left_as_changed = %s, want it to name spec.replicas", i+1, left)
				}
			}
		})
	}

	// Manifests that set replicas, then a version that leaves them out:
	// the apply of the second drops manent's replicas (back to the
	// default, 1), and its rollback returns the first's count.
	t.Run("a version that leaves out the replicas its previous set", func(t *testing.T) {
		const ns = "scale-d"
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
		_, err := p.Deploy(ctx, pcOf("dpl_d1", "1.0.0", withReplicas))
		must(err)
		pc2 := pcOf("dpl_d2", "2.0.0", deploymentAutoscaled)
		cp, err := p.Live(ctx, pc2)
		must(err)
		_, err = p.Deploy(ctx, pc2)
		must(err)
		_, err = p.RollbackDeploy(ctx, pc2, cp)
		must(err)
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, "billing", metav1.GetOptions{})
		must(err)
		if *d.Spec.Replicas != 2 {
			t.Fatalf("after the rollback: %d replicas, want 2 (version 1's manifests)", *d.Spec.Replicas)
		}
	})
}
