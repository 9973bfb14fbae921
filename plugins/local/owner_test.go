package local_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// Two environments (or applications) whose with.dir is one directory
// would overwrite each other's releases and `current`, one deploy at a
// time each: the first to deploy there owns it, and the other's deploy
// fails for good at its first action, saying who owns the directory.
func TestDirectoryBelongsToOneEnvironment(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	art := filepath.Join(dir, "app-1.tar.gz")
	writeTarGz(t, art, map[string]string{"index.html": "v1"})
	p := local.New(local.Options{})
	ctx := context.Background()
	pc := func(app, env, id string) plugin.Context {
		return plugin.Context{DeployID: id, Application: app, Environment: env, Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard}
	}
	if _, err := p.Deploy(ctx, pc("shop", "prod", "dpl_1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Activate(ctx, pc("shop", "prod", "dpl_1")); err != nil {
		t.Fatal(err)
	}
	// The owner deploys again.
	if _, err := p.Live(ctx, pc("shop", "prod", "dpl_2")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Deploy(ctx, pc("shop", "prod", "dpl_2")); err != nil {
		t.Fatal(err)
	}
	for _, other := range []plugin.Context{pc("shop", "staging", "dpl_3"), pc("blog", "prod", "dpl_4")} {
		for name, action := range map[string]func() error{
			"live":     func() error { _, err := p.Live(ctx, other); return err },
			"deploy":   func() error { _, err := p.Deploy(ctx, other); return err },
			"activate": func() error { _, err := p.Activate(ctx, other); return err },
			"rollback": func() error { _, err := p.RollbackActivation(ctx, other, nil); return err },
		} {
			err := action()
			if err == nil {
				t.Fatalf("%s/%s %s in the directory of shop/prod", other.Application, other.Environment, name)
			}
			if !plugin.IsPermanent(err) || !strings.Contains(err.Error(), `application "shop" environment "prod"`) || !strings.Contains(err.Error(), ".manent-owner") {
				t.Errorf("%s: %v, want a permanent error naming shop/prod and the owner file", name, err)
			}
		}
	}
	if cur, _ := os.Readlink(filepath.Join(target, "current")); cur != filepath.Join("releases", "1") {
		t.Errorf("current -> %q, want releases/1", cur)
	}
}

// Two first deploys of two environments into one new directory: one owns
// it, the other is refused.
func TestOneOfTwoFirstDeploysOwnsTheDirectory(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	art := filepath.Join(dir, "app-1.tar.gz")
	writeTarGz(t, art, map[string]string{"index.html": "v1"})
	p := local.New(local.Options{})
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, env := range []string{"a", "b"} {
		wg.Go(func() {
			_, errs[i] = p.Deploy(context.Background(), plugin.Context{DeployID: "dpl_" + env, Application: "shop", Environment: env, Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": target}, Log: io.Discard})
		})
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("errors %v, want exactly one deploy refused", errs)
	}
}

// A `current` that is no link (a directory or a file someone put there)
// cannot be switched: the deploy fails for good saying so, at its
// checkpoint, instead of retrying a read or a rename that cannot work.
func TestCurrentThatIsNoLinkFailsForGood(t *testing.T) {
	for _, kind := range []string{"directory", "file"} {
		dir := t.TempDir()
		target := filepath.Join(dir, "target")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		cur := filepath.Join(target, "current")
		var err error
		if kind == "directory" {
			err = os.MkdirAll(filepath.Join(cur, "www"), 0o755)
		} else {
			err = os.WriteFile(cur, []byte("x"), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
		p := local.New(local.Options{})
		_, err = p.Live(context.Background(), plugin.Context{DeployID: "dpl_1", Application: "shop", Environment: "prod", Version: "1", With: map[string]any{"dir": target}, Log: io.Discard})
		if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), cur+" is a "+kind) {
			t.Errorf("%s: live: %v, want a permanent error saying current is a %s", kind, err, kind)
		}
	}
}

// A first deploy killed while it records the owner of its directory
// leaves one of these on disk; the next deploy of the environment claims
// the directory, removes what the killed claim left, and goes on.
func TestKilledClaimDoesNotBlockTheDirectory(t *testing.T) {
	record := `{"application":"shop","environment":"prod"}` + "\n"
	for _, c := range []struct {
		name  string
		files map[string]string // under the target directory
	}{
		{"record created, not written (an earlier manent)", map[string]string{".manent-owner": ""}},
		{"temporary created, not written", map[string]string{".manent-owner.claim-1": ""}},
		{"temporary half written", map[string]string{".manent-owner.claim-1": `{"applic`}},
		{"temporary written, not linked", map[string]string{".manent-owner.claim-1": record}},
		{"linked, temporary not removed", map[string]string{".manent-owner.claim-1": record, ".manent-owner": record}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target")
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, content := range c.files {
				if err := os.WriteFile(filepath.Join(target, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			art := filepath.Join(dir, "app-1.tar.gz")
			writeTarGz(t, art, map[string]string{"index.html": "v1"})
			p := local.New(local.Options{})
			with := map[string]any{"dir": target}
			if err := p.CheckOwner("shop", "prod", with, nil); err != nil {
				t.Fatalf("admission: %v", err)
			}
			pc := plugin.Context{DeployID: "dpl_1", Application: "shop", Environment: "prod", Version: "1", Step: "deploy", Artifact: art, With: with, Log: io.Discard}
			if _, err := p.Live(context.Background(), pc); err != nil {
				t.Fatalf("checkpoint: %v", err)
			}
			if _, err := p.Deploy(context.Background(), pc); err != nil {
				t.Fatalf("deploy: %v", err)
			}
			if b, err := os.ReadFile(filepath.Join(target, ".manent-owner")); err != nil || string(b) != record {
				t.Errorf(".manent-owner reads %q (%v), want %q", b, err, record)
			}
			left, _ := filepath.Glob(filepath.Join(target, ".manent-owner.*"))
			if len(left) > 0 {
				t.Errorf("left after the deploy: %v", left)
			}
			// And the directory is shop/prod's.
			if err := p.CheckOwner("shop", "staging", with, nil); err == nil {
				t.Error("shop/staging admitted into the directory of shop/prod")
			}
		})
	}
}

// The checkpoint of a rollout checks the directory of every target, so a
// target another environment owns fails the deploy before its first wave
// deploys anything, not when its own wave comes.
func TestRolloutCheckpointChecksEveryTargetsDirectory(t *testing.T) {
	target := filepath.Join(t.TempDir(), "target")
	if err := os.MkdirAll(filepath.Join(target, "us-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "us-1", local.OwnerFile), []byte(`{"application":"shop","environment":"staging"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	p := local.New(local.Options{})
	_, err := p.Live(context.Background(), plugin.Context{DeployID: "dpl_1", Application: "shop", Environment: "prod", Version: "1", Targets: []string{"eu-1", "us-1"}, Wave: "all", With: map[string]any{"dir": target}, Log: io.Discard})
	if err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), "rollout target us-1") || !strings.Contains(err.Error(), `environment "staging"`) {
		t.Fatalf("checkpoint: %v, want a permanent error naming the target us-1 and shop/staging", err)
	}
}
