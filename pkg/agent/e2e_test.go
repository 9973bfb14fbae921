package agent_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/manent-io/manent/pkg/agent"
	"github.com/manent-io/manent/pkg/agentcmd"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/kubetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/clusterready"
	"github.com/manent-io/manent/plugins/local"
)

// tail is the end of a log, at most 4000 bytes.
func tail(b []byte) string {
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// manentServer is a real manent server with the cluster-ready step plugin.
func manentServer(t *testing.T, token string) (*api.Client, string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := servertest.Config(dir)
	cfg.Database, cfg.ExecutorID = enginetest.SQLite(t), "e2e"
	n, err := node.Open(ctx, cfg, node.Options{
		BootstrapToken: token,
		Plugins: func(reg *plugin.Registry, host node.Host) error {
			return errors.Join(reg.RegisterTarget("local", local.New(local.Options{})),
				reg.RegisterRunner("cluster-ready", clusterready.New(host.Store).WithPollInterval(50*time.Millisecond)))
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
	return api.NewClient(hs.URL, token, nil), dir
}

// TestE2ERealAPIServer runs the agent against a real kube-apiserver (built
// by scripts/k8s-test-env.sh): a Deployment and its Pods labelled for a
// real submitted deploy, one pod patched to ImagePullBackOff. The server's
// cluster status shows them, the deploy's cluster-ready step fails naming
// the pod, a deleted pod disappears after one cycle, and the agent — run as
// `manent agent` — exits 0 when stopped.
func TestE2ERealAPIServer(t *testing.T) {
	kubeAPI := kubetest.Start(t, kubetest.BinDir(t))
	kube := kubeClient(t, kubeAPI, kubeAPI.Token)
	// The shipped manifests, applied as an operator would; the agent then
	// reads the cluster with its ServiceAccount's token, so the API server
	// (RBAC mode) checks that the ClusterRole's read-only rules suffice.
	kubeconfig := kubeAPI.Kubeconfig(t, applyAgentManifests(t, kube, "../../deploy/agent"))

	const token = "e2e-manent-token"
	client, dir := manentServer(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// A real deploy that waits on the cluster.
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	desc, _ := json.Marshal(map[string]any{
		"apiVersion": "manent/v1", "application": "billing", "environment": "prod", "version": "1.2.0",
		"artifact": map[string]any{"url": "file://" + art},
		"steps": []any{map[string]any{"name": "cluster", "before": "activation", "plugin": "cluster-ready", "max_retries": 0,
			"with": map[string]any{"cluster": "e2e", "timeout": "3m"}}},
	})
	sub, err := client.Submit(ctx, desc, false)
	if err != nil {
		t.Fatal(err)
	}
	id := sub.ID

	// The objects the kubernetes plugin would have applied, in a namespace of their own.
	ns := fmt.Sprintf("e2e-%d", time.Now().UnixNano()%1_000_000)
	lbl := map[string]string{clusterstate.LabelDeployID: id, clusterstate.LabelApplication: "billing",
		clusterstate.LabelEnvironment: "prod", clusterstate.LabelVersion: "1.2.0", "app": "billing"}
	image := "registry.invalid/billing:1.2.0"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	must(err)
	replicas := int32(2)
	_, err = kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "billing", Labels: lbl},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "billing"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}},
	}, metav1.CreateOptions{})
	must(err)
	// Nothing runs the Deployment controller: write its status as it would.
	_, err = kube.AppsV1().Deployments(ns).Patch(ctx, "billing", types.MergePatchType, []byte(
		`{"status":{"observedGeneration":1,"replicas":2,"updatedReplicas":2,"readyReplicas":1,"availableReplicas":1,"unavailableReplicas":1,`+
			`"conditions":[{"type":"Progressing","status":"True","reason":"ReplicaSetUpdated"},{"type":"Available","status":"False","reason":"MinimumReplicasUnavailable"}]}}`),
		metav1.PatchOptions{}, "status")
	must(err)
	owner := []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "billing-7d9f", UID: "e2e-rs-uid", Controller: ptr(true)}}
	pods := map[string]string{ // pod -> status patch
		"billing-7d9f-pull": `{"status":{"phase":"Pending","conditions":[{"type":"Ready","status":"False"}],` +
			`"containerStatuses":[{"name":"app","image":"` + image + `","imageID":"","ready":false,"restartCount":0,` +
			`"state":{"waiting":{"reason":"ImagePullBackOff","message":"Back-off pulling image \"` + image + `\""}}}]}}`,
		"billing-7d9f-ok": `{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}],` +
			`"containerStatuses":[{"name":"app","image":"` + image + `","imageID":"x","ready":true,"restartCount":0,` +
			`"state":{"running":{"startedAt":"2026-12-02T12:00:00Z"}}}]}}`,
	}
	for name, patch := range pods {
		_, err = kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl, OwnerReferences: owner},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
		}, metav1.CreateOptions{})
		must(err)
		_, err = kube.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
		must(err)
	}
	// An object without manent's labels is not reported.
	_, err = kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unrelated"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}, metav1.CreateOptions{})
	must(err)

	// Run the agent as manent-agent (`manent agent` runs it), in-process.
	agentCtx, stopAgent := context.WithCancel(ctx)
	var agentErr bytes.Buffer
	var mu sync.Mutex
	exited, finished := make(chan int, 1), make(chan struct{})
	t.Cleanup(func() { // also on a failed test: the agent stops before the servers
		stopAgent()
		select {
		case <-finished:
		case <-time.After(30 * time.Second):
		}
	})
	go func() {
		defer close(finished)
		code := cli.SiblingRun(agentCtx, cli.Invocation{
			Args: []string{"--server", client.Server(), "--token", token, "--cluster", "e2e",
				"--kubeconfig", kubeconfig, "--interval", "1s", "--log-level", "debug"},
			Stderr: lockedWriter{&mu, &agentErr},
		}, agentcmd.NewCmd)
		exited <- code
	}()
	agentLog := func() string { mu.Lock(); defer mu.Unlock(); return agentErr.String() }
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("manent agent log:\n%s", tail([]byte(agentLog())))
		}
	})

	var status *clusterstate.Status
	enginetest.Eventually(t, 60*time.Second, func() bool {
		st, err := client.ClusterStatus(ctx, "e2e")
		if err != nil {
			return false
		}
		status = st
		return len(st.Pods) == 2 && len(st.Workloads) == 1
	}, "the cluster's status to show 2 pods and 1 workload")
	w := status.Workloads[0]
	if w.Kind != "Deployment" || w.Namespace != ns || w.DeployID != id || w.Version != "1.2.0" ||
		w.Replicas.Desired != 2 || w.Replicas.Ready != 1 || w.Declared == nil || w.Declared.Version != "1.2.0" {
		t.Errorf("workload = %+v", w)
	}
	if w.State != clusterstate.StateFailed || len(w.FailingPods) != 1 || w.FailingPods[0] != ns+"/billing-7d9f-pull" {
		t.Errorf("workload state %s (%s), failing pods %v; want FAILED naming %s/billing-7d9f-pull", w.State, w.Reason, w.FailingPods, ns)
	}
	for _, p := range status.Pods {
		if p.Name == "billing-7d9f-pull" && (p.Phase != "Pending" || p.Containers[0].WaitingReason != "ImagePullBackOff") {
			t.Errorf("pod = %+v", p)
		}
		if p.Name == "billing-7d9f-ok" && (!p.Ready || p.Phase != "Running") {
			t.Errorf("pod = %+v", p)
		}
	}

	// The deploy's cluster-ready step fails, naming the pod.
	d, err := client.Wait(ctx, id, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if d.State != manent.StateError {
		t.Fatalf("deploy ended %s, want ERROR", d.State)
	}
	var step manent.Step
	for _, s := range d.Steps {
		if s.Name == "cluster" {
			step = s
		}
	}
	if step.State != manent.StepError || !strings.Contains(step.Error, ns+"/billing-7d9f-pull") || !strings.Contains(step.Error, "ImagePullBackOff") {
		t.Errorf("cluster step = %s %q, want ERROR naming %s/billing-7d9f-pull", step.State, step.Error, ns)
	}
	if strings.Contains(step.Error, "billing-7d9f-ok") {
		t.Errorf("the healthy pod is named: %q", step.Error)
	}

	// A deleted pod is gone after one cycle.
	must(kube.CoreV1().Pods(ns).Delete(ctx, "billing-7d9f-ok", metav1.DeleteOptions{GracePeriodSeconds: ptr(int64(0))}))
	enginetest.Eventually(t, 30*time.Second, func() bool {
		st, err := client.ClusterStatus(ctx, "e2e")
		return err == nil && len(st.Pods) == 1 && st.Pods[0].Name == "billing-7d9f-pull"
	}, "the deleted pod to disappear")

	stopAgent()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("manent agent exited %d after being stopped, want 0; log:\n%s", code, agentLog())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("manent agent did not stop")
	}
}

