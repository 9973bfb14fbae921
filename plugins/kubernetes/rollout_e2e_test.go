package kubernetes_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubeclient "k8s.io/client-go/kubernetes"

	"github.com/manent-io/manent/pkg/agentcmd"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/kubetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/clusterready"
	"github.com/manent-io/manent/plugins/kubernetes"
)

// billing is a 3-replica Deployment; the plugin sets its image's tag.
const billing = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: billing
spec:
  replicas: 3
  selector:
    matchLabels: {app: billing}
  template:
    metadata:
      labels: {app: billing}
    spec:
      containers:
        - name: app
          image: registry.invalid/billing:dev
`

// TestE2EPercentageRollout runs percentage rollouts through a real manent
// server against a real kube-apiserver, with the real agent reporting the
// cluster. Nothing runs pods or controllers there: the test writes the
// Deployments' status (and a failing pod) itself, and the health gate
// learns it from the agent's reports.
//
//   - version 1 deploys in full;
//   - version 2, percentages [34, 100]: wave 1 runs a canary of
//     ceil(34 × 3 / 100) = 2 replicas beside stable, untouched; once the
//     agent reports the canary ready, wave 2 updates stable and removes the
//     canary;
//   - version 3: a canary pod cannot pull its image, the health gate of
//     wave 1 fails, and the rollback removes the canary and leaves stable
//     (version 2) untouched.
func TestE2EPercentageRollout(t *testing.T) {
	kubeAPI := kubetest.Start(t, kubetest.BinDir(t))
	kubeconfig := kubeAPI.Kubeconfig(t, kubeAPI.Token)
	rc, err := kubernetes.RESTConfig(kubeconfig, "e2e")
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
	ns := fmt.Sprintf("rollout-%d", time.Now().UnixNano()%1_000_000)
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	must(err)

	// A real manent server with the kubernetes plugin and its cluster-ready wait.
	const token = "e2e-rollout-token"
	dir := t.TempDir()
	cfg := servertest.Config(dir)
	cfg.Database, cfg.ExecutorID = enginetest.SQLite(t), "e2e"
	n, err := node.Open(ctx, cfg, node.Options{
		BootstrapToken: token,
		Plugins: func(reg *plugin.Registry, host node.Host) error {
			cr := clusterready.New(host.Store).WithPollInterval(50 * time.Millisecond)
			return errors.Join(
				reg.RegisterTarget("kubernetes", kubernetes.New(kubernetes.Options{PollInterval: 50 * time.Millisecond, ClusterReady: cr})),
				reg.RegisterRunner("cluster-ready", cr))
		},
	})
	must(err)
	must(n.Launch(ctx))
	hs := httptest.NewServer(n.API)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		n.Close(5 * time.Second)
	})
	client := api.NewClient(hs.URL, token, nil)

	// The agent, as manent-agent (what `manent agent` runs), in-process,
	// reading the namespace.
	agentCtx, stopAgent := context.WithCancel(ctx)
	var agentLog bytes.Buffer
	var mu sync.Mutex
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		cli.SiblingRun(agentCtx, cli.Invocation{
			Args: []string{"--server", hs.URL, "--token", token, "--cluster", "e2e", "--namespace", ns,
				"--kubeconfig", kubeconfig, "--interval", "1s"},
			Stderr: lockedWriter{&mu, &agentLog},
		}, agentcmd.NewCmd)
	}()
	t.Cleanup(func() { // the agent stops before the servers
		stopAgent()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
		}
		if t.Failed() {
			mu.Lock()
			t.Logf("agent log:\n%s", agentLog.String())
			mu.Unlock()
		}
	})

	// The application's own health endpoint (post-test and the gates' HTTP check).
	health := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(health.Close)
	art := filepath.Join(dir, "billing.yaml")
	must(os.WriteFile(art, []byte(billing), 0o644))
	submit := func(version, rollout string) string {
		t.Helper()
		desc, _ := json.Marshal(map[string]any{
			"apiVersion": "manent/v1", "application": "billing", "environment": "prod", "version": version,
			"artifact": map[string]any{"url": "file://" + art},
			"target": map[string]any{"plugin": "kubernetes", "with": map[string]any{"kubeconfig": kubeconfig, "context": "e2e",
				"namespace": ns, "image": "registry.invalid/billing", "wait": false, "timeout": "2m", "cluster": "e2e"}},
			"health":   []any{map[string]any{"url": health.URL}},
			"rollback": map[string]any{"enabled": true},
		})
		if rollout != "" {
			var m map[string]any
			must(json.Unmarshal(desc, &m))
			m["rollout"] = map[string]any{"percentages": []int{34, 100}}
			desc, _ = json.Marshal(m)
		}
		res, err := client.Submit(ctx, desc, false)
		if err != nil {
			t.Fatalf("submit %s: %v", version, err)
		}
		return res.ID
	}
	wait := func(id string) *manent.Deployment {
		t.Helper()
		d, err := client.Wait(ctx, id, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	stepState := func(d *manent.Deployment, name string) manent.StepState {
		for _, s := range d.Steps {
			if s.Name == name {
				return s.State
			}
		}
		return ""
	}
	waitStep := func(id, name string, state manent.StepState) {
		t.Helper()
		enginetest.Eventually(t, 90*time.Second, func() bool {
			d, err := client.Deployment(ctx, id)
			return err == nil && stepState(d, name) == state
		}, "step %s of %s to be %s", name, id, state)
	}
	get := func(name string) *appsv1.Deployment {
		t.Helper()
		d, err := kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		must(err)
		return d
	}
	// rolledOut writes the status the Deployment controller would once
	// every replica is up.
	rolledOut := func(name string) {
		t.Helper()
		d := get(name)
		r := *d.Spec.Replicas
		_, err := kube.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, fmt.Appendf(nil,
			`{"status":{"observedGeneration":%d,"replicas":%d,"updatedReplicas":%d,"readyReplicas":%d,"availableReplicas":%d,`+
				`"conditions":[{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable"},`+
				`{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}}`, d.Generation, r, r, r, r),
			metav1.PatchOptions{}, "status")
		must(err)
	}
	image := func(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }

	// Version 1, in full.
	id1 := submit("1.0.0", "")
	if d := wait(id1); d.State != manent.StateSuccess {
		t.Fatalf("version 1: %s %s", d.State, d.Error)
	}
	rolledOut("billing")
	stable := get("billing")
	if image(stable) != "registry.invalid/billing:1.0.0" || *stable.Spec.Replicas != 3 {
		t.Fatalf("stable after version 1: %s × %d", image(stable), *stable.Spec.Replicas)
	}

	// Version 2, percentages [34, 100]. Wave 1: the canary, stable untouched.
	id2 := submit("2.0.0", "percentages")
	waitStep(id2, "health-gate[34%]", manent.StepRunning)
	canary := get("billing" + kubernetes.CanarySuffix)
	if *canary.Spec.Replicas != 2 || image(canary) != "registry.invalid/billing:2.0.0" {
		t.Errorf("canary: %s × %d, want registry.invalid/billing:2.0.0 × 2", image(canary), *canary.Spec.Replicas)
	}
	for _, l := range []map[string]string{canary.Labels, canary.Spec.Template.Labels, canary.Spec.Selector.MatchLabels} {
		if l[kubernetes.LabelTrack] != kubernetes.TrackCanary {
			t.Errorf("canary labels %v: want %s=%s on the object, its pods and its selector", l, kubernetes.LabelTrack, kubernetes.TrackCanary)
		}
	}
	if canary.Spec.Template.Labels["manent.io/deploy-id"] != id2 || canary.Spec.Template.Labels["app"] != "billing" {
		t.Errorf("canary pod labels %v: want the deploy's id (the agent attributes its pods to it) and the app's labels", canary.Spec.Template.Labels)
	}
	if s := get("billing"); s.Generation != stable.Generation || image(s) != "registry.invalid/billing:1.0.0" || *s.Spec.Replicas != 3 ||
		s.Labels["manent.io/deploy-id"] != id1 {
		t.Fatalf("stable during wave 1: generation %d (was %d), %s × %d, deploy %s: want it untouched",
			s.Generation, stable.Generation, image(s), *s.Spec.Replicas, s.Labels["manent.io/deploy-id"])
	}
	d2, err := client.Deployment(ctx, id2)
	must(err)
	if len(d2.Rollout) != 2 || d2.Rollout[0].Percent != 34 || d2.Rollout[0].State != "deploying" || d2.Rollout[1].State != "pending" {
		t.Errorf("rollout during the gate of wave 1: %+v", d2.Rollout)
	}
	// The agent reports the canary ready: the gate passes, wave 2 runs.
	rolledOut("billing" + kubernetes.CanarySuffix)
	enginetest.Eventually(t, 90*time.Second, func() bool { return get("billing").Generation > stable.Generation }, "wave 2 to update stable")
	rolledOut("billing")
	d2 = wait(id2)
	if d2.State != manent.StateSuccess {
		t.Fatalf("version 2: %s %s", d2.State, d2.Error)
	}
	stable = get("billing")
	if image(stable) != "registry.invalid/billing:2.0.0" || *stable.Spec.Replicas != 3 || stable.Labels["manent.io/deploy-id"] != id2 {
		t.Errorf("stable after wave 2: %s × %d, deploy %s", image(stable), *stable.Spec.Replicas, stable.Labels["manent.io/deploy-id"])
	}
	if _, err := kube.AppsV1().Deployments(ns).Get(ctx, "billing"+kubernetes.CanarySuffix, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("canary after wave 2: %v, want it removed", err)
	}
	var got []string
	for _, w := range d2.Rollout {
		got = append(got, fmt.Sprintf("%s:%s:%s", w.Name, w.State, w.Gate))
	}
	if strings.Join(got, " ") != "34%:healthy:passed 100%:healthy:passed" {
		t.Errorf("rollout of version 2: %v", got)
	}

	// Version 3: a canary pod cannot pull its image; the gate of wave 1
	// fails and the rollback removes the canary, stable stays version 2.
	id3 := submit("3.0.0", "percentages")
	waitStep(id3, "health-gate[34%]", manent.StepRunning)
	canary = get("billing" + kubernetes.CanarySuffix)
	const podName = "billing-canary-7f9c-pull"
	_, err = kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName, Labels: canary.Spec.Template.Labels, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "billing-canary-7f9c", UID: "e2e-rs-uid", Controller: new(true)}}},
		Spec: canary.Spec.Template.Spec,
	}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().Pods(ns).Patch(ctx, podName, types.StrategicMergePatchType, []byte(
		`{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}],`+
			`"containerStatuses":[{"name":"app","image":"registry.invalid/billing:3.0.0","imageID":"","ready":false,"restartCount":0,`+
			`"state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image"}}}]}}`),
		metav1.PatchOptions{}, "status")
	must(err)
	d3 := wait(id3)
	if d3.State != manent.StateError || d3.Rollback != manent.RollbackCompleted || !strings.Contains(d3.Error, `step "health-gate[34%]" failed`) ||
		!strings.Contains(d3.Error, ns+"/"+podName) || !strings.Contains(d3.Error, "ImagePullBackOff") {
		t.Fatalf("version 3: %s, rollback %q, error %q; want ERROR at health-gate[34%%] naming the pod, rolled back", d3.State, d3.Rollback, d3.Error)
	}
	if st := stepState(d3, "rollback:deploy[34%]"); st != manent.StepSuccess {
		t.Errorf("rollback:deploy[34%%] = %s", st)
	}
	if st := stepState(d3, "deploy[100%]"); st != manent.StepSkipped && st != manent.StepPending {
		t.Errorf("deploy[100%%] = %s, want it never run", st)
	}
	if _, err := kube.AppsV1().Deployments(ns).Get(ctx, "billing"+kubernetes.CanarySuffix, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("canary after the rollback: %v, want it removed", err)
	}
	if s := get("billing"); s.Generation != stable.Generation || image(s) != "registry.invalid/billing:2.0.0" || s.Labels["manent.io/deploy-id"] != id2 {
		t.Errorf("stable after the rollback: generation %d (was %d), %s, deploy %s: want version 2 untouched",
			s.Generation, stable.Generation, image(s), s.Labels["manent.io/deploy-id"])
	}
	got = nil
	for _, w := range d3.Rollout {
		got = append(got, fmt.Sprintf("%s:%s:%s", w.Name, w.State, w.Gate))
	}
	if strings.Join(got, " ") != "34%:rolled-back:failed 100%:pending:" || !strings.Contains(d3.Rollout[0].Message, podName) {
		t.Errorf("rollout of version 3: %v (%q)", got, d3.Rollout[0].Message)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}
