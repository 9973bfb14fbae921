package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// credsPassword is the environment's credential in these tests; the
// submitter's command prints it reversed, which masking does not catch.
const credsPassword = "s3cr3t-pa55w0rd"

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

// credsServer runs a configured server whose environments directory holds
// files (name → content), with a token "ci" that may only submit, dry-run
// and read billing's deploys.
func credsServer(t *testing.T, files map[string]string, opts ...func(*node.Config)) (ci *api.Client, admin *api.Client, envDir string) {
	t.Helper()
	envDir = t.TempDir()
	for name, content := range files {
		writeEnvFile(t, envDir, name, content)
	}
	tokens := []auth.TokenConfig{{Name: "ci", SHA256: auth.HashToken("ci-token")}}
	rules := []auth.RBACRule{{Subjects: []string{"token:ci"},
		Permissions:  []string{"deployment.submit", "deployment.dry-run", "deployment.read"},
		Applications: []string{"billing"}}}
	srv := newTestServer(t, enginetest.SQLite(t), tokens, rules, func(c *node.Config) {
		configured(c)
		c.Environments = envconfig.Settings{Provider: "files", Dir: envDir}
		for _, o := range opts {
			o(c)
		}
	})
	return api.NewClient(srv.URL, "ci-token", nil), api.NewClient(srv.URL, "admin-token", nil), envDir
}

func writeEnvFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scriptEnv is an environment target running a fixed command with the
// database password in its environment.
var scriptEnv = fmt.Sprintf(`target:
  plugin: script
  with:
    command: [sh, -c, 'echo "migrating with the password"']
    env: {DB_PASSWORD: %s}
`, credsPassword)

