package local_test

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/local"
)

// The process running a step is killed (kill -9) in the middle of it:
// while it unpacks, between the new link and the rename of activation, and
// the same in its rollback. `current` still points at a whole release, and
// the step run again (the engine's retry after a restart) or compensated
// finishes the job; the next deploy removes what the killed one left.
func TestKilledStepIsRetriedOrCompensated(t *testing.T) {
	if os.Getenv("MANENT_LOCAL_CRASH") != "" {
		t.Skip("the child")
	}
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		setup  []string // actions run before the child's: deploy:V, activate:V
		child  string   // the action killed
		after  []string // actions run once it is killed
		before string   // current's release once killed
		want   string   // and at the end
	}{
		{name: "claim of the directory, retried", child: "deploy:1", after: []string{"deploy:1", "activate:1"}, before: "", want: "1"},
		{name: "unpack, retried", setup: []string{"deploy:1", "activate:1"}, child: "deploy:2", after: []string{"deploy:2", "activate:2"}, before: "1", want: "2"},
		{name: "unpack, compensated", setup: []string{"deploy:1", "activate:1"}, child: "deploy:2", after: []string{"rollback-deploy:2", "deploy:3", "activate:3"}, before: "1", want: "3"},
		{name: "activation, retried", setup: []string{"deploy:1", "activate:1", "deploy:2"}, child: "activate:2", after: []string{"activate:2"}, before: "1", want: "2"},
		{name: "activation, compensated", setup: []string{"deploy:1", "activate:1", "deploy:2"}, child: "activate:2", after: []string{"rollback-activate:2", "rollback-deploy:2"}, before: "1", want: "1"},
		{name: "keep_releases prune, retried", setup: []string{"deploy:1", "activate:1", "deploy:2", "activate:2"}, child: "keep-deploy:3", after: []string{"keep-deploy:3", "activate:3"}, before: "2", want: "3"},
		{name: "rollback, retried", setup: []string{"deploy:1", "activate:1", "deploy:2", "activate:2"}, child: "rollback-activate:2", after: []string{"rollback-activate:2", "rollback-deploy:2"}, before: "2", want: "1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "target")
			for _, v := range []string{"1", "2", "3"} {
				writeTarGz(t, filepath.Join(dir, "app-"+v+".tar.gz"), map[string]string{"index.html": "v" + v, "static/app.js": "js" + v})
			}
			p := local.New(local.Options{})
			for _, a := range c.setup {
				if err := crashAction(ctx, p, dir, a); err != nil {
					t.Fatalf("%s: %v", a, err)
				}
			}

			ready := filepath.Join(dir, "ready")
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v")
			cmd.Env = append(os.Environ(), "MANENT_LOCAL_CRASH="+c.child, "MANENT_LOCAL_CRASH_DIR="+dir)
			cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
			// It waits to be killed: with the test binary too, however
			// that dies.
			child, err := childproc.Start(cmd)
			if err != nil {
				t.Fatal(err)
			}
			done := child.Done()
			deadline := time.After(30 * time.Second)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
		wait:
			for {
				select {
				case <-tick.C:
					if _, err := os.Stat(ready); err == nil {
						break wait
					}
				case <-done:
					t.Fatalf("the child ended before the crash point: %v", child.Err())
				case <-deadline:
					_ = cmd.Process.Kill()
					t.Fatal("the child did not reach the crash point in 30s")
				}
			}
			if err := cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-done

			if c.before == "" {
				if _, err := os.Lstat(filepath.Join(target, "current")); err == nil {
					t.Error("once killed: current exists, want none")
				}
			} else {
				checkCurrent(t, target, c.before, "once killed")
			}
			// Every release under its name is whole.
			killed, _ := os.ReadDir(filepath.Join(target, "releases"))
			for _, e := range killed {
				if strings.HasPrefix(e.Name(), ".") {
					continue
				}
				for _, f := range []string{"index.html", "static/app.js"} {
					if _, err := os.Stat(filepath.Join(target, "releases", e.Name(), f)); err != nil {
						t.Errorf("once killed: releases/%s is partial: %v", e.Name(), err)
					}
				}
			}
			for _, a := range c.after {
				if err := crashAction(ctx, p, dir, a); err != nil {
					t.Fatalf("%s after the kill: %v", a, err)
				}
			}
			checkCurrent(t, target, c.want, "at the end")
			entries, _ := os.ReadDir(filepath.Join(target, "releases"))
			for _, e := range entries {
				if strings.HasPrefix(e.Name(), ".") {
					t.Errorf("releases/%s is left at the end", e.Name())
				}
			}
			if _, err := os.Lstat(filepath.Join(target, ".current-tmp")); err == nil {
				t.Errorf(".current-tmp is left at the end")
			}
			if left, _ := filepath.Glob(filepath.Join(target, ".manent-owner.*")); len(left) > 0 {
				t.Errorf("%v left at the end", left)
			}
		})
	}
}