// applyAgentManifests creates the objects of deploy/agent (every file but
// the Secret example) and returns a token of the manent-agent ServiceAccount.
func applyAgentManifests(t *testing.T, kube kubernetes.Interface, dir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var created []string
	for _, file := range []string{"namespace.yaml", "rbac.yaml", "deployment.yaml"} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for range 100 {
			var raw runtime.RawExtension
			if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(bytes.TrimSpace(raw.Raw)) == 0 {
				continue
			}
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw.Raw, nil, nil)
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			switch o := obj.(type) {
			case *corev1.Namespace:
				_, err = kube.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
			case *corev1.ServiceAccount:
				_, err = kube.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = kube.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			case *appsv1.Deployment:
				_, err = kube.AppsV1().Deployments(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			default:
				t.Fatalf("%s: unexpected %T", file, obj)
			}
			if err != nil {
				t.Fatalf("%s: create %T: %v", file, obj, err)
			}
			created = append(created, fmt.Sprintf("%T", obj))
		}
	}
	if len(created) != 5 {
		t.Fatalf("created %v from %s, want a namespace, a service account, a cluster role, its binding and a deployment", created, dir)
	}
	tr, err := kube.CoreV1().ServiceAccounts("manent-system").CreateToken(ctx, "manent-agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of manent-agent: %v", err)
	}
	return tr.Status.Token
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

