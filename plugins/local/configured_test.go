package local_test

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// The directories the environment configuration gives are their
// environments' before anything is on the disk: another environment's
// target directory equal to one, inside one or holding one at any depth
// is refused at admission, and at the checkpoint and the claim of a
// deploy admitted before the configuration gave it; the environment the
// directory is given to, and an application given it by its own file,
// deploy there.
func TestConfiguredDirectoriesAreTheirEnvironments(t *testing.T) {
	root := t.TempDir()
	srv := filepath.Join(root, "srv")
	prod := filepath.Join(srv, "prod")
	billing := filepath.Join(srv, "billing-prod")
	deep := filepath.Join(srv, "a", "b", "c", "d", "qa")
	shared := filepath.Join(srv, "shared")
	link := filepath.Join(root, "link")
	if err := os.MkdirAll(srv, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(srv, link); err != nil {
		t.Fatal(err)
	}
	var given *local.Configured
	p := local.New(local.Options{Root: root, Configured: func() *local.Configured { return given }})
	given = local.NewConfigured([]local.ConfiguredDir{
		{Dir: prod, Environment: "prod", File: "prod.yaml"},
		{Dir: billing, Application: "billing", Environment: "prod", File: "prod/billing.yaml"},
		{Dir: deep + "/", Environment: "qa", File: "qa.yaml"},
		{Dir: shared, Environment: "staging", File: "staging.yaml"},
		{Dir: shared, Environment: "demo", File: "demo.yaml"},
		{Dir: "relative", Environment: "dev", File: "dev.yaml"},
	})
	for _, c := range []struct {
		app, env, dir string
		says          string // "" when allowed
	}{
		{"billing", "dev", prod, `is the directory the environment configuration gives environment "prod" (every application; prod.yaml)`},
		{"billing", "dev", filepath.Join(prod, "releases", "1"), "is inside " + prod + ","},
		{"billing", "dev", filepath.Join(link, "prod"), `environment "prod"`},
		{"billing", "dev", srv, "holds "},
		{"billing", "dev", filepath.Join(srv, "a"), "holds " + deep + ","},
		{"shop", "prod", billing, `application "billing" environment "prod" (prod/billing.yaml)`},
		{"billing", "staging", filepath.Join(srv, "a", "b", "c"), `environment "qa"`},
		{"billing", "prod", prod, ""},
		{"shop", "prod", filepath.Join(prod, "x"), ""},
		{"billing", "prod", billing, ""},
		{"billing", "qa", deep, ""},
		{"billing", "staging", shared, ""},
		{"billing", "demo", shared, ""},
		{"billing", "dev", filepath.Join(srv, "dev"), ""},
		{"billing", "dev", filepath.Join(root, "relative"), ""},
	} {
		err := p.CheckOwner(c.app, c.env, map[string]any{"dir": c.dir}, nil)
		if c.says == "" {
			if err != nil {
				t.Errorf("%s/%s into %s: %v, want admitted", c.app, c.env, c.dir, err)
			}
			continue
		}
		var se *plugin.SettingError
		if !errors.As(err, &se) || se.Path != "dir" || !strings.Contains(err.Error(), c.says) || !strings.Contains(err.Error(), "deploy into a directory of its own") {
			t.Errorf("%s/%s into %s: %v, want a setting error at dir saying it %s", c.app, c.env, c.dir, err, c.says)
		}
	}
	// A rollout's targets' directories are under with.dir, which holds them.
	if err := p.CheckOwner("billing", "dev", map[string]any{"dir": srv + "/none"}, []string{"x"}); err != nil {
		t.Errorf("rollout beside the given directories: %v", err)
	}

	// A deploy admitted before the configuration gave its directory to
	// prod fails for good at its checkpoint, and at the claim when the
	// configuration gave it between the two.
	art := filepath.Join(t.TempDir(), "app-1.tar.gz")
	writeTarGz(t, art, map[string]string{"index.html": "v1"})
	later := filepath.Join(srv, "prod-eu")
	pc := plugin.Context{DeployID: "dpl_1", Application: "billing", Environment: "dev", Version: "1", Step: "deploy", Artifact: art, With: map[string]any{"dir": later}, Log: io.Discard}
	ctx := context.Background()
	if _, err := p.Live(ctx, pc); err != nil {
		t.Fatalf("checkpoint before the configuration gives it: %v", err)
	}
	given = local.NewConfigured([]local.ConfiguredDir{{Dir: later, Environment: "prod-eu", File: "prod-eu.yaml"}})
	if _, err := p.Live(ctx, pc); err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), `environment "prod-eu"`) {
		t.Errorf("checkpoint: %v, want a failure for good naming prod-eu", err)
	}
	if _, err := p.Deploy(ctx, pc); err == nil || !plugin.IsPermanent(err) || !strings.Contains(err.Error(), `environment "prod-eu"`) {
		t.Errorf("deploy: %v, want a failure for good naming prod-eu", err)
	}
	if _, err := os.Lstat(filepath.Join(later, local.OwnerFile)); err == nil {
		t.Errorf("billing/dev claimed %s", later)
	}
	pc.Environment, pc.DeployID = "prod-eu", "dpl_2"
	if _, err := p.Live(ctx, pc); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Deploy(ctx, pc); err != nil {
		t.Fatalf("prod-eu's deploy into its directory: %v", err)
	}
}