// checkCurrent requires `current` to point at a whole release of version v.
func checkCurrent(t *testing.T, target, v, when string) {
	t.Helper()
	for _, f := range []string{"index.html", "static/app.js"} {
		b, err := os.ReadFile(filepath.Join(target, "current", f))
		want := map[string]string{"index.html": "v" + v, "static/app.js": "js" + v}[f]
		if err != nil || string(b) != want {
			t.Errorf("%s: current/%s reads %q (%v), want %q", when, f, b, err, want)
		}
	}
}

// crashAction runs "deploy:V", "keep-deploy:V" (with keep_releases 2),
// "activate:V", "rollback-activate:V" (back to the release before V) or
// "rollback-deploy:V", as the deploy of V.
func crashAction(ctx context.Context, p *local.Plugin, dir, action string) error {
	verb, v, _ := strings.Cut(action, ":")
	prev := map[string]string{"2": "1", "3": "1"}[v]
	pc := plugin.Context{DeployID: "dpl_" + v, Application: "shop", Environment: "prod", Version: v, Step: verb, Artifact: filepath.Join(dir, "app-"+v+".tar.gz"), With: map[string]any{"dir": filepath.Join(dir, "target")}, Log: io.Discard}
	cp, _ := json.Marshal(local.Checkpoint{Release: prev})
	var err error
	switch verb {
	case "deploy":
		_, err = p.Deploy(ctx, pc)
	case "keep-deploy":
		pc.With["keep_releases"] = 2
		_, err = p.Deploy(ctx, pc)
	case "activate":
		_, err = p.Activate(ctx, pc)
	case "rollback-activate":
		_, err = p.RollbackActivation(ctx, pc, cp)
	case "rollback-deploy":
		_, err = p.RollbackDeploy(ctx, pc, cp)
	}
	return err
}

// TestCrashChild is the process TestKilledStepIsRetriedOrCompensated
// kills: it runs one action and stops for good at its crash point — the
// flush of the written, not yet linked record of the directory's owner, a
// flush inside the release being unpacked, the flush of releases/ once
// keep_releases moved a release aside, or the flush of the target
// directory once the new link is made and before it is renamed over
// `current` — after saying so in <dir>/ready.
func TestCrashChild(t *testing.T) {
	action, dir := os.Getenv("MANENT_LOCAL_CRASH"), os.Getenv("MANENT_LOCAL_CRASH_DIR")
	if action == "" {
		t.Skip("run by TestKilledStepIsRetriedOrCompensated")
	}
	target := filepath.Join(dir, "target")
	p := local.New(local.Options{})
	local.SetSync(p, func(path string) error {
		var here bool
		if strings.HasPrefix(action, "keep-") {
			// Once a release is moved aside, before it is removed.
			pruned, _ := filepath.Glob(filepath.Join(target, "releases", ".pruned-*"))
			here = path == filepath.Join(target, "releases") && len(pruned) > 0
		} else {
			_, linked := os.Lstat(filepath.Join(target, ".current-tmp"))
			here = strings.HasPrefix(filepath.Base(path), local.OwnerFile+".claim-") ||
				strings.Contains(path, string(filepath.Separator)+".tmp-") || path == target && linked == nil
		}
		if here {
			if err := os.WriteFile(filepath.Join(dir, "ready"), nil, 0o644); err != nil {
				t.Error(err)
			}
			select {} // killed here
		}
		return nil
	})
	if err := crashAction(context.Background(), p, dir, action); err != nil {
		t.Fatal(err)
	}
	t.Fatal("the action ended without reaching its crash point")
}
