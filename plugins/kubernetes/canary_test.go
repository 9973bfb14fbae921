package kubernetes

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manent-io/manent/pkg/plugin"
)

func TestCanaryReplicas(t *testing.T) {
	for _, tt := range []struct {
		percent       int
		replicas, got int64
	}{{34, 3, 2}, {10, 3, 1}, {50, 4, 2}, {1, 100, 1}, {99, 10, 10}, {10, 0, 0}, {33, 3, 1}} {
		if got := CanaryReplicas(tt.percent, tt.replicas); got != tt.got {
			t.Errorf("CanaryReplicas(%d, %d) = %d, want %d", tt.percent, tt.replicas, got, tt.got)
		}
	}
}

// A canary wave touches only the canary copies of the Deployments; the
// 100 % wave applies everything and removes the canaries; without
// percentages nothing changes.
func TestForWave(t *testing.T) {
	objs, err := render([]manifestFile{{Name: "app.yaml", Data: []byte(deploymentV1 + "---\n" + configMap + "---\n" + `apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
spec:
  selector: {matchLabels: {app: worker}}
  template:
    metadata: {labels: {app: worker}}
    spec: {containers: [{name: w, image: registry.invalid/worker:1}]}
`)}}, renderVars{DeployID: "dpl_1", Application: "billing", Environment: "prod", Version: "2.0.0"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := forWave(plugin.Context{Wave: "34%", WaveIndex: 1, Percent: 34}, objs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range w.apply {
		r, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
		sel, _, _ := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
		tl, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "labels")
		got = append(got, fmt.Sprintf("%s×%d sel=%v track=%s/%s id=%s", u.GetName(), r, sel[LabelTrack] == TrackCanary,
			u.GetLabels()[LabelTrack], tl[LabelTrack], tl["manent.io/deploy-id"]))
	}
	want := "[billing-canary×1 sel=true track=canary/canary id=dpl_1 worker-canary×1 sel=true track=canary/canary id=dpl_1]"
	if fmt.Sprint(got) != want || len(w.canaries) != 0 || fmt.Sprint(w.held) != "[ConfigMap billing-config]" {
		t.Errorf("34%% wave: apply %v, canaries %d, held %v;\nwant apply %s, held [ConfigMap billing-config]", got, len(w.canaries), w.held, want)
	}
	if objs[0].GetName() != "billing" && objs[1].GetName() != "billing" {
		t.Error("the canary changed the rendered objects")
	}

	w, err = forWave(plugin.Context{Wave: "100%", WaveIndex: 2, Percent: 100}, objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.apply) != 3 || len(w.canaries) != 2 || w.canaries[0].GetName() != "billing-canary" || w.canaries[1].GetName() != "worker-canary" {
		t.Errorf("100%% wave: apply %d objects, canaries %v", len(w.apply), w.canaries)
	}
	w, _ = forWave(plugin.Context{}, objs)
	if len(w.apply) != 3 || len(w.canaries) != 0 {
		t.Errorf("no rollout: apply %d, canaries %d", len(w.apply), len(w.canaries))
	}
}
