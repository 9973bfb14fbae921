package agent

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"github.com/manent-io/manent/pkg/clusterstate"
)

// pageSize is how many objects one List call asks for; pageLimit bounds
// the pages of one kind in one cycle (pageSize × pageLimit ≥ MaxObjects).
const (
	pageSize  = 500
	pageLimit = clusterstate.MaxObjects/pageSize + 1
)

// messageLimit shortens container messages in the snapshot.
const messageLimit = 256

// Collect reads, read-only, every pod and workload labelled
// manent.io/deploy-id in namespace ("" for all) and returns the snapshot,
// sorted by namespace and name, its texts cut as the server keeps them
// (clusterstate.Bound). Each workload's kstatus is computed on the object
// as the API returned it.
func Collect(ctx context.Context, kube kubernetes.Interface, namespace, cluster string, now time.Time) (*clusterstate.Snapshot, error) {
	snap := &clusterstate.Snapshot{Cluster: cluster, Time: now.UTC(), Pods: []clusterstate.Pod{}, Workloads: []clusterstate.Workload{}}
	opts := metav1.ListOptions{LabelSelector: clusterstate.LabelDeployID, Limit: pageSize}

	err := paginate(ctx, opts, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := kube.CoreV1().Pods(namespace).List(ctx, o)
		if err != nil {
			return "", listError("pods", namespace, err)
		}
		for i := range l.Items {
			if l.Items[i].Labels[clusterstate.LabelDeployID] != "" {
				snap.Pods = append(snap.Pods, podOf(&l.Items[i]))
			}
		}
		return l.Continue, nil
	})
	if err != nil {
		return nil, err
	}
	apps := kube.AppsV1()
	err = addWorkloads(ctx, opts, snap, "deployments", namespace, apps.Deployments(namespace).List,
		func(l *appsv1.DeploymentList) []appsv1.Deployment { return l.Items },
		func(d *appsv1.Deployment) (clusterstate.Workload, error) {
			return workloadOf(d, clusterstate.KindDeployment, d.ObjectMeta, d.Spec.Template.Spec, clusterstate.Replicas{
				Desired: desiredReplicas(d.Spec.Replicas), Ready: d.Status.ReadyReplicas, Updated: d.Status.UpdatedReplicas, Available: d.Status.AvailableReplicas,
			})
		})
	if err != nil {
		return nil, err
	}
	err = addWorkloads(ctx, opts, snap, "statefulsets", namespace, apps.StatefulSets(namespace).List,
		func(l *appsv1.StatefulSetList) []appsv1.StatefulSet { return l.Items },
		func(s *appsv1.StatefulSet) (clusterstate.Workload, error) {
			return workloadOf(s, clusterstate.KindStatefulSet, s.ObjectMeta, s.Spec.Template.Spec, clusterstate.Replicas{
				Desired: desiredReplicas(s.Spec.Replicas), Ready: s.Status.ReadyReplicas, Updated: s.Status.UpdatedReplicas, Available: s.Status.AvailableReplicas,
			})
		})
	if err != nil {
		return nil, err
	}
	err = addWorkloads(ctx, opts, snap, "daemonsets", namespace, apps.DaemonSets(namespace).List,
		func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items },
		func(d *appsv1.DaemonSet) (clusterstate.Workload, error) {
			return workloadOf(d, clusterstate.KindDaemonSet, d.ObjectMeta, d.Spec.Template.Spec, clusterstate.Replicas{
				Desired: d.Status.DesiredNumberScheduled, Ready: d.Status.NumberReady,
				Updated: d.Status.UpdatedNumberScheduled, Available: d.Status.NumberAvailable,
			})
		})
	if err != nil {
		return nil, err
	}
	sort.Slice(snap.Pods, func(i, j int) bool { return snap.Pods[i].Key() < snap.Pods[j].Key() })
	sort.Slice(snap.Workloads, func(i, j int) bool { return snap.Workloads[i].Key() < snap.Workloads[j].Key() })
	// The server keeps no more of each text than this: cut here, one pod
	// with a 1 MB image name must not push the snapshot over its limit.
	clusterstate.Bound(snap)
	return snap, nil
}

// listError says which list failed; when the API server forbids it, also
// what to grant: the agent's identity lacking a permission is a setup
// mistake the API server's words do not explain.
//
// A refusal of the credentials themselves (401) says the same: the API
// server's own word is a bare "Unauthorized".
func listError(resource, namespace string, err error) error {
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("the Kubernetes API server does not accept the agent's credentials (401): the kubeconfig's token or client certificate "+
			"is wrong, expired or revoked (in a pod: its ServiceAccount token; with --kubeconfig: that file's user) — list %s: %w", resource, err)
	}
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("list %s: %w", resource, err)
	}
	where, fix := "in all namespaces", "the ClusterRole of deploy/agent/rbac.yaml bound to it, or run the agent with --namespace NS and a Role in NS"
	if namespace != "" {
		where = "in namespace " + namespace
		fix = "a Role in namespace " + namespace + " bound to it, or the ClusterRole of deploy/agent/rbac.yaml"
	}
	return fmt.Errorf("the agent's Kubernetes identity may not list %s %s: grant it get and list on pods, deployments, statefulsets and daemonsets (%s): %w",
		resource, where, fix, err)
}

