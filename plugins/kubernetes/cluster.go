package kubernetes

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	kubeclient "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manent-io/manent/pkg/plugin"
)

// FieldManager is the server-side apply field manager of every apply.
const FieldManager = "manent"

// Ref names one object in a cluster.
type Ref struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

func (r Ref) String() string {
	if r.Namespace == "" {
		return r.Kind + " " + r.Name
	}
	return r.Kind + " " + r.Namespace + "/" + r.Name
}

func refOf(u *unstructured.Unstructured) Ref {
	return Ref{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
}

// RESTConfig is the default way to reach a cluster: the kubeconfig file
// (its current context, or context when set); without a kubeconfig, the
// in-cluster configuration when running in a pod, else the usual
// kubeconfig rules ($KUBECONFIG, ~/.kube/config).
func RESTConfig(kubeconfig, context string) (*rest.Config, error) {
	if kubeconfig == "" && context == "" && os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config: %w", err)
		}
		return cfg, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	return cfg, nil
}

// cluster is a connection to one cluster for one action.
type cluster struct {
	name   string // for messages: the context, else the API server's host
	dyn    dynamic.Interface
	kube   kubeclient.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// connect builds the clients of one action. Discovery is cached for the
// action only: a CRD installed meanwhile is seen by the next action.
func (p *Plugin) connect(c config) (*cluster, error) {
	if err := p.checkKubeconfig(c); err != nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: %w", err))
	}
	cfg, err := p.restConfig(c.Kubeconfig, c.Context)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: %w", err))
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "manent"
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	if cfg.QPS == 0 {
		cfg.QPS, cfg.Burst = 20, 40
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: %w", err))
	}
	kube, err := kubeclient.NewForConfig(cfg)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: %w", err))
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("kubernetes: %w", err))
	}
	name := c.Context
	if name == "" {
		name = strings.TrimPrefix(strings.TrimPrefix(cfg.Host, "https://"), "http://")
	}
	return &cluster{name: name, dyn: dyn, kube: kube,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// requestTimeout bounds one API call.
const requestTimeout = 30 * time.Second

// resource finds the API resource of u, and sets u's namespace: ns when u
// is namespaced and names none, "" when u is cluster-scoped. A kind the
// cached discovery does not know is looked up again once; an error that is
// still a no-match (meta.IsNoMatchError) means the cluster lacks the kind.
func (cl *cluster) resource(u *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := cl.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		cl.mapper.Reset()
		m, err = cl.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, u.GetName(), err)
	}
	if m.Scope.Name() != meta.RESTScopeNameNamespace {
		u.SetNamespace("")
		return cl.dyn.Resource(m.Resource), nil
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(ns)
	}
	return cl.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
}

// resourceWaiting is resource that waits up to crdWait for a kind a
// CustomResourceDefinition applied just before provides.
func (cl *cluster) resourceWaiting(ctx context.Context, u *unstructured.Unstructured, ns string) (dynamic.ResourceInterface, error) {
	ri, err := cl.resource(u, ns)
	if !meta.IsNoMatchError(err) {
		return ri, err
	}
	ctx, cancel := context.WithTimeout(ctx, crdWait)
	defer cancel()
	tick := time.NewTicker(crdWait / 30)
	defer tick.Stop()
	for range 31 {
		select {
		case <-ctx.Done():
			return nil, err
		case <-tick.C:
		}
		if ri, err = cl.resource(u, ns); !meta.IsNoMatchError(err) {
			return ri, err
		}
	}
	return nil, err
}

// crdWait is how long a deploy waits for a kind its own CRD defines.
const crdWait = 15 * time.Second

// apply server-side applies u with manent's field manager, taking over
// conflicting fields.
func apply(ctx context.Context, ri dynamic.ResourceInterface, u *unstructured.Unstructured) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return plugin.Permanent(fmt.Errorf("encode %s: %w", refOf(u), err))
	}
	force := true
	_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, data, metav1.PatchOptions{FieldManager: FieldManager, Force: &force})
	if err != nil {
		return classify(fmt.Errorf("apply %s: %w", refOf(u), err))
	}
	return nil
}

// classify marks API errors that retrying cannot fix as permanent: an
// invalid object, a refusal, a missing permission.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case apierrors.IsInvalid(err), apierrors.IsBadRequest(err), apierrors.IsForbidden(err),
		apierrors.IsUnauthorized(err), apierrors.IsMethodNotSupported(err),
		apierrors.IsNotAcceptable(err), apierrors.IsUnsupportedMediaType(err),
		apierrors.IsRequestEntityTooLargeError(err):
		return plugin.Permanent(err)
	}
	return err
}
