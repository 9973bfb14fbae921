package governance_test

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
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

// TestPromotionRefusalSaysWhatUpstreamHas: "promotion to prod requires
// billing 1.4.2 to succeed first in: staging" said nothing of staging; it
// now says what became of the version there, and what staging runs. Only
// the environments still missing are asked about; the input of a policy is
// unchanged.
func TestPromotionRefusalSaysWhatUpstreamHas(t *testing.T) {
	rules, err := governance.ParseRules("g.yaml", []byte("promotion:\n  - {environment: prod, requires: [staging, qa]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	const base = "promotion to prod requires billing 1.4.2 to succeed first in: "
	tests := []struct {
		name      string
		succeeded []string // environments where 1.4.2 succeeded
		upstream  map[string]governance.Upstream
		want      string
	}{
		{name: "failed there", succeeded: []string{"qa"},
			upstream: map[string]governance.Upstream{"staging": {LatestID: "dpl_2", LatestState: manent.StateError, Runs: "1.4.1"}},
			want:     base + "staging — its last deploy there (dpl_2) ended ERROR (staging runs 1.4.1)"},
		{name: "still running there", succeeded: []string{"qa"},
			upstream: map[string]governance.Upstream{"staging": {LatestID: "dpl_3", LatestState: manent.StatePending, Runs: "1.4.1"}},
			want:     base + "staging — it is still PENDING there (dpl_3)"},
		{name: "waiting there", succeeded: []string{"qa"},
			upstream: map[string]governance.Upstream{"staging": {LatestID: "dpl_4", LatestState: manent.StateAwaitingApproval}},
			want:     base + "staging — it is still AWAITING_APPROVAL there (dpl_4)"},
		{name: "never deployed there", succeeded: []string{"qa"},
			upstream: map[string]governance.Upstream{"staging": {Runs: "1.4.1"}},
			want:     base + "staging — it was never deployed there (staging runs 1.4.1)"},
		{name: "an environment with no release",
			upstream: map[string]governance.Upstream{"qa": {}, "staging": {LatestID: "dpl_5", LatestState: manent.StateCancelled, Runs: "1.3.0"}},
			want:     base + "qa, staging — qa: it was never deployed there (qa has no release yet); staging: its last deploy there (dpl_5) ended CANCELLED (staging runs 1.3.0)"},
		{name: "nothing known", succeeded: []string{"qa"},
			want: base + "staging"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := governance.Input{Descriptor: billing("prod"), Identity: manent.Identity{Subject: "token:ci"}}
			for _, env := range tt.succeeded {
				in.Inventory.Successes = append(in.Inventory.Successes, governance.Success{Application: "billing", Environment: env, Version: "1.4.2"})
			}
			var asked []string
			in.Upstream = func(_ context.Context, env string) (governance.Upstream, bool) {
				asked = append(asked, env)
				u, ok := tt.upstream[env]
				return u, ok
			}
			d, err := rules.Decide(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if len(d.Deny) != 1 || d.Deny[0] != tt.want {
				t.Errorf("deny %q\nwant  %q", d.Deny, tt.want)
			}
			for _, env := range asked {
				if slices.Contains(tt.succeeded, env) {
					t.Errorf("asked about %s, where the version succeeded", env)
				}
			}
		})
	}
}