// addWorkloads pages through one resource's workloads in namespace (list,
// and items of each page) and adds to snap the entry of each one labelled
// with a deploy id.
func addWorkloads[L metav1.ListInterface, T any](ctx context.Context, opts metav1.ListOptions, snap *clusterstate.Snapshot, resource, namespace string,
	list func(context.Context, metav1.ListOptions) (L, error), items func(L) []T, entry func(*T) (clusterstate.Workload, error)) error {
	return paginate(ctx, opts, func(ctx context.Context, o metav1.ListOptions) (string, error) {
		l, err := list(ctx, o)
		if err != nil {
			return "", listError(resource, namespace, err)
		}
		objs := items(l)
		for i := range objs {
			w, err := entry(&objs[i])
			if err != nil {
				return "", err
			}
			if w.DeployID != "" {
				snap.Workloads = append(snap.Workloads, w)
			}
		}
		return l.GetContinue(), nil
	})
}

// desiredReplicas is a workload's spec.replicas, 1 when unset (the API
// server's default).
func desiredReplicas(n *int32) int32 {
	if n == nil {
		return 1
	}
	return *n
}

// paginate calls list with continue tokens until the last page, at most
// pageLimit pages.
func paginate(ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) (string, error)) error {
	for range pageLimit {
		next, err := list(ctx, opts)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		opts.Continue = next
	}
	return fmt.Errorf("more than %d objects of one kind: the snapshot would be refused", pageLimit*pageSize)
}

func podOf(p *corev1.Pod) clusterstate.Pod {
	out := clusterstate.Pod{
		Namespace: p.Namespace, Name: p.Name,
		DeployID:    p.Labels[clusterstate.LabelDeployID],
		Application: p.Labels[clusterstate.LabelApplication],
		Environment: p.Labels[clusterstate.LabelEnvironment],
		Phase:       string(p.Status.Phase),
		Containers:  []clusterstate.Container{},
	}
	if ref := metav1.GetControllerOf(p); ref != nil {
		out.Owner = ref.Kind + "/" + ref.Name
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Ready = c.Status == corev1.ConditionTrue
		}
	}
	images := map[string]string{}
	for _, c := range p.Spec.InitContainers {
		images["init/"+c.Name] = c.Image
	}
	for _, c := range p.Spec.Containers {
		images[c.Name] = c.Image
	}
	add := func(statuses []corev1.ContainerStatus, init bool, specs []corev1.Container) {
		seen := map[string]bool{}
		for _, cs := range statuses {
			seen[cs.Name] = true
			c := clusterstate.Container{Name: cs.Name, Image: cs.Image, Init: init, Ready: cs.Ready, Restarts: cs.RestartCount}
			if c.Image == "" {
				c.Image = images[initKey(init, cs.Name)]
			}
			switch {
			case cs.State.Waiting != nil:
				c.WaitingReason = cs.State.Waiting.Reason
				c.Message = shorten(cs.State.Waiting.Message)
			case cs.State.Terminated != nil:
				c.TerminatedReason = cs.State.Terminated.Reason
				c.Message = shorten(cs.State.Terminated.Message)
			}
			out.Restarts += cs.RestartCount
			out.Containers = append(out.Containers, c)
		}
		// Containers without a status yet (an unscheduled pod) are shown too.
		for _, c := range specs {
			if !seen[c.Name] {
				out.Containers = append(out.Containers, clusterstate.Container{Name: c.Name, Image: c.Image, Init: init})
			}
		}
	}
	add(p.Status.InitContainerStatuses, true, p.Spec.InitContainers)
	add(p.Status.ContainerStatuses, false, p.Spec.Containers)
	return out
}

func initKey(init bool, name string) string {
	if init {
		return "init/" + name
	}
	return name
}

func shorten(s string) string {
	if len(s) <= messageLimit {
		return s
	}
	return s[:messageLimit-3] + "..."
}

// workloadOf builds the snapshot entry of a workload and computes its
// kstatus. The typed clientset leaves apiVersion and kind empty, and
// kstatus needs them (without, it reads every object as a generic one), so
// they are set on the unstructured copy.
func workloadOf(obj runtime.Object, kind string, meta metav1.ObjectMeta, tmpl corev1.PodSpec, r clusterstate.Replicas) (clusterstate.Workload, error) {
	w := clusterstate.Workload{
		Kind: kind, Namespace: meta.Namespace, Name: meta.Name,
		DeployID:    meta.Labels[clusterstate.LabelDeployID],
		Application: meta.Labels[clusterstate.LabelApplication],
		Environment: meta.Labels[clusterstate.LabelEnvironment],
		Version:     meta.Labels[clusterstate.LabelVersion],
		Images:      []string{},
		Replicas:    r,
	}
	for _, c := range tmpl.Containers {
		w.Images = append(w.Images, c.Image)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return w, fmt.Errorf("convert %s %s/%s: %w", kind, meta.Namespace, meta.Name, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(appsv1.SchemeGroupVersion.String())
	u.SetKind(kind)
	res, err := status.Compute(u)
	if err != nil {
		w.KStatus, w.KStatusMessage = clusterstate.KStatusUnknown, shorten(err.Error())
		return w, nil
	}
	w.KStatus, w.KStatusMessage = string(res.Status), shorten(res.Message)
	return w, nil
}
