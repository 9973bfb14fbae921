package kubernetes

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/plugin"
)

// A percentage rollout (SPEC §11.6) runs a canary: beside each Deployment
// "<name>" a Deployment "<name>-canary" with the new version and
// ceil(percent × replicas / 100) replicas. Stable takes the new version
// only in the 100 % wave, which removes the canaries.
const (
	// CanarySuffix ends the name of a canary Deployment.
	CanarySuffix = "-canary"
	// LabelTrack marks a canary: on the Deployment, in its selector and on
	// its pods, so that its pods are its own and never the stable
	// Deployment's. The canary carries the deploy's manent.io/deploy-id, so
	// the agent attributes its pods to the deploy.
	LabelTrack = "manent.io/track"
	// TrackCanary is LabelTrack's value on a canary.
	TrackCanary = "canary"
)

// canaryWave reports whether pc is a percentage wave below 100 %.
func canaryWave(pc plugin.Context) bool { return pc.Percent > 0 && pc.Percent < 100 }

// CanaryReplicas is the size of a canary of percent of replicas:
// ceil(percent × replicas / 100).
func CanaryReplicas(percent int, replicas int64) int64 {
	return (int64(percent)*replicas + 99) / 100
}

func isDeployment(u *unstructured.Unstructured) bool {
	gvk := u.GroupVersionKind()
	return gvk.Group == "apps" && gvk.Kind == clusterstate.KindDeployment
}

// canaryOf returns the canary copy of Deployment u for percent.
func canaryOf(u *unstructured.Unstructured, percent int) (*unstructured.Unstructured, error) {
	c := u.DeepCopy()
	c.SetName(u.GetName() + CanarySuffix)
	replicas, found, err := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if err != nil {
		return nil, fmt.Errorf("Deployment %s: spec.replicas: %w", u.GetName(), err)
	}
	if !found {
		replicas = 1 // the Kubernetes default
	}
	if err := unstructured.SetNestedField(c.Object, CanaryReplicas(percent, replicas), "spec", "replicas"); err != nil {
		return nil, err
	}
	l := c.GetLabels()
	if l == nil {
		l = map[string]string{}
	}
	l[LabelTrack] = TrackCanary
	c.SetLabels(l)
	for _, path := range [][]string{{"spec", "selector", "matchLabels"}, {"spec", "template", "metadata", "labels"}} {
		m, _, err := unstructured.NestedStringMap(c.Object, path...)
		if err != nil {
			return nil, fmt.Errorf("Deployment %s: %s: %w", u.GetName(), strings.Join(path, "."), err)
		}
		if m == nil {
			m = map[string]string{}
		}
		m[LabelTrack] = TrackCanary
		if err := unstructured.SetNestedStringMap(c.Object, m, path...); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// waveObjects is what one action of a wave touches.
type waveObjects struct {
	// apply are the objects the wave applies (and waits for).
	apply []*unstructured.Unstructured
	// canaries are the canaries the 100 % wave removes.
	canaries []*unstructured.Unstructured
	// held are the objects a canary wave leaves for the 100 % wave.
	held []Ref
}

// forWave picks the objects of pc's wave among the rendered manifests: in a
// canary wave the canary copies of the Deployments only (every other
// object, and stable, changes in the 100 % wave); in the 100 % wave every
// object, and the canaries to remove; without percentages every object.
func forWave(pc plugin.Context, objs []*unstructured.Unstructured) (waveObjects, error) {
	var w waveObjects
	if !canaryWave(pc) {
		w.apply = objs
		if pc.Percent == 100 {
			for _, u := range objs {
				if isDeployment(u) {
					c := &unstructured.Unstructured{}
					c.SetAPIVersion(u.GetAPIVersion())
					c.SetKind(u.GetKind())
					c.SetNamespace(u.GetNamespace())
					c.SetName(u.GetName() + CanarySuffix)
					w.canaries = append(w.canaries, c)
				}
			}
		}
		return w, nil
	}
	for _, u := range objs {
		if !isDeployment(u) {
			w.held = append(w.held, refOf(u))
			continue
		}
		c, err := canaryOf(u, pc.Percent)
		if err != nil {
			return w, plugin.Permanent(err)
		}
		w.apply = append(w.apply, c)
	}
	return w, nil
}

// removeCanaries deletes the canaries manent made (LabelTrack=canary); an
// absent one is fine (idempotent).
func removeCanaries(ctx context.Context, cl *cluster, c config, canaries []*unstructured.Unstructured) ([]Ref, error) {
	removed := []Ref{}
	for _, u := range canaries {
		ri, err := cl.resource(u, c.Namespace)
		if err != nil {
			return removed, classify(fmt.Errorf("kubernetes: %w", err))
		}
		cur, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return removed, classify(fmt.Errorf("kubernetes: get %s: %w", refOf(u), err))
		}
		if cur.GetLabels()[LabelTrack] != TrackCanary {
			continue // not a canary manent made
		}
		bg := metav1.DeletePropagationBackground
		uid := cur.GetUID()
		err = ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{PropagationPolicy: &bg, Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return removed, classify(fmt.Errorf("kubernetes: delete %s: %w", refOf(u), err))
		}
		removed = append(removed, refOf(u))
	}
	return removed, nil
}
