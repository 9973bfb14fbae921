package kubernetes

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A rollback re-applies a checkpointed object. Applying all of it, forced,
// would take back the replica count someone else set since the deploy —
// an autoscaler, kubectl scale or edit during an incident: scaled down in
// the middle of it — and make manent the field's only manager, so that the
// next deploy whose manifests leave replicas out would reset them to 1.
// The rollback leaves spec.replicas out of what it applies when another
// manager alone owns it now (server-side apply's managedFields), and says
// so when it differs from the checkpoint. Every other field goes back to
// the checkpoint, hand-made changes included: a rollback puts the previous
// release back, and the inventory names that release as what runs.

// foreignField is a field of the checkpoint a rollback leaves as it is.
type foreignField struct {
	// Path is the field's path, "spec.replicas" or
	// "spec.template.spec.containers[name=app].resources".
	Path string
	// Manager is the field manager that owns it now.
	Manager string
	// Was and Now are the checkpoint's value and the current one (JSON).
	Was, Now string
}

func (f foreignField) String() string {
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
// (the object as it is now), and it when its value differs from obj's.
func withoutForeignFields(obj map[string]any, cur *unstructured.Unstructured) (map[string]any, []foreignField) {
	mine := map[string]any{}
	type theirs struct {
		manager string
		tree    map[string]any
	}
	var others []theirs
	for _, mf := range cur.GetManagedFields() {
		if mf.FieldsV1 == nil {
			continue
		}
		var tree map[string]any
		if json.Unmarshal(mf.FieldsV1.Raw, &tree) != nil {
			continue
		}
		if mf.Manager == FieldManager {
			merge(mine, tree)
			continue
		}
		if tree = replicasOnly(tree); tree != nil {
			others = append(others, theirs{mf.Manager, tree})
		}
	}
	if len(others) == 0 {
		return obj, nil
	}
	out := deepCopy(obj)
	var kept []foreignField
	for _, o := range others {
		prune(out, cur.Object, o.tree, mine, "", o.manager, &kept)
	}
	return out, kept
}

// merge adds the fields of tree b to tree a (FieldsV1 trees).
func merge(a, b map[string]any) {
	for k, v := range b {
		bv, _ := v.(map[string]any)
		av, ok := a[k].(map[string]any)
		if !ok {
			av = map[string]any{}
			a[k] = av
		}
		merge(av, bv)
	}
}

func deepCopy(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}

// leaf says whether a FieldsV1 node owns its field whole: {} or {".": {}}.
func leaf(node map[string]any) bool {
	for k := range node {
		if k != "." {
			return false
		}
	}
	return true
}

// prune removes from obj (a map or list of the checkpoint) each field that
// the FieldsV1 tree theirs owns whole and mine does not name; cur is the
// same place in the object as it is now.
func prune(obj any, cur any, theirs, mine map[string]any, path, manager string, kept *[]foreignField) any {
	for _, k := range slices.Sorted(maps.Keys(theirs)) {
		if k == "." {
			continue
		}
		node, _ := theirs[k].(map[string]any)
		mineNode, mineHas := mine[k].(map[string]any)
		switch {
		case strings.HasPrefix(k, "f:"):
			m, ok := obj.(map[string]any)
			if !ok {
				continue
			}
			name := k[2:]
			child, ok := m[name]
			if !ok {
				continue
			}
			curMap, _ := cur.(map[string]any)
			curChild, curHas := curMap[name]
			p := name
			if path != "" {
				p = path + "." + name
			}
			if leaf(node) {
				if !mineHas {
					delete(m, name)
					note(kept, p, manager, child, curChild, curHas)
				}
				continue
			}
			before := size(child)
			if pruned := prune(child, curChild, node, mineNode, p, manager, kept); before > 0 && size(pruned) == 0 {
				delete(m, name)
			} else {
				m[name] = pruned
			}
		case strings.HasPrefix(k, "k:"), strings.HasPrefix(k, "v:"), strings.HasPrefix(k, "i:"):
			list, ok := obj.([]any)
			if !ok {
				continue
			}
			i := find(list, k)
			if i < 0 {
				continue
			}
			curList, _ := cur.([]any)
			j := find(curList, k)
			var curItem any
			if j >= 0 {
				curItem = curList[j]
			}
			p := path + "[" + k[2:] + "]"
			if _, whole := node["."]; (whole || leaf(node)) && !mineHas {
				// The item is theirs: their list item, whole.
				note(kept, p, manager, list[i], curItem, j >= 0)
				obj = slices.Delete(list, i, i+1)
				continue
			}
			if leaf(node) {
				continue
			}
			before := size(list[i])
			if list[i] = prune(list[i], curItem, node, mineNode, p, manager, kept); before > 0 && size(list[i]) == 0 {
				obj = slices.Delete(list, i, i+1)
			}
		}
	}
	return obj
}

// size is the length of a map or list (0 for anything else): one that
// pruning emptied is left out rather than applied empty.
func size(v any) int {
	switch v := v.(type) {
	case map[string]any:
		return len(v)
	case []any:
		return len(v)
	}
	return 0
}

// find returns the index of the list item a FieldsV1 key names: k:{…} an
// item whose fields have those values, v:… the value itself, i:N the
// index; -1 when none.
func find(list []any, key string) int {
	switch {
	case strings.HasPrefix(key, "k:"):
		var want map[string]any
		if json.Unmarshal([]byte(key[2:]), &want) != nil {
			return -1
		}
		return slices.IndexFunc(list, func(item any) bool {
			m, ok := item.(map[string]any)
			if !ok {
				return false
			}
			for f, v := range want {
				if !sameJSON(m[f], v) {
					return false
				}
			}
			return true
		})
	case strings.HasPrefix(key, "v:"):
		var want any
		if json.Unmarshal([]byte(key[2:]), &want) != nil {
			return -1
		}
		return slices.IndexFunc(list, func(item any) bool { return sameJSON(item, want) })
	case strings.HasPrefix(key, "i:"):
		var i int
		if _, err := fmt.Sscanf(key[2:], "%d", &i); err != nil || i < 0 || i >= len(list) {
			return -1
		}
		return i
	}
	return -1
}

func sameJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

// note records a field left out that differs from the checkpoint.
func note(kept *[]foreignField, path, manager string, was, now any, nowHas bool) {
	if nowHas && sameJSON(was, now) {
		return
	}
	w, _ := json.Marshal(was)
	n := []byte("absent")
	if nowHas {
		n, _ = json.Marshal(now)
	}
	*kept = append(*kept, foreignField{Path: path, Manager: manager, Was: string(w), Now: string(n)})
}

// replicasOnly is the part of a managedFields tree that is spec.replicas,
// or nil when it holds none.
func replicasOnly(tree map[string]any) map[string]any {
	spec, _ := tree["f:spec"].(map[string]any)
	r, ok := spec["f:replicas"]
	if !ok {
		return nil
	}
	return map[string]any{"f:spec": map[string]any{"f:replicas": r}}
}
