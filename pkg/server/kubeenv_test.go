package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// kubeEnvServer is credsServer with plugins.kubernetes.kubeconfigs keeping
// prod (returned) to prod and prod-*, dev to dev, and a plain entry shared.
// The files need not exist: admission never reads them.
func kubeEnvServer(t *testing.T, files map[string]string) (ci *api.Client, prod, dev string, run func(env, with string, dry bool) (string, error), envDir string) {
	t.Helper()
	dir := t.TempDir()
	prod, dev = filepath.Join(dir, "prod.yaml"), filepath.Join(dir, "dev.yaml")
	ci, _, envDir = credsServer(t, files, func(c *node.Config) {
		c.Plugins.Kubernetes.Kubeconfigs = []any{
			map[string]any{"path": prod, "environments": []any{"prod", "prod-*"}},
			map[string]any{"path": dev, "environments": []any{"dev"}},
			filepath.Join(dir, "shared.yaml"),
		}
	})
	art := artifactFile(t)
	run = func(env, with string, dry bool) (string, error) {
		desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: \"1\"\nartifact: {url: %q}\ntarget: {plugin: kubernetes, with: %s}\n", env, art, with)
		res, err := ci.Submit(context.Background(), []byte(desc), dry)
		if err != nil {
			return "", err
		}
		return res.ID, nil
	}
	return ci, prod, dev, run, envDir
}

// A least-privileged submitter allowed to deploy billing/dev cannot apply
// its manifests with the production cluster's kubeconfig: the server's
// plugins.kubernetes.kubeconfigs keeps that file to prod and prod-*, and
// the descriptor naming it for dev is a 422 at /target/with/kubeconfig,
// at submission and in the dry run, naming the environments the file is
// for and no other file. Before, any listed file was any environment's.
func TestKubeconfigKeptToItsEnvironments(t *testing.T) {
	t.Parallel()
	_, prod, dev, run, _ := kubeEnvServer(t, nil)
	for _, dry := range []bool{true, false} {
		_, err := run("dev", fmt.Sprintf("{kubeconfig: %q}", prod), dry)
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("dry run %t: dev naming prod's kubeconfig: %v, want a 422", dry, err)
		}
		var found bool
		for _, f := range me.Fields {
			if f.Path == "/target/with/kubeconfig" && strings.Contains(f.Message, "prod, prod-*") {
				found = true
			}
			if strings.Contains(f.Message, "dev.yaml") || strings.Contains(f.Message, "shared.yaml") {
				t.Errorf("dry run %t: the refusal names another file: %s", dry, f.Message)
			}
		}
		if !found {
			t.Fatalf("dry run %t: errors %+v, want /target/with/kubeconfig naming prod, prod-*", dry, me.Fields)
		}
	}
	// A file not listed: the message names no file of the list.
	_, err := run("dev", fmt.Sprintf("{kubeconfig: %q}", filepath.Join(filepath.Dir(prod), "other.yaml")), true)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid {
		t.Fatalf("an unlisted kubeconfig: %v, want a 422", err)
	}
	for _, f := range me.Fields {
		if strings.Contains(f.Message, prod) {
			t.Errorf("the refusal of an unlisted file names prod's: %s", f.Message)
		}
	}
	// Allowed: a pattern's environment, the plain entry anywhere, and the
	// file an environment configuration names (the operator's choice).
	for _, ok := range []struct{ env, with string }{
		{"prod-eu", fmt.Sprintf("{kubeconfig: %q}", prod)},
		{"dev", fmt.Sprintf("{kubeconfig: %q}", dev)},
		{"dev", fmt.Sprintf("{kubeconfig: %q}", filepath.Join(filepath.Dir(prod), "shared.yaml"))},
	} {
		if _, err := run(ok.env, ok.with, true); err != nil {
			t.Errorf("%s with %s: %v, want admitted", ok.env, ok.with, err)
		}
	}
}

// The environment configuration's own kubeconfig is the operator's choice
// for that environment, whatever the server's list keeps it to; the config
// step checks again, so a deploy submitted while staging's configuration
// named prod's file is refused when it no longer does, before any manifest
// is applied.
func TestKubeconfigOperatorsChoiceCheckedAgainAtConfigStep(t *testing.T) {
	t.Parallel()
	ci, prod, _, run, envDir := kubeEnvServer(t, nil)
	writeEnvFile(t, envDir, "staging.yaml", fmt.Sprintf("target: {plugin: kubernetes, with: {kubeconfig: %q}}\n", prod))
	// The first deploy holds staging's queue until its gate opens; its
	// deploy step then fails on the absent file, which does not matter.
	first, gate := startGated(t, ci, func(art, gate string) string { return gatedDescriptor(art, "staging", gate) })
	id, err := run("staging", fmt.Sprintf("{kubeconfig: %q}", prod), false)
	if err != nil {
		t.Fatalf("staging repeating its configuration's kubeconfig: %v, want admitted", err)
	}
	writeEnvFile(t, envDir, "staging.yaml", "target: {plugin: kubernetes}\n")
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deployLog(t, ci, first)
	state, log := deployLog(t, ci, id)
	if state != manent.StateError {
		t.Fatalf("deploy %s, want ERROR:\n%s", state, log)
	}
	d, err := ci.Deployment(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var refused bool
	for _, s := range d.Steps {
		if s.Name == "config" {
			refused = strings.Contains(s.Error, "/target/with/kubeconfig") && strings.Contains(s.Error, "prod, prod-*")
			if s.Attempts > 1 {
				t.Errorf("config step tried %d times: a refusal is permanent", s.Attempts)
			}
		}
		if s.Name == "deploy" && s.Attempts > 0 {
			t.Errorf("deploy step ran (%s): it must not run with prod's kubeconfig", s.State)
		}
	}
	if !refused {
		t.Fatalf("the config step did not refuse prod's kubeconfig for staging: %+v\n%s", d.Steps, log)
	}
}
