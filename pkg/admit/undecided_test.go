package admit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/plugins/external"
)

// externalPlugins registers, as targets and step runners, one external
// plugin per name, each a shell script whose body answers the request on
// stdin; validate is bounded by timeout.
func externalPlugins(t *testing.T, timeout time.Duration, scripts map[string]string) *plugin.Registry {
	t.Helper()
	dir := t.TempDir()
	found := map[string]*external.Plugin{}
	for name, body := range scripts {
		path := filepath.Join(dir, external.Prefix+name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\ncat > /dev/null\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		found[name] = &external.Plugin{Name: name, Path: path, ValidateTimeout: timeout}
	}
	reg := plugin.NewRegistry()
	if err := external.Register(reg, found); err != nil {
		t.Fatal(err)
	}
	return reg
}

// A plugin whose validate gives no verdict — it does not answer in time,
// or crashes without a response — is the server's fault, not the
// descriptor's: the submission, the dry run and a schedule's tick answer a
// 503 with Retry-After naming the plugin, not a 422 (a CI job does not
// retry a 422), and the config step retries instead of failing the deploy
// for good. A plugin that answers "no" is still a 422 at the setting.
func TestUndecidedValidateIsNoRefusal(t *testing.T) {
	state := filepath.Join(t.TempDir(), "calls")
	reg := externalPlugins(t, 300*time.Millisecond, map[string]string{
		"hung":   "exec sleep 30\n",
		"crashy": "echo 'Traceback: boom' >&2\nexit 3\n",
		"picky":  `echo '{"ok": false, "error": "no", "settings": [{"path": "size", "error": "with.size is too big"}]}'` + "\n",
		// Answers the first validate (the submission), then crashes.
		"flaky": "if [ -e " + state + " ]; then exit 3; fi\ntouch " + state + "\necho '{\"ok\": true}'\n",
	})
	f := newAdmitter(t, admit.Config{Trial: true, Plugins: reg})
	ctx := context.Background()
	for _, c := range []struct{ name, extra, where string }{
		{"hung target", "target: {plugin: hung}\n", "/target/with: target hung: plugin hung: validate did not answer within 300ms"},
		{"crashing target", "target: {plugin: crashy}\n", "/target/with: target crashy: plugin crashy: validate exited with status 3 without a response"},
		{"crashing step", "steps:\n  - {name: smoke, after: deploy, plugin: crashy}\n", "/steps/0/with: step smoke: plugin crashy: validate exited with status 3"},
	} {
		for _, dry := range []bool{false, true} {
			_, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, c.extra), Identity: ci, DryRun: dry})
			var me *manent.Error
			if !errors.As(err, &me) || me.Code != manent.EUnavailable || me.RetryAfter <= 0 || len(me.Fields) != 0 ||
				!strings.Contains(me.Message, c.where) || !strings.Contains(me.Message, "nothing was stored") || !strings.Contains(me.Message, "manent-plugin-") {
				t.Errorf("%s (dry run %t): %v (%+v), want a 503 with Retry-After naming %q", c.name, dry, err, me, c.where)
			}
		}
	}
	// A schedule's tick: the reason recorded is no refusal of the deploy.
	sc := &store.Schedule{ID: "sch_1", Requester: "token:ci",
		Descriptor: []byte("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: \"1\"\nartifact: {url: " + f.art + "}\ntarget: {plugin: crashy}\n")}
	if _, err := f.a.Tick(ctx, sc, "sch_1@2026-12-06T00:00:00Z"); manent.ErrorCode(err) != manent.EUnavailable || strings.Contains(err.Error(), "refused") {
		t.Errorf("tick: %v, want the plugin's failure to decide, not a refusal", err)
	}
	// A verdict is a 422 at the setting.
	_, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, "target: {plugin: picky, with: {size: 9}}\n"), Identity: ci})
	if me := (*manent.Error)(nil); !errors.As(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/with/size" {
		t.Errorf("a refused setting: %v, want a 422 at /target/with/size", err)
	}
	// The config step: admitted, then the plugin crashes when asked again.
	adm, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, "target: {plugin: flaky}\n"), Identity: ci})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.a.Reconfigure(ctx, adm.Input)
	if err == nil || plugin.IsPermanent(err) || manent.ErrorCode(err) != manent.EUnavailable || !strings.Contains(err.Error(), "plugin flaky: validate exited with status 3") {
		t.Errorf("config step: %v (permanent %t), want a retried error naming the plugin", err, plugin.IsPermanent(err))
	}
}

// A percentage rollout on an external plugin runs its validate once per
// submission: the answer says both whether the settings are valid and
// whether it honours percentages. It ran twice (Validate, then
// HonoursPercentages), taking two of the plugin's validate slots.
func TestPercentagesValidateOnce(t *testing.T) {
	calls := filepath.Join(t.TempDir(), "calls")
	reg := externalPlugins(t, 5*time.Second, map[string]string{
		"canary": "echo validate >> " + calls + "\necho '{\"ok\": true, \"output\": {\"capabilities\": {\"percentages\": true}}}'\n",
	})
	f := newAdmitter(t, admit.Config{Trial: true, Plugins: reg})
	if _, err := f.a.Admit(context.Background(), admit.Request{Descriptor: f.descriptor(t, "target: {plugin: canary}\nrollout: {percentages: [10, 100]}\n"), Identity: ci}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(calls)
	if n := strings.Count(string(b), "validate"); err != nil || n != 1 {
		t.Fatalf("validate ran %d times (%v), want once", n, err)
	}
}

// A submission whose client leaves stops the validate it waits for: the
// request's context reaches the plugin's check (plugin.ContextValidator)
// of the target, of a percentage rollout's target and of a custom step,
// which ran on to its timeout (here 2 minutes) holding a slot.
func TestLeftSubmissionStopsTheValidate(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	reg := externalPlugins(t, 2*time.Minute, map[string]string{
		"hung": "touch " + started + "\nexec sleep 120\n",
	})
	f := newAdmitter(t, admit.Config{Trial: true, Plugins: reg, StepPlugins: []string{"hung"}})
	for _, c := range []struct{ name, extra string }{
		{"target", "target: {plugin: hung}\n"},
		{"percentages", "target: {plugin: hung}\nrollout: {percentages: [10, 100]}\n"},
		{"step", "steps:\n  - {name: smoke, after: deploy, plugin: hung}\n"},
	} {
		_ = os.Remove(started)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			// The client leaves once the plugin runs.
			defer cancel()
			deadline := time.Now().Add(time.Minute)
			for time.Now().Before(deadline) {
				if _, err := os.Stat(started); err == nil {
					return
				}
				time.Sleep(20 * time.Millisecond) // polling a condition
			}
		}()
		done := make(chan error, 1)
		go func() {
			_, err := f.a.Admit(ctx, admit.Request{Descriptor: f.descriptor(t, c.extra), Identity: ci})
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v, want the submission ended by its context", c.name, err)
			}
		case <-time.After(90 * time.Second):
			t.Fatalf("%s: the submission still waits for the validate 90s after its client left (its timeout is 2m)", c.name)
		}
		cancel()
	}
}
