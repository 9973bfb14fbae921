package kubernetes

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// withoutForeignFields leaves out the replica count another manager alone
// owns, and names it when it differs; every other field another manager
// took over — a keyed list item's field, a set-list value, a container —
// goes back to the checkpoint with what manent owns or shares.
func TestWithoutForeignFields(t *testing.T) {
	var checkpoint, now map[string]any
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(json.Unmarshal([]byte(`{"metadata":{"name":"b","finalizers":["a","b"]},"spec":{"replicas":4,"paused":false,
		"template":{"spec":{"containers":[{"name":"app","image":"v1","resources":{"limits":{"cpu":"1"}}},{"name":"side","image":"s1"}]}}}}`), &checkpoint))
	must(json.Unmarshal([]byte(`{"metadata":{"name":"b","finalizers":["a","b"]},"spec":{"replicas":7,"paused":false,
		"template":{"spec":{"containers":[{"name":"app","image":"v2","resources":{"limits":{"cpu":"2"}}},{"name":"side","image":"s1"}]}}}}`), &now))
	cur := &unstructured.Unstructured{Object: now}
	entry := func(manager, fields string) metav1.ManagedFieldsEntry {
		return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}
	}
	cur.SetManagedFields([]metav1.ManagedFieldsEntry{
		entry(FieldManager, `{"f:spec":{"f:paused":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
		entry("kubectl-edit", `{"f:spec":{"f:replicas":{},"f:paused":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{"f:resources":{"f:limits":{"f:cpu":{}}}},"k:{\"name\":\"side\"}":{".":{},"f:image":{},"f:name":{}}}}}}}`),
		entry("finalizer-bot", `{"f:metadata":{"f:finalizers":{"v:\"b\"":{}}}}`),
	})
	got, kept := withoutForeignFields(checkpoint, cur, false)
	b, _ := json.Marshal(got)
	if want := `{"metadata":{"finalizers":["a","b"],"name":"b"},"spec":{"paused":false,"template":{"spec":{"containers":[{"image":"v1","name":"app","resources":{"limits":{"cpu":"1"}}},{"image":"s1","name":"side"}]}}}}`; string(b) != want {
		t.Errorf("applied:\n%s\nwant\n%s", b, want)
	}
	if got, want := fmt.Sprint(kept), `[spec.replicas (set by kubectl-edit: 7 now, 4 in the checkpoint)]`; got != want {
		t.Errorf("kept:\n%s\nwant\n%s", got, want)
	}
	if checkpoint["spec"].(map[string]any)["replicas"] != 4.0 {
		t.Error("the checkpoint itself was changed")
	}
}
