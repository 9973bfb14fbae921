package envconfig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestFilesRevision(t *testing.T) {
	dir := t.TempDir()
	f := Files{Dir: dir}
	ctx := context.Background()
	get := func() Revision {
		t.Helper()
		cfg, rev, err := f.Get(ctx, "billing", "prod")
		if err != nil {
			t.Fatal(err)
		}
		if cfg == nil {
			t.Fatal("no configuration")
		}
		if rev.Source != "files:"+dir {
			t.Errorf("source = %q, want files:%s", rev.Source, dir)
		}
		return rev
	}

	env := "target: {plugin: kubernetes}\n"
	writeTestFile(t, filepath.Join(dir, "prod.yaml"), env)
	r1 := get()
	// Documented: sha256 of the sha256sum listing of the files read.
	if want := sha256Hex(sha256Hex(env) + "  prod.yaml\n"); r1.Revision != want {
		t.Errorf("revision = %s, want %s", r1.Revision, want)
	}
	if r := get(); r != r1 {
		t.Errorf("revision changed without a change: %v then %v", r1, r)
	}

	writeTestFile(t, filepath.Join(dir, "prod.yaml"), "target: {plugin: script}\n")
	r2 := get()
	if r2.Revision == r1.Revision {
		t.Error("revision did not change when the environment file changed")
	}

	app := "parameters: {replicas: 2}\n"
	writeTestFile(t, filepath.Join(dir, "prod", "billing.yaml"), app)
	r3 := get()
	if want := sha256Hex(sha256Hex("target: {plugin: script}\n") + "  prod.yaml\n" + sha256Hex(app) + "  prod/billing.yaml\n"); r3.Revision != want {
		t.Errorf("revision with an application file = %s, want %s", r3.Revision, want)
	}

	writeTestFile(t, filepath.Join(dir, "prod", "billing.yaml"), "parameters: {replicas: 3}\n")
	if r4 := get(); r4.Revision == r3.Revision {
		t.Error("revision did not change when the application file changed")
	}
	// Another application's file is not read.
	writeTestFile(t, filepath.Join(dir, "prod", "other.yaml"), "parameters: {replicas: 9}\n")
	if r5 := get(); r5.Revision != get().Revision {
		t.Error("unstable revision")
	}
}

func TestFilesGet(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  *Config // nil: no configuration
	}{
		{name: "no files", files: nil, want: nil},
		{name: "other environment only", files: map[string]string{"staging.yaml": "target: {plugin: local}"}, want: nil},
		{name: "empty environment file", files: map[string]string{"prod.yaml": ""}, want: &Config{}},
		{name: "comments only", files: map[string]string{"prod.yaml": "# nothing yet\n"}, want: &Config{}},
		{
			name:  "yml spelling",
			files: map[string]string{"prod.yml": "regions: [eu-1]"},
			want:  &Config{Regions: []string{"eu-1"}},
		},
		{
			name:  "application file alone",
			files: map[string]string{"prod/billing.yaml": "target: {plugin: local}"},
			want:  &Config{Target: &descriptor.Target{Plugin: "local"}},
		},
		{
			name: "every field",
			files: map[string]string{"prod.yaml": `
target: {plugin: kubernetes, with: {namespace: billing}}
parameters: {replicas: 2, since: 2026-01-07, mask: 0x10, ratio: 0.5, tags: [a, b], empty: null}
rollback: {enabled: true, on: [deploy, activation]}
regions: [eu-1, eu-2]
descriptor_policy:
  allow_target_override: true
  allow_rollback_override: false
  parameters: [replicas, "feature_*"]
`},
			want: &Config{
				Target: &descriptor.Target{Plugin: "kubernetes", With: map[string]any{"namespace": "billing"}},
				Parameters: map[string]any{"replicas": 2.0, "since": "2026-01-07", "mask": 16.0, "ratio": 0.5,
					"tags": []any{"a", "b"}, "empty": nil},
				Rollback: descriptor.Rollback{Enabled: new(true), On: []string{"deploy", "activation"}},
				Regions:  []string{"eu-1", "eu-2"},
				Policy:   &Policy{AllowTargetOverride: true, Parameters: []string{"replicas", "feature_*"}},
			},
		},
		{
			name: "anchors and merge keys",
			files: map[string]string{"prod.yaml": `
parameters:
  base: &base {cpu: 1, memory: 1Gi}
  big: {<<: *base, cpu: 4}
`},
			want: &Config{Parameters: map[string]any{
				"base": map[string]any{"cpu": 1.0, "memory": "1Gi"},
				"big":  map[string]any{"cpu": 4.0, "memory": "1Gi"},
			}},
		},
		{
			name: "application file merged, null removes",
			files: map[string]string{
				"prod.yaml":         "target: {plugin: kubernetes, with: {namespace: default, context: eu}}\nregions: [eu-1]\nparameters: {a: 1}",
				"prod/billing.yaml": "target: {with: {namespace: billing}}\nregions: [eu-2]\nparameters: {a: null}",
			},
			want: &Config{
				Target:     &descriptor.Target{Plugin: "kubernetes", With: map[string]any{"namespace": "billing", "context": "eu"}},
				Regions:    []string{"eu-2"},
				Parameters: map[string]any{"a": nil},
			},
		},
		{
			name: "application file removes the target",
			files: map[string]string{
				"prod.yaml":         "target: {plugin: kubernetes}",
				"prod/billing.yaml": "target: null",
			},
			want: &Config{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				writeTestFile(t, filepath.Join(dir, name), content)
			}
			got, rev, err := Files{Dir: dir}.Get(context.Background(), "billing", "prod")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v\nwant %#v", got, tt.want)
			}
			if (got == nil) != (rev.Revision == "") {
				t.Errorf("revision %q with configuration %v", rev.Revision, got)
			}
		})
	}
}

