package envconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/merge")

// TestMergeGolden runs every case of testdata/merge/<case>:
//
//	deploy.yml               the descriptor (must parse)
//	env.yaml                 optional: <environment>.yaml of a Files directory
//	env/<application>.yaml   optional: per-application files
//	descriptor_policy.yaml   optional: the server's default policy
//	effective.golden         the effective deploy, or
//	error.golden             the error
func TestMergeGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/merge/*/deploy.yml")
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases in testdata/merge (%v)", err)
	}
	for _, file := range cases {
		dir := filepath.Dir(file)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			d, err := descriptor.Parse(readTestFile(t, file))
			if err != nil {
				t.Fatalf("deploy.yml: %v", err)
			}
			envDir := t.TempDir()
			if b, err := os.ReadFile(filepath.Join(dir, "env.yaml")); err == nil {
				writeTestFile(t, filepath.Join(envDir, d.Environment+".yaml"), string(b))
			}
			apps, _ := filepath.Glob(filepath.Join(dir, "env", "*.yaml"))
			for _, a := range apps {
				writeTestFile(t, filepath.Join(envDir, d.Environment, filepath.Base(a)), string(readTestFile(t, a)))
			}
			var policy *Policy
			if b, err := os.ReadFile(filepath.Join(dir, "descriptor_policy.yaml")); err == nil {
				policy = &Policy{}
				if err := yaml.Unmarshal(b, policy); err != nil {
					t.Fatal(err)
				}
			}

			p := &Defaults{Provider: Files{Dir: envDir}, Policy: policy}
			cfg, _, err := p.Get(context.Background(), d.Application, d.Environment)
			var eff *Effective
			if err == nil {
				eff, err = Merge(d, cfg)
			}
			if err != nil {
				golden(t, dir, "error.golden", errorDocument(err, envDir))
				return
			}
			got, jerr := json.MarshalIndent(eff, "", "  ")
			if jerr != nil {
				t.Fatal(jerr)
			}
			golden(t, dir, "effective.golden", got)
		})
	}
}

// errorDocument renders err for error.golden: the fields of a
// *manent.Error, the message of any other (with dir replaced by $DIR).
func errorDocument(err error, dir string) []byte {
	var me *manent.Error
	var doc any
	if errors.As(err, &me) {
		doc = struct {
			Code    manent.Code         `json:"code"`
			Message string              `json:"message"`
			Errors  []manent.FieldError `json:"errors"`
		}{me.Code, me.Message, me.Fields}
	} else {
		doc = map[string]string{"error": strings.ReplaceAll(err.Error(), dir, "$DIR")}
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return b
}

// golden compares got with dir/name, or rewrites it with -update (removing
// the other kind of golden file of the case).
func golden(t *testing.T, dir, name string, got []byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	got = append(got, '\n')
	other := "error.golden"
	if name == other {
		other = "effective.golden"
	}
	if *update {
		writeTestFile(t, path, string(got))
		_ = os.Remove(filepath.Join(dir, other))
		return
	}
	if _, err := os.Stat(filepath.Join(dir, other)); err == nil {
		t.Errorf("got %s but the case has %s:\n%s", name, other, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/envconfig -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test ./pkg/envconfig -update after checking)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

func readTestFile(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeTestFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestEffectiveHasEveryDescriptorField guards Effective against a field
// added to descriptor.Descriptor and forgotten here.
func TestEffectiveHasEveryDescriptorField(t *testing.T) {
	names := func(typ reflect.Type) map[string]bool {
		out := map[string]bool{}
		for f := range typ.Fields() {
			out[strings.Split(f.Tag.Get("json"), ",")[0]] = true
		}
		return out
	}
	eff := names(reflect.TypeFor[Effective]())
	for name := range names(reflect.TypeFor[descriptor.Descriptor]()) {
		if !eff[name] {
			t.Errorf("Effective has no field %q of descriptor.Descriptor", name)
		}
	}
}

func TestMergeSharesNothing(t *testing.T) {
	d, err := descriptor.Parse([]byte(`apiVersion: manent/v1
application: billing
environment: prod
version: "1"
artifact: {url: "https://a.example/b.tgz"}
target: {plugin: k8s, with: {labels: {team: pay}}}
parameters: {resources: {cpu: 2}}
steps: [{name: smoke, before: activation, plugin: script, with: {command: [./smoke.sh]}}]
`))
	if err != nil {
		t.Fatal(err)
	}
	env := &Config{
		Target:     &descriptor.Target{Plugin: "k8s", With: map[string]any{"labels": map[string]any{"tier": "web"}}},
		Parameters: map[string]any{"resources": map[string]any{"memory": "1Gi"}},
	}
	before, _ := json.Marshal([]any{d, env})
	eff, err := Merge(d, env)
	if err != nil {
		t.Fatal(err)
	}
	eff.Target.With["labels"].(map[string]any)["x"] = 1
	eff.Parameters["resources"].(map[string]any)["x"] = 1
	eff.Steps[0].With["x"] = 1
	after, _ := json.Marshal([]any{d, env})
	if !bytes.Equal(before, after) {
		t.Errorf("changing the effective deploy changed its inputs:\nbefore %s\nafter  %s", before, after)
	}
}

// Merge warns when it merges a descriptor's target settings over the
// environment's credentials because a written policy allows it, and only
// then.
func TestMergeWarnsOfCredentials(t *testing.T) {
	const head = "apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: \"https://a.example/b.tgz\"}\n"
	creds := &descriptor.Target{Plugin: "script", With: map[string]any{
		"command": []any{"./migrate.sh"}, "env": map[string]any{"DB_PASSWORD": "pw-1234", "REGION": "eu"}}}
	plain := &descriptor.Target{Plugin: "script", With: map[string]any{"command": []any{"./migrate.sh"}}}
	allow := &Policy{AllowTargetOverride: true}
	tests := []struct {
		name   string
		target string
		env    *Config
		want   []string
	}{
		{"written policy, command changed", "target: {plugin: script, with: {command: [./steal.sh], env: {REGION: us}}}\n",
			&Config{Target: creds, Policy: allow},
			[]string{"environment prod's target credentials (target.with.env.DB_PASSWORD) run under this descriptor's target.with.command, target.with.env.REGION: its descriptor policy allows it (allow_target_override: true)"}},
		{"written policy, values repeated", "target: {plugin: script, with: {command: [./migrate.sh]}}\n",
			&Config{Target: creds, Policy: allow}, nil},
		{"written policy, another plugin", "target: {plugin: local, with: {dir: /srv/billing}}\n",
			&Config{Target: creds, Policy: allow}, nil},
		{"written policy, no credentials", "target: {plugin: script, with: {command: [./other.sh]}}\n",
			&Config{Target: plain, Policy: allow}, nil},
		{"no policy, no descriptor target", "", &Config{Target: creds}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := descriptor.Parse([]byte(head + tc.target))
			if err != nil {
				t.Fatal(err)
			}
			eff, err := Merge(d, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(eff.Warnings, tc.want) {
				t.Errorf("warnings %q, want %q", eff.Warnings, tc.want)
			}
		})
	}
}

func TestMergeNilDescriptor(t *testing.T) {
	if _, err := Merge(nil, nil); err == nil {
		t.Fatal("Merge(nil, nil) returned no error")
	}
}

func TestParameterPatterns(t *testing.T) {
	tests := []struct {
		patterns []string
		path     string
		allowed  bool
		below    bool
	}{
		{[]string{"*"}, "anything", true, false},
		{[]string{"*"}, "a.b", true, false},
		{[]string{"replicas"}, "replicas", true, false},
		{[]string{"replicas"}, "replica", false, false},
		{[]string{"feature_*"}, "feature_x", true, false},
		{[]string{"feature_*"}, "feature_x.sub", true, false},
		{[]string{"feature_*"}, "features", false, false},
		{[]string{"resources.cpu"}, "resources", false, true},
		{[]string{"resources.cpu"}, "resources.cpu", true, false},
		{[]string{"resources.cpu"}, "resources.memory", false, false},
		{[]string{"resources.*"}, "resources.memory", true, false},
		{[]string{"*.cpu"}, "limits", false, true},
		{nil, "replicas", false, false},
		{[]string{"[a-c]"}, "b", true, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.patterns, ",")+"/"+tt.path, func(t *testing.T) {
			m := &merger{policy: Policy{Parameters: tt.patterns}}
			p := strings.Split(tt.path, ".")
			if got := m.parameterAllowed(p); got != tt.allowed {
				t.Errorf("allowed = %v, want %v", got, tt.allowed)
			}
			if got := m.parameterAllowedBelow(p); got != tt.below {
				t.Errorf("allowed below = %v, want %v", got, tt.below)
			}
		})
	}
}
