package governance_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/manent-io/manent/pkg/governance"
)

// TestSharedTable evaluates testdata/cases.yaml with the YAML rules and with
// the equivalent Rego policy: both must give the same decision, and it must
// meet each case's expectation.
func TestSharedTable(t *testing.T) {
	rules, err := governance.LoadRules("testdata/governance.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policy, err := governance.LoadRego("testdata/policy.rego")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := governance.LoadCases("testdata/cases.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 20 {
		t.Fatalf("the shared table has %d cases, want at least 20", len(cases))
	}
	ctx := context.Background()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			fromRules, err := rules.Decide(ctx, c.Input)
			if err != nil {
				t.Fatalf("rules: %v", err)
			}
			fromRego, err := policy.Decide(ctx, c.Input)
			if err != nil {
				t.Fatalf("rego: %v", err)
			}
			if fromRules.Source != "rules:testdata/governance.yaml" || fromRego.Source != "rego:testdata/policy.rego" {
				t.Errorf("sources are %q and %q", fromRules.Source, fromRego.Source)
			}
			fromRules.Source, fromRego.Source = "", ""
			if !reflect.DeepEqual(fromRules, fromRego) {
				t.Errorf("the engines disagree:\nrules: %s\nrego:  %s", jsonString(fromRules), jsonString(fromRego))
			}
			for _, p := range c.Expect.Check(fromRules) {
				t.Errorf("testdata/cases.yaml:%d: %s\ndecision: %s", c.Line, p, jsonString(fromRules))
			}
		})
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
