package server_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/plugins/local"
)

// The directory an environment configuration gives prod's local target
// is prod's from the start: with no descriptor policy written, a
// submitter allowed billing/dev naming it (or a directory inside it, or
// one holding it) in its descriptor is refused with a 422 at
// /target/with/dir saying whose it is — before, dev's deploy claimed it
// (.manent-owner) before prod's first deploy, and prod's deploys were then
// refused. prod still deploys there. An environment file added while the
// server runs counts too.
func TestConfiguredDirectoryIsItsEnvironments(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	prod, dev := filepath.Join(root, "prod"), filepath.Join(root, "dev")
	ci, _, envDir := credsServer(t, map[string]string{
		"prod.yaml": fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", prod),
		"dev.yaml":  fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", dev),
	}, func(c *node.Config) { c.Plugins.Local.Root = root })
	art := artifactFile(t)
	ctx := context.Background()
	desc := func(env, target string) []byte {
		return fmt.Appendf(nil, "apiVersion: manent/v1\napplication: billing\nenvironment: %s\nversion: \"1\"\nartifact: {url: %q}\n%s", env, art, target)
	}
	refused := func(t *testing.T, env, dir string, dry bool, says string) {
		t.Helper()
		res, err := ci.Submit(ctx, desc(env, fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", dir)), dry)
		if err == nil {
			if !dry {
				state, log := deployLog(t, ci, res.ID)
				t.Errorf("%s into %s: accepted and %s:\n%s", env, dir, state, log)
			}
			t.Fatalf("%s into %s (dry run %t): accepted, want a 422 at /target/with/dir", env, dir, dry)
		}
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/with/dir" ||
			!strings.Contains(me.Fields[0].Message, says) || !strings.Contains(me.Fields[0].Message, `environment "prod"`) {
			t.Fatalf("%s into %s (dry run %t): %v (%+v), want a 422 at /target/with/dir saying it %s prod's configured directory", env, dir, dry, err, me, says)
		}
	}
	for _, dry := range []bool{true, false} {
		refused(t, "dev", prod, dry, "is the directory")
		refused(t, "dev", filepath.Join(prod, "releases", "1"), dry, "is inside")
	}
	if _, err := os.Lstat(filepath.Join(prod, local.OwnerFile)); err == nil {
		t.Fatalf("dev's refused deploy claimed %s", prod)
	}
	res, err := ci.Submit(ctx, desc("prod", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if state, log := deployLog(t, ci, res.ID); state != manent.StateSuccess {
		t.Fatalf("prod's deploy into its own directory: %s\n%s", state, log)
	}
	if b, err := os.ReadFile(filepath.Join(prod, local.OwnerFile)); err != nil || !strings.Contains(string(b), `"environment":"prod"`) {
		t.Fatalf("prod's directory recorded %q (%v), want prod", b, err)
	}
	// dev's own directory, given by its configuration, still deploys.
	res, err = ci.Submit(ctx, desc("dev", ""), false)
	if err != nil {
		t.Fatal(err)
	}
	if state, log := deployLog(t, ci, res.ID); state != manent.StateSuccess {
		t.Fatalf("dev's deploy into its own directory: %s\n%s", state, log)
	}
	// An environment added while the server runs: its directory is its own
	// as soon as its file is there.
	writeEnvFile(t, envDir, "prod-eu.yaml", fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", filepath.Join(root, "prod-eu")))
	enginetest.Eventually(t, 30*time.Second, func() bool {
		_, err := ci.Submit(ctx, desc("dev", fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", filepath.Join(root, "prod-eu"))), true)
		var me *manent.Error
		return errorsAs(err, &me) && len(me.Fields) == 1 && me.Fields[0].Path == "/target/with/dir" && strings.Contains(me.Fields[0].Message, `environment "prod-eu"`)
	}, "dev's dry run into prod-eu's directory, added while the server runs, refused")
}

// A deploy admitted before the environment configuration gave its
// directory to another environment is refused at its config step, before
// anything is written there.
func TestConfiguredDirectoryCheckedAgainAtConfigStep(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	ci, _, envDir := credsServer(t, map[string]string{
		"dev.yaml": fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", filepath.Join(root, "dev")),
	}, func(c *node.Config) { c.Plugins.Local.Root = root })
	later := filepath.Join(root, "prod")
	first, gate := startGated(t, ci, func(art, gate string) string { return gatedDescriptor(art, "dev", gate) })
	res, err := ci.Submit(context.Background(), fmt.Appendf(nil, "apiVersion: manent/v1\napplication: billing\nenvironment: dev\nversion: \"2\"\nartifact: {url: %q}\ntarget: {plugin: local, with: {dir: %q}}\n", artifactFile(t), later), false)
	if err != nil {
		t.Fatalf("dev into a directory no configuration gives: %v, want admitted", err)
	}
	writeEnvFile(t, envDir, "prod.yaml", fmt.Sprintf("target: {plugin: local, with: {dir: %q}}\n", later))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	deployLog(t, ci, first)
	if state, log := deployLog(t, ci, res.ID); state != manent.StateError {
		t.Fatalf("deploy %s, want ERROR:\n%s", state, log)
	}
	d, err := ci.Deployment(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	var refused bool
	for _, s := range d.Steps {
		if s.Name == "config" {
			refused = strings.Contains(s.Error, "/target/with/dir") && strings.Contains(s.Error, `environment "prod"`)
		}
		if s.Name == "deploy" && s.Attempts > 0 {
			t.Errorf("deploy step ran (%s) in prod's directory", s.State)
		}
	}
	if !refused {
		t.Fatalf("the config step did not refuse prod's directory: %+v", d.Steps)
	}
	if _, err := os.Lstat(filepath.Join(later, local.OwnerFile)); err == nil {
		t.Errorf("dev's deploy claimed %s", later)
	}
}
