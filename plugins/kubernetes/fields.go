package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A rollback re-applies a checkpointed object. Applying all of it, forced,
// would take back the replica count someone else set since the deploy —
// an autoscaler, kubectl scale or edit during an incident: scaled down in
// the middle of it — and make manent the field's only manager, so that the
// next deploy whose manifests leave replicas out would reset them to 1.
// The rollback leaves spec.replicas out of what it applies when another
// manager alone owns it now (server-side apply's managedFields), or no
// manager does and it was not manent's when the checkpoint was taken
// either — an autoscaled Deployment whose manifests leave replicas out:
// the scale subresource records no manager for a field no one owned —
// and says so when it differs from the checkpoint. Every other field goes back to
// the checkpoint, hand-made changes included: a rollback puts the previous
// release back, and the inventory names that release as what runs.

// foreignField is a field of the checkpoint a rollback leaves as it is.
type foreignField struct {
	// Path is the field's path, "spec.replicas".
	Path string
	// Manager is the field manager that owns it now.
	Manager string
	// Was and Now are the checkpoint's value and the current one (JSON).
	Was, Now string
}

func (f foreignField) String() string {
	if f.Manager == "" {
		return fmt.Sprintf("%s (set outside manent, by no field manager the cluster names — the scale subresource, an autoscaler, a default: %s now, %s in the checkpoint)", f.Path, clip(f.Now), clip(f.Was))
	}
	return fmt.Sprintf("%s (set by %s: %s now, %s in the checkpoint)", f.Path, f.Manager, clip(f.Now), clip(f.Was))
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// withoutForeignFields returns the checkpointed object obj without its
// replica count when managers other than FieldManager alone own it in cur
// (the object as it is now), or none does and setOutside (it was not
// manent's at the checkpoint either), and it when its value differs from
// obj's.
func withoutForeignFields(obj map[string]any, cur *unstructured.Unstructured, setOutside bool) (map[string]any, []foreignField) {
	manager := ""
	for _, mf := range cur.GetManagedFields() {
		if !ownsReplicas(mf) {
			continue
		}
		if mf.Manager == FieldManager {
			return obj, nil // manent's, alone or shared: it goes back
		}
		if manager == "" {
			manager = mf.Manager
		}
	}
	spec, _ := obj["spec"].(map[string]any)
	was, has := spec["replicas"]
	if (manager == "" && !setOutside) || !has {
		return obj, nil
	}
	out := (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
	outSpec := out["spec"].(map[string]any)
	delete(outSpec, "replicas")
	if len(outSpec) == 0 {
		delete(out, "spec") // applied without it rather than empty
	}
	var kept []foreignField
	now, nowHas, _ := unstructured.NestedFieldNoCopy(cur.Object, "spec", "replicas")
	if !nowHas || !sameJSON(was, now) {
		w, _ := json.Marshal(was)
		n := []byte("absent")
		if nowHas {
			n, _ = json.Marshal(now)
		}
		kept = append(kept, foreignField{Path: "spec.replicas", Manager: manager, Was: string(w), Now: string(n)})
	}
	return out, kept
}

// replicasOwnedBy says whether manager owns spec.replicas in u.
func replicasOwnedBy(u *unstructured.Unstructured, manager string) bool {
	for _, mf := range u.GetManagedFields() {
		if mf.Manager == manager && ownsReplicas(mf) {
			return true
		}
	}
	return false
}

// ownsReplicas says whether the managedFields entry mf owns spec.replicas.
func ownsReplicas(mf metav1.ManagedFieldsEntry) bool {
	if mf.FieldsV1 == nil {
		return false
	}
	var tree struct {
		Spec map[string]json.RawMessage `json:"f:spec"`
	}
	if json.Unmarshal(mf.FieldsV1.Raw, &tree) != nil {
		return false
	}
	_, ok := tree.Spec["f:replicas"]
	return ok
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
