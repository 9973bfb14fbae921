package admit_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
)

// staticEnv is an environment configuration provider answering cfg for
// every environment.
type staticEnv struct{ cfg *envconfig.Config }

func (s staticEnv) Get(context.Context, string, string) (*envconfig.Config, envconfig.Revision, error) {
	return s.cfg, envconfig.Revision{Source: "test", Revision: "1"}, nil
}

// A Rego policy reads input.environment.config, the environment
// configuration (docs/governance.md): at submission, at the config step and
// at the artifacts step's promotion check. QA: it was always {}, so a
// policy refusing prod deploys with fewer than 2 replicas set by the
// environment (the descriptor setting none) let them through.
func TestRegoSeesTheEnvironmentConfiguration(t *testing.T) {
	pol, err := governance.ParseRego("policy.rego", `package manent

deny contains msg if {
	input.environment.config.parameters.replicas < 2
	msg := sprintf("%s runs %d replicas, fewer than 2", [input.environment.name, input.environment.config.parameters.replicas])
}

deny contains "the environment configuration is not visible" if {
	not input.environment.config.target.plugin
}
`)
	if err != nil {
		t.Fatal(err)
	}
	one := &envconfig.Config{Target: &descriptor.Target{Plugin: "local"}, Parameters: map[string]any{"replicas": 1}}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: pol, Environments: staticEnv{one}})
	_, err = f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	if err == nil || !strings.Contains(err.Error()+fieldText(err), "prod runs 1 replicas, fewer than 2") {
		t.Fatalf("submission with replicas 1 from the environment: %v %s, want the policy's refusal", err, fieldText(err))
	}

	two := &envconfig.Config{Target: &descriptor.Target{Plugin: "local"}, Parameters: map[string]any{"replicas": 2}}
	ok := newAdmitter(t, admit.Config{Trial: true, Governance: pol, Environments: staticEnv{two}})
	adm, err := ok.a.Admit(context.Background(), admit.Request{Descriptor: ok.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatalf("submission with replicas 2: %v %s", err, fieldText(err))
	}
	if _, err := ok.a.Reconfigure(context.Background(), adm.Input); err != nil {
		t.Fatalf("config step with replicas 2: %v", err)
	}
	// The environment changed before the deploy started: the config step
	// judges the configuration valid then.
	later := newAdmitter(t, admit.Config{Trial: true, Governance: pol, Environments: staticEnv{one}})
	if _, err := later.a.Reconfigure(context.Background(), adm.Input); err == nil || !plugin.IsPermanent(err) ||
		!strings.Contains(err.Error(), "prod runs 1 replicas") {
		t.Fatalf("config step once the environment sets 1 replica: %v, want the policy's refusal", err)
	}

	// A wave asks again, with the configuration the deploy was judged
	// with: a freeze the policy derives from it holds the wave.
	frozen, err := governance.ParseRego("frozen.rego", `package manent

freeze := {"name": "by-config", "reopens_at": "2999-01-01T00:00:00Z"} if input.environment.config.parameters.frozen
`)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &envconfig.Config{Target: &descriptor.Target{Plugin: "local"}, Parameters: map[string]any{"frozen": true}}
	open := newAdmitter(t, admit.Config{Trial: true, Environments: staticEnv{cfg}})
	adm, err = open.a.Admit(context.Background(), admit.Request{Descriptor: open.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	waves := newAdmitter(t, admit.Config{Trial: true, Governance: frozen})
	if fr, err := waves.a.Freeze(context.Background(), adm.Input, []string{"eu-1"}); err != nil || fr == nil || fr.Name != "by-config" {
		t.Fatalf("a wave's freeze: %+v %v, want the policy's freeze by-config", fr, err)
	}
}

func fieldText(err error) string {
	var me *manent.Error
	if !errors.As(err, &me) {
		return ""
	}
	var sb strings.Builder
	for _, f := range me.Fields {
		sb.WriteString(f.Path + ": " + f.Message + "; ")
	}
	return sb.String()
}

// QA: a policy sees the target that will run (input.target: the
// environment's, with the descriptor's allowed overrides), not only what
// was submitted: one written against input.descriptor.target was passed by
// a descriptor that left the target to the environment.
func TestRegoSeesTheEffectiveTarget(t *testing.T) {
	pol, err := governance.ParseRego("policy.rego", `package manent

deny contains msg if {
	input.target.plugin == "local"
	approved := input.environment.config.parameters.approved
	not startswith(input.target.with.dir, approved)
	msg := sprintf("prod deploys only under %s, not %s", [approved, input.target.with.dir])
}

deny contains "the effective target is not visible" if not input.target.plugin
`)
	if err != nil {
		t.Fatal(err)
	}
	env := &envconfig.Config{Target: &descriptor.Target{Plugin: "local", With: map[string]any{}}, Parameters: map[string]any{"approved": "/srv/approved/"}}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: pol, Environments: staticEnv{env}})
	dir := filepath.Join(f.dir, "targets", "billing-prod")
	env.Target.With["dir"] = dir
	_, err = f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	if want := "prod deploys only under /srv/approved/, not " + dir; err == nil || !strings.Contains(err.Error()+fieldText(err), want) {
		t.Fatalf("submission leaving the target to the environment: %v %s, want %q", err, fieldText(err), want)
	}
	// Admitted while the directory is approved; the config step asks
	// again with the target it runs.
	env.Parameters["approved"] = f.dir
	adm, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatalf("submission under the approved directory: %v %s", err, fieldText(err))
	}
	env.Parameters["approved"] = "/srv/approved/"
	if _, err := f.a.Reconfigure(context.Background(), adm.Input); err == nil || !strings.Contains(err.Error(), "prod deploys only under /srv/approved/") {
		t.Fatalf("config step: %v, want the policy's refusal", err)
	}
}