// stealing is a descriptor whose target runs the submitter's command with
// the environment's target.with merged under it.
func stealing(env, art string) string {
	return fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: %s
version: "7"
artifact: {url: %q}
target: {plugin: script, with: {command: [sh, -c, 'echo "$DB_PASSWORD" | rev']}}
`, env, art)
}

// deployLog waits for deploy id to end and returns its state and log.
func deployLog(t *testing.T, c *api.Client, id string) (manent.State, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := c.Wait(ctx, id, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("wait for %s: %v", id, err)
	}
	logs, err := c.Logs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range logs.Lines {
		lines = append(lines, l.Step+": "+l.Text)
	}
	return d.State, strings.Join(lines, "\n")
}

// A least-privileged submitter cannot run its own command with the
// credentials an environment configuration gives its target, when the
// operator wrote no descriptor policy: the descriptor that changes the
// target's command is refused at submission and in the dry run, with the
// path and what the operator can do.
func TestEnvironmentCredentialsNotUnderSubmittersCommand(t *testing.T) {
	t.Parallel()
	ci, _, _ := credsServer(t, map[string]string{"staging.yaml": scriptEnv})
	ctx := context.Background()
	desc := stealing("staging", artifactFile(t))
	for _, dry := range []bool{false, true} {
		res, err := ci.Submit(ctx, []byte(desc), dry)
		if err == nil {
			if !dry {
				state, log := deployLog(t, ci, res.ID)
				if strings.Contains(log, reverse(credsPassword)) {
					t.Fatalf("the submitter's command read the environment's DB_PASSWORD (%s):\n%s", state, log)
				}
			}
			t.Fatalf("dry run %t: accepted (%+v), want a 422 at /target/with/command", dry, res)
		}
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("dry run %t: %v, want a 422", dry, err)
		}
		var found bool
		for _, f := range me.Fields {
			if f.Path == "/target/with/command" {
				found = true
				for _, want := range []string{"credentials", "allow_target_override: true"} {
					if !strings.Contains(f.Message, want) {
						t.Errorf("dry run %t: message %q does not say %q", dry, f.Message, want)
					}
				}
			}
			if strings.Contains(f.Message, credsPassword) {
				t.Errorf("dry run %t: the refusal shows the password: %s", dry, f.Message)
			}
		}
		if !found {
			t.Errorf("dry run %t: errors %+v, want one at /target/with/command", dry, me.Fields)
		}
	}
}

// The same check runs again in the config step: a descriptor that changed
// the target's command while the environment gave no credentials is
// refused when the environment gives some by the time the deploy starts,
// before its command runs.
func TestEnvironmentCredentialsAddedBeforeConfigStep(t *testing.T) {
	t.Parallel()
	const plain = "target: {plugin: script, with: {command: [sh, -c, 'echo migrating']}}\n"
	ci, _, envDir := credsServer(t, map[string]string{"staging.yaml": plain})
	ctx := context.Background()
	// The first deploy holds staging's queue until its gate opens.
	first, gate := startGated(t, ci, func(art, gate string) string { return gatedDescriptor(art, "staging", gate) })
	res, err := ci.Submit(ctx, []byte(stealing("staging", artifactFile(t))), false)
	if err != nil {
		t.Fatalf("submit while the environment gives no credentials: %v", err)
	}
	writeEnvFile(t, envDir, "staging.yaml", scriptEnv)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if state, log := deployLog(t, ci, first); state != manent.StateSuccess {
		t.Fatalf("first deploy %s:\n%s", state, log)
	}
	state, log := deployLog(t, ci, res.ID)
	if strings.Contains(log, reverse(credsPassword)) {
		t.Fatalf("the submitter's command read the environment's DB_PASSWORD (%s):\n%s", state, log)
	}
	if state != manent.StateError {
		t.Fatalf("deploy %s, want ERROR:\n%s", state, log)
	}
	d, err := ci.Deployment(ctx, res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range d.Steps {
		if s.Name == "config" {
			for _, want := range []string{"/target/with/command", "target.with.env.DB_PASSWORD", "allow_target_override: true"} {
				if !strings.Contains(s.Error, want) {
					t.Errorf("config step error %q does not say %q", s.Error, want)
				}
			}
			if s.Attempts > 1 {
				t.Errorf("config step tried %d times: a refusal is permanent", s.Attempts)
			}
		}
	}
}

// An operator who writes allow_target_override: true — in the environment's
// configuration or as the server's descriptor_policy — lets the descriptor
// change the target under the environment's credentials: the deploy runs,
// and the dry run, the submission and the config step's log say what runs
// with the credentials.
func TestEnvironmentCredentialsExplicitlyAllowed(t *testing.T) {
	t.Parallel()
	const warn = "target credentials (target.with.env.DB_PASSWORD) run under this descriptor's target.with.command: its descriptor policy allows it (allow_target_override: true)"
	cases := []struct {
		name string
		env  string
		opts []func(*node.Config)
	}{
		{"environment policy", scriptEnv + "descriptor_policy: {allow_target_override: true}\n", nil},
		{"server policy", scriptEnv, []func(*node.Config){func(c *node.Config) {
			c.DescriptorPolicy = &envconfig.Policy{AllowTargetOverride: true}
		}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ci, _, _ := credsServer(t, map[string]string{"staging.yaml": tc.env}, tc.opts...)
			ctx := context.Background()
			desc := []byte(stealing("staging", artifactFile(t)))
			dry, err := ci.Submit(ctx, desc, true)
			if err != nil {
				t.Fatalf("dry run: %v", err)
			}
			if !strings.Contains(dry.Notice, warn) {
				t.Errorf("dry run notice %q, want %q", dry.Notice, warn)
			}
			res, err := ci.Submit(ctx, desc, false)
			if err != nil {
				t.Fatalf("submit: %v", err)
			}
			if !strings.Contains(res.Notice, warn) {
				t.Errorf("submit notice %q, want %q", res.Notice, warn)
			}
			state, log := deployLog(t, ci, res.ID)
			if state != manent.StateSuccess {
				t.Fatalf("deploy %s:\n%s", state, log)
			}
			if !strings.Contains(log, "config: environment staging's "+warn) {
				t.Errorf("the config step's log does not warn %q:\n%s", warn, log)
			}
		})
	}
}

// Ordinary deploys are unaffected: a descriptor that repeats the
// environment's command (not its credential: see
// testdata/merge/target-credential-guess-*), one that names none, one that names a target where
// the environment gives none, and one that adds to a target whose `with`
// holds no credentials.
func TestEnvironmentCredentialsOrdinaryDeploys(t *testing.T) {
	t.Parallel()
	ci, _, _ := credsServer(t, map[string]string{
		"staging.yaml": scriptEnv,
		"qa.yaml":      "target: {plugin: script, with: {command: [sh, -c, 'echo migrating']}}\n",
	})
	ctx := context.Background()
	art := artifactFile(t)
	head := func(env string) string {
		return fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: \"7\"\nartifact: {url: %q}\n", env, art)
	}
	cases := []struct{ name, desc, want string }{
		{"no target", head("staging"), "deploy: migrating with the password"},
		{"the environment's command repeated", head("staging") +
			"target: {plugin: script, with: {command: [sh, -c, 'echo \"migrating with the password\"']}}\n", "deploy: migrating with the password"},
		{"a target where the environment gives none", head("dev") +
			"target: {plugin: script, with: {command: [sh, -c, 'echo own target'], env: {API_TOKEN: mine-1234}}}\n", "deploy: own target"},
		{"a change to a target without credentials", head("qa") +
			"target: {plugin: script, with: {command: [sh, -c, 'echo \"$STAGE\"'], env: {STAGE: changed}}}\n", "deploy: changed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, dry := range []bool{true, false} {
				res, err := ci.Submit(ctx, []byte(tc.desc), dry)
				if err != nil {
					t.Fatalf("dry run %t: %v", dry, err)
				}
				if res.Notice != "" {
					t.Errorf("dry run %t: notice %q, want none", dry, res.Notice)
				}
				if dry {
					continue
				}
				if state, log := deployLog(t, ci, res.ID); state != manent.StateSuccess || !strings.Contains(log, tc.want) {
					t.Fatalf("deploy %s, want SUCCESS with %q:\n%s", state, tc.want, log)
				}
			}
		})
	}
}