// TestE2EOddObjectsDoNotBlindTheCluster: a tenant of one namespace creates
// pods the API server accepts but no one would write — a 1 MB image name,
// hundreds of containers. Pods with a 1 MB image no longer push the
// snapshot over the server's 16 MiB (the agent cuts every text as the
// server would keep it), so the cluster keeps reporting; when what remains
// is still too large, the agent sends nothing and says which namespace
// holds the bulk, instead of the server's bare 413 every cycle.
func TestE2EOddObjectsDoNotBlindTheCluster(t *testing.T) {
	kubeAPI := kubetest.Start(t, kubetest.BinDir(t))
	kube := kubeClient(t, kubeAPI, kubeAPI.Token)
	const token = "e2e-manent-token"
	client, _ := manentServer(t, token)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	lbl := labels("dpl_x", "1.0")
	pod := func(ns, name string, containers int, image string) {
		t.Helper()
		spec := corev1.PodSpec{}
		for i := range containers {
			spec.Containers = append(spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: image})
		}
		_, err := kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}, Spec: spec}, metav1.CreateOptions{})
		must(err)
	}
	for _, ns := range []string{"shop", "tenant", "crowd"} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		must(err)
		_, err = kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		must(err)
	}
	pod("shop", "billing-1", 1, "registry.example/billing:1.0")
	huge := "registry.example/" + strings.Repeat("a", 1_000_000) + ":1"
	for i := range 17 { // 17 MB of images: over 16 MiB as read
		pod("tenant", fmt.Sprintf("fat-%d", i), 1, huge)
	}
	// Reading tens of MB of pods under -race on a loaded machine can take
	// longer than the 10 s a cycle gets by default: the budget is not what
	// this test is about.
	a, err := agent.New(agent.Config{Cluster: "odd", Kube: kube, Server: client, Interval: 2 * time.Minute})
	must(err)
	if err := a.Once(ctx); err != nil {
		t.Fatalf("one namespace's odd pods stopped the cluster's report: %v", err)
	}
	st, err := client.ClusterStatus(ctx, "odd")
	must(err)
	if len(st.Pods) != 18 {
		t.Fatalf("the server holds %d pods, want 18", len(st.Pods))
	}
	for _, p := range st.Pods {
		if n := len(p.Containers[0].Image); n > 4100 {
			t.Errorf("pod %s/%s: image of %d bytes reported, want it cut to 4 KiB", p.Namespace, p.Name, n)
		}
	}

	// Still too large once cut: 14 pods of 300 containers with 4 KiB images.
	long := "registry.example/" + strings.Repeat("b", 4200) + ":1"
	for i := range 14 {
		pod("crowd", fmt.Sprintf("crowded-%d", i), 300, long)
	}
	err = a.Once(ctx)
	if err == nil {
		t.Fatal("a snapshot over 16 MiB was reported")
	}
	for _, want := range []string{"over the server's limit", "crowd (14 pods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	st2, err := client.ClusterStatus(ctx, "odd")
	must(err)
	if !st2.LastReportAt.Equal(st.LastReportAt) {
		t.Errorf("the server's state changed (%s, was %s): the agent must not post what it knows will be refused", st2.LastReportAt, st.LastReportAt)
	}
}

