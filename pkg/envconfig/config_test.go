package envconfig

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/manent-io/manent/descriptor"
)

// TestConfigJSON checks that a Config marshals to the document the HTTP
// provider reads, so a configuration service written in Go can serve
// json.Marshal(cfg).
func TestConfigJSON(t *testing.T) {
	cfg := &Config{
		Target:     &descriptor.Target{Plugin: "kubernetes", With: map[string]any{"namespace": "billing"}},
		Parameters: map[string]any{"replicas": 2.0, "resources": map[string]any{"cpu": "1"}},
		Rollback:   descriptor.Rollback{Enabled: new(false), On: []string{"deploy"}},
		Regions:    []string{"eu-1"},
		Policy:     &Policy{AllowRollbackOverride: true, Parameters: []string{"replicas"}},
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseJSON("test", b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if !reflect.DeepEqual(got, cfg) {
		t.Errorf("round trip of %s\ngot  %#v\nwant %#v", b, got, cfg)
	}
	empty, _ := json.Marshal(&Config{})
	if string(empty) != "{}" {
		t.Errorf("the empty configuration marshals to %s", empty)
	}
}
