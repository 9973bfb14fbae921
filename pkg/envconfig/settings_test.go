package envconfig

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/viper"

	"github.com/manent-io/manent/pkg/manent"
)

func TestFromConfig(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "file"), "")
	tests := []struct {
		name     string
		settings Settings
		policy   *Policy
		want     Provider
		bad      []string // paths of the field errors
	}{
		{name: "no settings", want: None{}},
		{name: "none", settings: Settings{Provider: "none"}, want: None{}},
		{name: "files", settings: Settings{Provider: "files", Dir: dir}, want: Files{Dir: dir}},
		{
			name:     "http",
			settings: Settings{Provider: "http", URL: "https://cfg.example/environments/{environment}?application={application}", Timeout: 2 * time.Second},
			want:     &HTTP{URL: "https://cfg.example/environments/{environment}?application={application}", Timeout: 2 * time.Second},
		},
		{
			name:     "http without application",
			settings: Settings{Provider: "http", URL: "http://127.0.0.1:9000/{environment}.json"},
			want:     &HTTP{URL: "http://127.0.0.1:9000/{environment}.json"},
		},
		{name: "files without dir", settings: Settings{Provider: "files"}, bad: []string{"environments.dir"}},
		{name: "files dir missing", settings: Settings{Provider: "files", Dir: filepath.Join(dir, "nope")}, bad: []string{"environments.dir"}},
		{name: "files dir is a file", settings: Settings{Provider: "files", Dir: filepath.Join(dir, "file")}, bad: []string{"environments.dir"}},
		{name: "http without url", settings: Settings{Provider: "http"}, bad: []string{"environments.url"}},
		{name: "http without {environment}", settings: Settings{Provider: "http", URL: "https://cfg.example/env"}, bad: []string{"environments.url"}},
		{name: "http other scheme", settings: Settings{Provider: "http", URL: "ftp://cfg.example/{environment}"}, bad: []string{"environments.url"}},
		{name: "http no host", settings: Settings{Provider: "http", URL: "https:///{environment}"}, bad: []string{"environments.url"}},
		{
			name:     "negative timeout",
			settings: Settings{Provider: "http", URL: "https://cfg.example/{environment}", Timeout: -time.Second},
			bad:      []string{"environments.timeout"},
		},
		{name: "unknown provider", settings: Settings{Provider: "git"}, bad: []string{"environments.provider"}},
		{
			name:   "bad policy",
			policy: &Policy{Parameters: []string{"ok", "[bad"}},
			bad:    []string{"descriptor_policy.parameters[1]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromConfig(tt.settings, tt.policy)
			if tt.bad != nil {
				var me *manent.Error
				if !errors.As(err, &me) || me.Code != manent.EInvalid {
					t.Fatalf("error = %v, want an EInvalid *manent.Error", err)
				}
				var paths []string
				for _, f := range me.Fields {
					paths = append(paths, f.Path)
				}
				if !reflect.DeepEqual(paths, tt.bad) {
					t.Errorf("field errors at %v, want %v (%v)", paths, tt.bad, me.Fields)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Provider, tt.want) {
				t.Errorf("provider = %#v, want %#v", got.Provider, tt.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	dir := t.TempDir()
	writeTestFile(t, filepath.Join(dir, "prod.yaml"), "descriptor_policy: {parameters: [replicas]}")
	writeTestFile(t, filepath.Join(dir, "staging.yaml"), "regions: [eu-1]")
	serverPolicy := &Policy{AllowTargetOverride: true, Parameters: []string{"*"}}
	ctx := context.Background()

	d, err := FromConfig(Settings{Provider: "files", Dir: dir}, serverPolicy)
	if err != nil {
		t.Fatal(err)
	}
	serverPolicy.Parameters[0] = "changed" // FromConfig keeps its own copy

	tests := []struct {
		environment string
		want        *Policy
	}{
		{"prod", &Policy{Parameters: []string{"replicas"}}},                        // its own
		{"staging", &Policy{AllowTargetOverride: true, Parameters: []string{"*"}}}, // the server's
		{"dev", &Policy{AllowTargetOverride: true, Parameters: []string{"*"}}},     // none: the server's
	}
	for _, tt := range tests {
		t.Run(tt.environment, func(t *testing.T) {
			cfg, rev, err := d.Get(ctx, "billing", tt.environment)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Policy, tt.want) {
				t.Errorf("policy = %#v, want %#v", cfg.Policy, tt.want)
			}
			if rev.Source != "files:"+dir {
				t.Errorf("source = %q", rev.Source)
			}
			cfg.Policy.Parameters[0] = "mutated" // must not reach the next Get
		})
	}
	cfg, _, _ := d.Get(ctx, "billing", "dev")
	if cfg.Policy.Parameters[0] != "*" {
		t.Errorf("a caller changed the server's policy: %v", cfg.Policy)
	}

	t.Run("required", func(t *testing.T) {
		req := &Defaults{Provider: Files{Dir: dir}, Required: true}
		if _, _, err := req.Get(ctx, "billing", "staging"); err != nil {
			t.Fatal(err)
		}
		_, _, err := req.Get(ctx, "billing", "prdo")
		var me *manent.Error
		if !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/environment" {
			t.Fatalf("error = %#v, want EInvalid at /environment", err)
		}
	})

	t.Run("errors pass through", func(t *testing.T) {
		srv := newConfigServer(t, "", "")
		srv.Close()
		_, _, err := (&Defaults{Provider: &HTTP{URL: srv.URL + "/{environment}"}, Policy: serverPolicy}).Get(ctx, "billing", "prod")
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("error = %v, want ErrUnavailable", err)
		}
	})

	t.Run("none", func(t *testing.T) {
		cfg, rev, err := (&Defaults{Provider: None{}}).Get(ctx, "billing", "prod")
		if err != nil || !reflect.DeepEqual(cfg, &Config{}) || rev != (Revision{Source: "none"}) {
			t.Errorf("got %#v %v %v", cfg, rev, err)
		}
	})
}

func TestPolicyValidate(t *testing.T) {
	if err := AllowAll().Validate("descriptor_policy"); err != nil {
		t.Errorf("AllowAll is invalid: %v", err)
	}
	if err := (Policy{}).Validate("descriptor_policy"); err != nil {
		t.Errorf("the zero policy is invalid: %v", err)
	}
	err := Policy{Parameters: []string{"a", " ", "b.[", "c..d"}}.Validate("x")
	var me *manent.Error
	if !errors.As(err, &me) || len(me.Fields) != 3 || me.Fields[0].Path != "x.parameters[1]" {
		t.Errorf("error = %#v", err)
	}
}

// TestSettingsFromViper reads the keys as manent-server.yaml gives them,
// through viper as the server does.
func TestSettingsFromViper(t *testing.T) {
	v := viper.New()
	v.SetConfigType("yaml")
	err := v.ReadConfig(strings.NewReader(`
environments:
  provider: http
  url: "https://cfg.example/environments/{environment}?application={application}"
  timeout: 3s
  required: true
descriptor_policy:
  allow_target_override: true
  parameters: [replicas, "feature_*"]
`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Environments     Settings `mapstructure:"environments"`
		DescriptorPolicy *Policy  `mapstructure:"descriptor_policy"`
	}
	if err := v.Unmarshal(&c); err != nil {
		t.Fatal(err)
	}
	want := Settings{Provider: "http", URL: "https://cfg.example/environments/{environment}?application={application}",
		Timeout: 3 * time.Second, Required: true}
	if c.Environments != want {
		t.Errorf("settings = %#v, want %#v", c.Environments, want)
	}
	if !reflect.DeepEqual(c.DescriptorPolicy, &Policy{AllowTargetOverride: true, Parameters: []string{"replicas", "feature_*"}}) {
		t.Errorf("policy = %#v", c.DescriptorPolicy)
	}
	d, err := FromConfig(c.Environments, c.DescriptorPolicy)
	if err != nil {
		t.Fatal(err)
	}
	if h := d.Provider.(*HTTP); h.Timeout != 3*time.Second || !d.Required {
		t.Errorf("defaults = %#v", d)
	}
}