// QA: input.environment.config held the environment's credentials as
// they are (a parameter db_password, a URL's password), so a policy whose
// reason printed the configuration put them in the 422 answer, in the
// config step's error and in the audit log. A policy sees them redacted,
// as readers see the effective deploy; every other value stays readable.
func TestRegoSeesNoCredentials(t *testing.T) {
	pol, err := governance.ParseRego("policy.rego", `package manent

deny contains msg if {
	input.environment.config.parameters.replicas < 2
	msg := sprintf("refused with %v", [input.environment.config])
}
`)
	if err != nil {
		t.Fatal(err)
	}
	const password, token = "db-pw-5e1c77", "tok-9a0b3d"
	env := &envconfig.Config{Target: &descriptor.Target{Plugin: "local"}, Parameters: map[string]any{"replicas": 1,
		"db_password": password, "api_token": token, "url": "https://u:" + password + "@db.example/x"}}
	f := newAdmitter(t, admit.Config{Trial: true, Governance: pol, Environments: staticEnv{env}})
	_, err = f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	text := fmt.Sprint(err) + fieldText(err)
	if !strings.Contains(text, "refused with") || !strings.Contains(text, "replicas") {
		t.Fatalf("submission: %s, want the policy's refusal", text)
	}
	if strings.Contains(text, password) || strings.Contains(text, token) {
		t.Fatalf("the policy's refusal shows a credential of the environment configuration: %s", text)
	}
	if !strings.Contains(text, plugin.Redacted) {
		t.Fatalf("submission: %s, want the credentials shown as %s", text, plugin.Redacted)
	}

	// The config step asks with the configuration it read, redacted the same.
	env.Parameters["replicas"] = 2
	adm, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, ""), Identity: ci})
	if err != nil {
		t.Fatalf("submission with 2 replicas: %v %s", err, fieldText(err))
	}
	env.Parameters["replicas"] = 1
	_, err = f.a.Reconfigure(context.Background(), adm.Input)
	if text := fmt.Sprint(err); !strings.Contains(text, "refused with") || strings.Contains(text, password) || strings.Contains(text, token) {
		t.Fatalf("config step: %s, want the policy's refusal without the credentials", text)
	}
}

// QA: input.descriptor was given to the policy as submitted, so a policy
// whose reason printed it (parameters, target.with, a step's with) put the credentials the submitter wrote in
// deploy.yml in the 422 answer, the config step's error and the audit log.
// The policy sees a copy redacted as input.environment.config is; every
// other value stays readable, and a policy reading ordinary fields decides
// as before.
func TestRegoSeesNoDescriptorCredentials(t *testing.T) {
	pol, err := governance.ParseRego("policy.rego", `package manent

deny contains msg if {
	input.descriptor.parameters.replicas < 2
	msg := sprintf("refused with %v", [input.descriptor])
}
`)
	if err != nil {
		t.Fatal(err)
	}
	const password, token, stepToken = "db-pw-71c2aa", "tok-4f0e9b", "step-tok-c0ffee"
	f := newAdmitter(t, admit.Config{Trial: true, Governance: pol})
	extra := func(replicas int) string {
		return fmt.Sprintf(`parameters: {replicas: %d, db_password: %s, region: eu-1}
target: {plugin: script, with: {command: [sh, -c, "true"], env: {API_TOKEN: %s, REGION: eu-1}}}
steps:
  - {name: smoke, after: deploy, plugin: script, with: {command: [sh, -c, "true"], env: {SMOKE_TOKEN: %s}}}
`, replicas, password, token, stepToken)
	}
	d := f.descriptor(t, extra(1))
	_, err = f.a.Admit(context.Background(), admit.Request{Descriptor: d, Identity: ci})
	text := fmt.Sprint(err) + fieldText(err)
	if !strings.Contains(text, "refused with") || !strings.Contains(text, "replicas") || !strings.Contains(text, "eu-1") ||
		!strings.Contains(text, "smoke") {
		t.Fatalf("submission: %s, want the policy's refusal showing the descriptor's ordinary values", text)
	}
	for _, secret := range []string{password, token, stepToken} {
		if strings.Contains(text, secret) {
			t.Fatalf("the policy's refusal shows %s, a credential of the descriptor: %s", secret, text)
		}
	}
	if !strings.Contains(text, plugin.Redacted) {
		t.Fatalf("submission: %s, want the credentials shown as %s", text, plugin.Redacted)
	}
	// The descriptor admitted keeps its credentials: the deploy runs with them.
	if d.Parameters["db_password"] != password || d.Target.With["env"].(map[string]any)["API_TOKEN"] != token {
		t.Fatalf("the submitted descriptor was changed: %+v %+v", d.Parameters, d.Target.With)
	}

	// The config step asks with the descriptor the deploy runs, redacted the same.
	adm, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, extra(2)), Identity: ci})
	if err != nil {
		t.Fatalf("submission with 2 replicas: %v %s", err, fieldText(err))
	}
	adm.Input.Descriptor.Parameters["replicas"] = 1
	_, err = f.a.Reconfigure(context.Background(), adm.Input)
	if text := fmt.Sprint(err); !strings.Contains(text, "refused with") || strings.Contains(text, password) ||
		strings.Contains(text, token) || strings.Contains(text, stepToken) {
		t.Fatalf("config step: %s, want the policy's refusal without the credentials", text)
	}
}
