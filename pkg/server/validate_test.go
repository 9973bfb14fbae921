package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/store"
)

// `manent validate` (the dry run) reports exactly what the run does
// (SPEC §11.2): in local trial mode the effective rollback policy and
// target of the dry run are those the config step records; an unknown
// target plugin is a 422 at validate time, not a failure in config.
func TestValidateMatchesTheRun(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	desc := simple(artifactFile(t), "staging", "1", "")

	dry, err := c.Submit(ctx, desc, true)
	if err != nil {
		t.Fatal(err)
	}
	var eff struct {
		Target   struct{ Plugin string } `json:"target"`
		Rollback struct {
			Enabled bool     `json:"enabled"`
			On      []string `json:"on"`
		} `json:"rollback"`
	}
	b, _ := json.Marshal(dry.Effective)
	if err := json.Unmarshal(b, &eff); err != nil {
		t.Fatal(err)
	}
	res, err := c.Submit(ctx, desc, false)
	if err != nil {
		t.Fatal(err)
	}
	d := waitFor(t, c, res.ID, manent.StateSuccess)
	var ran struct {
		Target   struct{ Plugin string } `json:"target"`
		Rollback struct {
			Enabled bool     `json:"enabled"`
			On      []string `json:"on"`
		} `json:"rollback"`
	}
	for _, s := range d.Steps {
		if s.Name == manent.StepConfig {
			if err := json.Unmarshal(s.Output, &ran); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !eff.Rollback.Enabled || eff.Target.Plugin != "local" {
		t.Fatalf("dry run: target %q rollback %+v, want local with rollback enabled (trial mode)", eff.Target.Plugin, eff.Rollback)
	}
	if ran.Rollback.Enabled != eff.Rollback.Enabled || ran.Target.Plugin != eff.Target.Plugin || len(ran.Rollback.On) != len(eff.Rollback.On) {
		t.Fatalf("the run used target %q rollback %+v; validate said target %q rollback %+v", ran.Target.Plugin, ran.Rollback, eff.Target.Plugin, eff.Rollback)
	}

	_, err = c.Submit(ctx, simple(artifactFile(t), "staging", "2", "target: {plugin: helm}\n"), true)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/plugin" {
		t.Fatalf("validate of an unknown target plugin: %v, want a 422 at /target/plugin", err)
	}
}

// Admission's refusals (plugins, their settings) point at the line and
// column of their path in the submitted text, as the parser's own errors
// do, for a dry run and a submit alike; a path the text does not hold
// keeps no position.
func TestRefusalsCarryPositions(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	desc := simple(artifactFile(t), "staging", "1", `steps:
  - name: smoke
    after: deploy
    plugin: script
    with: {command: [true]}
  - {name: other, after: deploy, plugin: nosuch}
`)
	// A plugin's setting is placed at its value (plugin.SettingError).
	want := map[string][2]int{
		"/steps/0/with/command/0": {10, 22},
		"/steps/1/plugin":         {11, 42},
	}
	for _, dry := range []bool{true, false} {
		_, err := c.Submit(ctx, desc, dry)
		var me *manent.Error
		if !errorsAs(err, &me) || me.Code != manent.EInvalid {
			t.Fatalf("dry run %v: %v, want a 422", dry, err)
		}
		got := map[string][2]int{}
		for _, f := range me.Fields {
			got[f.Path] = [2]int{f.Line, f.Column}
		}
		if len(got) != len(want) || got["/steps/0/with/command/0"] != want["/steps/0/with/command/0"] || got["/steps/1/plugin"] != want["/steps/1/plugin"] {
			t.Fatalf("dry run %v: fields %+v, want positions %v", dry, me.Fields, want)
		}
	}

	// Several bad settings of one plugin: each at its own value, one
	// message each, the plugin named once.
	_, err := c.Submit(ctx, simple(artifactFile(t), "staging", "3", `target:
  plugin: http
  with:
    deploy_url: "ftp://x"
    headers: {X-A: 1}
`), true)
	var me *manent.Error
	if !errorsAs(err, &me) {
		t.Fatalf("bad http settings: %v, want a 422", err)
	}
	got := map[string]string{}
	for _, f := range me.Fields {
		got[f.Path] = fmt.Sprintf("%d:%d %s", f.Line, f.Column, f.Message)
	}
	for path, line := range map[string]string{
		"/target/with/deploy_url":  `9:17 target http: with.deploy_url "ftp://x" must be an absolute http(s) URL`,
		"/target/with/headers/X-A": `10:20 target http: with.headers.X-A must be a string, got the number 1`,
	} {
		if got[path] != line {
			t.Errorf("%s: %q, want %q (all: %v)", path, got[path], line, got)
		}
	}

	// The target comes from the descriptor here: its plugin is located.
	_, err = c.Submit(ctx, simple(artifactFile(t), "staging", "2", "target: {plugin: helm}\n"), true)
	if !errorsAs(err, &me) || len(me.Fields) != 1 || me.Fields[0].Line != 6 || me.Fields[0].Column != 18 {
		t.Fatalf("unknown target plugin: %v %+v, want /target/plugin at 6:18", err, me)
	}
}

// A cancel lets the running step end (SPEC §5): until it does, status and
// activity say what the deploy still waits for and that it then ends
// CANCELLED, instead of a PENDING that gives no sign of the request; then
// its error names who cancelled it.
func TestCancelRequestedSaysWhatItWaitsFor(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	id, gate := startGated(t, c, gatedStaging)
	if d, err := c.Deployment(ctx, id); err != nil || d.Reason != "" {
		t.Fatalf("before the cancel: reason %q, %v; want none", d.Reason, err)
	}
	if _, err := c.Cancel(ctx, id); err != nil {
		t.Fatal(err)
	}
	want := "cancel requested: step gate ends first (a running step is never cut short), then the deploy ends CANCELLED"
	d, err := c.Deployment(ctx, id)
	if err != nil || d.State != manent.StatePending || d.Reason != want {
		t.Fatalf("status after the cancel: %s %q, %v; want PENDING %q", d.State, d.Reason, err, want)
	}
	act, err := c.Activity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range act.Environments {
		for _, it := range g.Items {
			if it.ID == id {
				found = it.Reason == want
			}
		}
	}
	if !found {
		t.Fatalf("activity %+v: want %s with reason %q", act, id, want)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Its error says who cancelled it, as a rejection's says who rejected.
	if d := waitFor(t, c, id, manent.StateCancelled); d.Reason != "" || d.Error != "cancelled by token:admin" {
		t.Errorf("once CANCELLED the reason is %q and the error %q, want none and %q", d.Reason, d.Error, "cancelled by token:admin")
	}
}

// A cancel during a deploy's last step has nothing left to stop: the
// answer to the cancel and status say that the deploy ends as the step
// does, not CANCELLED, and once it has ended SUCCESS its log says why the
// cancel did not apply.
func TestCancelDuringTheLastStep(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	ctx := context.Background()
	id, gate := startGated(t, c, func(art, gate string) string {
		return strings.Replace(gatedStaging(art, gate), "before: deploy", "after: activation", 1)
	})
	want := "cancel requested during the last step, gate: a running step is never cut short and no step is left to stop, so the deploy ends as gate does"
	d, err := c.Cancel(ctx, id)
	if err != nil || d.Reason != want {
		t.Fatalf("cancel answered %q, %v; want %q", d.Reason, err, want)
	}
	if d, err := c.Deployment(ctx, id); err != nil || d.Reason != want {
		t.Fatalf("status after the cancel: %q, %v; want %q", d.Reason, err, want)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, id, manent.StateSuccess)
	logs, err := c.Logs(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(logs.Lines); n == 0 || logs.Lines[n-1].Text != store.CancelTooLate {
		t.Fatalf("log %+v: want it to end with %q", logs.Lines, store.CancelTooLate)
	}
}

// A server whose plugins.http_allow is empty (local trial mode among them)
// refuses an http target at submission, saying why, rather than admitting a
// deploy whose every call would be refused at its deploy step.
func TestHTTPTargetRefusedWhenNothingIsAllowed(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	_, err := c.Submit(context.Background(), simple(artifactFile(t), "staging", "1", "target:\n  plugin: http\n  with: {deploy_url: \"https://platform.example/deploys\"}\n"), false)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid || len(me.Fields) != 1 || me.Fields[0].Path != "/target/with" ||
		!strings.Contains(me.Fields[0].Message, "plugins.http_allow is empty") {
		t.Fatalf("an http target on a server allowing no call: %v %+v, want a 422 at /target/with", err, me)
	}
}

// A step's settings are checked as its run reads them (SPEC §11.2): a
// timeout that is a number, not a duration, and a misspelt setting the run
// would ignore (leaving the 10-minute default) are each refused at their
// own place, the misspelling with the setting it resembles.
func TestValidateRefusesStepSettingsTheRunWouldMisread(t *testing.T) {
	t.Parallel()
	srv := newTestServer(t, enginetest.SQLite(t), nil, nil)
	c := api.NewClient(srv.URL, "admin-token", nil)
	desc := simple(artifactFile(t), "staging", "1", `steps:
  - name: slow
    after: deploy
    plugin: script
    with: {command: ["sh", "-c", "sleep 4"], timeout: 1, timout: 1s}
`)
	_, err := c.Submit(context.Background(), desc, true)
	var me *manent.Error
	if !errorsAs(err, &me) || me.Code != manent.EInvalid {
		t.Fatalf("dry run: %v, want a 422", err)
	}
	got := map[string]manent.FieldError{}
	for _, f := range me.Fields {
		got[f.Path] = f
	}
	for path, want := range map[string]string{
		"/steps/0/with/timeout": "step slow: script: with.timeout must be a duration such as 30s or 10m, with its unit, got the number 1",
		"/steps/0/with/timout":  `step slow: script: unknown setting with.timout (did you mean "timeout"? known: command, env, timeout)`,
	} {
		if f := got[path]; f.Message != want || f.Line != 10 || f.Column == 0 {
			t.Errorf("%s: %+v, want %q at line 10", path, f, want)
		}
	}
	if len(me.Fields) != 2 {
		t.Errorf("fields %+v, want the two above", me.Fields)
	}
}