// TestE2EForbiddenSaysWhatToGrant: an agent whose Kubernetes identity lacks
// a permission (here: daemonsets, or any namespace but its own) fails every
// cycle; its error says what to grant, not only the API server's refusal.
func TestE2EForbiddenSaysWhatToGrant(t *testing.T) {
	kubeAPI := kubetest.Start(t, kubetest.BinDir(t))
	kube := kubeClient(t, kubeAPI, kubeAPI.Token)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.CoreV1().ServiceAccounts("shop").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.RbacV1().Roles("shop").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "agent"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: []string{"get", "list"}},
	}}, metav1.CreateOptions{})
	must(err)
	_, err = kube.RbacV1().RoleBindings("shop").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "agent"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "agent", Namespace: "shop"}}}, metav1.CreateOptions{})
	must(err)
	tr, err := kube.CoreV1().ServiceAccounts("shop").CreateToken(ctx, "agent",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	must(err)
	lkube := kubeClient(t, kubeAPI, tr.Status.Token)

	for _, tc := range []struct {
		namespace string
		want      []string
	}{
		{"", []string{"may not list pods in all namespaces", "get and list on pods, deployments, statefulsets and daemonsets", "deploy/agent/rbac.yaml", "--namespace"}},
		{"shop", []string{"may not list daemonsets in namespace shop", "get and list on pods, deployments, statefulsets and daemonsets", "a Role in namespace shop"}},
	} {
		rec := &recorder{}
		a, err := agent.New(agent.Config{Cluster: "c1", Namespace: tc.namespace, Kube: lkube, Server: rec})
		must(err)
		err = a.Once(ctx)
		if err == nil {
			t.Fatalf("namespace %q: the cycle succeeded without the permissions", tc.namespace)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("namespace %q: error %q does not say %q", tc.namespace, err, want)
			}
		}
		if calls, _, _ := rec.state(); calls != 0 {
			t.Errorf("namespace %q: a partial snapshot was posted", tc.namespace)
		}
	}
}

// kubeClient is a client of kubeAPI that presents token, built as the
// agent builds its own from a kubeconfig.
func kubeClient(t *testing.T, kubeAPI *kubetest.APIServer, token string) kubernetes.Interface {
	t.Helper()
	rc, err := agent.KubeConfig(kubeAPI.Kubeconfig(t, token), func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return kube
}

// TestE2EUnauthorizedSaysWhichCredentials: an agent whose kubeconfig holds a
// token the API server does not know fails every cycle, posts nothing, and
// its error says that the credentials are refused and where they come from,
// not only the API server's bare "Unauthorized".
func TestE2EUnauthorizedSaysWhichCredentials(t *testing.T) {
	kubeAPI := kubetest.Start(t, kubetest.BinDir(t))
	kube := kubeClient(t, kubeAPI, "not-a-token-the-api-server-knows")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := &recorder{}
	a, err := agent.New(agent.Config{Cluster: "c1", Kube: kube, Server: rec})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Once(ctx)
	if err == nil {
		t.Fatal("the cycle succeeded with a token the API server does not know")
	}
	for _, want := range []string{"does not accept the agent's credentials (401)", "token or client certificate", "ServiceAccount token", "--kubeconfig", "list pods"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if calls, _, _ := rec.state(); calls != 0 {
		t.Error("a snapshot was posted")
	}
}