func TestFilesErrors(t *testing.T) {
	tests := []struct {
		name        string
		files       map[string]string
		application string
		want        []string // substrings of the error
	}{
		{
			name:  "YAML syntax",
			files: map[string]string{"prod.yaml": "target:\n  plugin: [kubernetes\n"},
			want:  []string{`prod.yaml:2:11: invalid YAML: the list opened with "[" here is not closed (did not find expected ',' or ']' at line 3, column 1)`},
		},
		{
			// yaml.v3's own text gives no line for a problem on line 1.
			name:  "YAML syntax on line 1",
			files: map[string]string{"prod.yaml": "target: *t\n"},
			want:  []string{"prod.yaml:1:9: invalid YAML: unknown anchor 't' referenced"},
		},
		{
			name:  "tab",
			files: map[string]string{"prod.yaml": "target:\n\tplugin: local\n"},
			want:  []string{"prod.yaml:2:1: invalid YAML: found character that cannot start any token: indent with spaces"},
		},
		{
			name:  "duplicate key",
			files: map[string]string{"prod.yaml": "regions: [a]\nparameters: {}\nregions: [b]\n"},
			want:  []string{"prod.yaml:3: /regions: ", `duplicate field "regions" (first at line 1)`},
		},
		{
			// The same YAML reading as descriptors (pkg/yamlvalue): an
			// alias that contains itself, a merge of a list, aliases that
			// expand without bound.
			name:  "alias that contains itself",
			files: map[string]string{"prod.yaml": "parameters: &p\n  a: [*p]\n"},
			want:  []string{"prod.yaml:2: /parameters/a/0/a/0: ", "alias *p refers to a value that contains it"},
		},
		{
			name:  "merge of a list",
			files: map[string]string{"prod.yaml": "base: &b [1]\nparameters:\n  <<: *b\n"},
			want:  []string{"prod.yaml:1: /parameters: ", "a merge (<<) takes a mapping or a list of mappings"},
		},
		{
			name:  "too many values",
			files: map[string]string{"prod.yaml": laughs()},
			want:  []string{"more than 100000 values (too many YAML aliases?)"},
		},
		{
			name:  "unknown field with its line",
			files: map[string]string{"prod.yaml": "target: {plugin: local}\n\ntargets: {plugin: local}\n"},
			want:  []string{"prod.yaml:3: /targets: unknown field \"targets\""},
		},
		{
			name:  "not a mapping",
			files: map[string]string{"prod.yaml": "- a\n- b\n"},
			want:  []string{"prod.yaml:1: must be a mapping, got a list"},
		},
		{
			name:  "wrong types",
			files: map[string]string{"prod.yaml": "target: local\nparameters: [a]\nregions: eu-1\n"},
			want: []string{"prod.yaml:1: /target: must be a mapping, got a string",
				"prod.yaml:2: /parameters: must be a mapping, got a list",
				"prod.yaml:3: /regions: must be a list of strings, got a string"},
		},
		{
			name:  "target without plugin",
			files: map[string]string{"prod.yaml": "target:\n  with: {a: 1}\n"},
			want:  []string{"prod.yaml:1: /target/plugin: missing"},
		},
		{
			name:  "bad plugin name",
			files: map[string]string{"prod.yaml": "target: {plugin: Kubernetes}\n"},
			want:  []string{"/target/plugin: \"Kubernetes\" is not a plugin name"},
		},
		{
			name:  "duplicate region and rollback step",
			files: map[string]string{"prod.yaml": "regions: [eu-1, eu-1]\nrollback: {on: [deploy, deploy]}\n"},
			want:  []string{"/regions/1: \"eu-1\" is listed twice", "/rollback/on/1: \"deploy\" is listed twice"},
		},
		{
			name:  "bad patterns",
			files: map[string]string{"prod.yaml": "descriptor_policy: {parameters: [\"\", \"a..b\", \"x[\"]}\n"},
			want:  []string{"/descriptor_policy/parameters/0: must not be empty", `"a..b" has an empty name`, `"x[" is not a valid glob`},
		},
		{
			name:  "infinite number",
			files: map[string]string{"prod.yaml": "parameters: {a: .inf}\n"},
			want:  []string{"prod.yaml:1: /parameters/a: must be a finite number"},
		},
		{
			name:  "alias cycle",
			files: map[string]string{"prod.yaml": "parameters: &p {a: *p}\n"},
			want:  []string{"prod.yaml:1"},
		},
		{
			name:  "error in the application file",
			files: map[string]string{"prod.yaml": "regions: [a]\n", "prod/billing.yaml": "\nrollback: {enabled: maybe}\n"},
			want:  []string{filepath.Join("prod", "billing.yaml") + ":2: /rollback/enabled: must be true or false, got a string"},
		},
		{
			name:  "two documents",
			files: map[string]string{"prod.yaml": "regions: [a]\n---\nregions: [b]\n"},
			want:  []string{"prod.yaml:3: a configuration file holds one YAML document"},
		},
		{
			name:  "both spellings",
			files: map[string]string{"prod.yaml": "", "prod.yml": ""},
			want:  []string{"both prod.yaml and prod.yml exist"},
		},
		{
			name:  "a directory",
			files: map[string]string{"prod.yaml/x": ""},
			want:  []string{"is a directory"},
		},
		{
			name:  "too large",
			files: map[string]string{"prod.yaml": "# " + strings.Repeat("x", maxSize)},
			want:  []string{"larger than"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				writeTestFile(t, filepath.Join(dir, name), content)
			}
			cfg, _, err := Files{Dir: dir}.Get(context.Background(), "billing", "prod")
			if err == nil {
				t.Fatalf("no error; configuration %#v", cfg)
			}
			if errors.Is(err, ErrUnavailable) {
				t.Errorf("a broken file reads as unavailable: %v", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestFilesRefusesBadNames(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "secret.yaml"), "regions: [x]")
	for _, names := range [][2]string{{"billing", "../secret"}, {"../../secret", "prod"}, {"billing", ""}, {"Billing", "prod"}} {
		t.Run(fmt.Sprintf("%s in %s", names[0], names[1]), func(t *testing.T) {
			_, _, err := Files{Dir: filepath.Join(dir, "envs")}.Get(context.Background(), names[0], names[1])
			if manent.ErrorCode(err) != manent.EInvalid {
				t.Fatalf("error = %v, want an EInvalid error", err)
			}
		})
	}
}

func TestFilesCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := (Files{Dir: t.TempDir()}).Get(ctx, "billing", "prod"); !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}

func TestFilesUnreadable(t *testing.T) {
	if os.Getuid() == 0 {
		t.Skip("root reads every file")
	}
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "prod.yaml"), "regions: [a]")
	if err := os.Chmod(filepath.Join(dir, "prod.yaml"), 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := (Files{Dir: dir}).Get(context.Background(), "billing", "prod"); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("error = %v, want a permission error", err)
	}
}
