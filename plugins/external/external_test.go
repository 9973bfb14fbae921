package external_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/external"
)

// pluginDir holds manent-plugin-example, built from plugins/example-external.
var pluginDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "manent-plugins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	pluginDir = dir
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "manent-plugin-example"),
		"github.com/manent-io/manent/plugins/example-external")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build the example plugin:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func example(t *testing.T) *external.Plugin {
	t.Helper()
	found, err := external.Discover([]string{pluginDir})
	if err != nil {
		t.Fatal(err)
	}
	p := found["example"]
	if p == nil {
		t.Fatalf("Discover found %v, no example", found)
	}
	return p
}

func pctx(dir, version string, log io.Writer, extra map[string]any) plugin.Context {
	with := map[string]any{"dir": dir}
	for k, v := range extra {
		with[k] = v
	}
	return plugin.Context{
		DeployID: "dpl_" + strings.ReplaceAll(version, ".", ""), Application: "billing", Environment: "prod",
		Version: version, WorkDir: dir, With: with, Log: log,
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func writeScript(t *testing.T, dir, name, body string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDiscover(t *testing.T) {
	first, second := t.TempDir(), t.TempDir()
	writeScript(t, first, "manent-plugin-alpha", "", 0o755)
	writeScript(t, first, "manent-plugin-noexec", "", 0o644)
	writeScript(t, first, "manent-plugin-Bad_Name", "", 0o755)
	writeScript(t, first, "other-tool", "", 0o755)
	if err := os.Mkdir(filepath.Join(first, "manent-plugin-adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeScript(t, second, "manent-plugin-alpha", "", 0o755) // shadowed by first
	beta := writeScript(t, second, "real-beta", "", 0o755)
	if err := os.Symlink(beta, filepath.Join(second, "manent-plugin-beta")); err != nil {
		t.Fatal(err)
	}
	got, err := external.Discover([]string{filepath.Join(first, "missing"), first, second})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for n, p := range got {
		names = append(names, n)
		if p.Name != n || !filepath.IsAbs(p.Path) {
			t.Errorf("%s: %+v", n, p)
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != "[alpha beta]" {
		t.Fatalf("Discover found %v, want [alpha beta]", names)
	}
	if got["alpha"].Path != filepath.Join(first, "manent-plugin-alpha") {
		t.Errorf("alpha is %s: the first directory must win", got["alpha"].Path)
	}
}

func TestRegister(t *testing.T) {
	reg := plugin.NewRegistry()
	if err := external.Register(reg, map[string]*external.Plugin{"example": example(t)}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Target("example"); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Runner("example"); err != nil {
		t.Fatal(err)
	}
	if err := external.Register(reg, map[string]*external.Plugin{"example": example(t)}); err == nil {
		t.Fatal("a second plugin of the same name registered")
	}
}

// A full release, its successor, and the successor rolled back, through
// plugin.Target as the engine drives it.
func TestLifecycle(t *testing.T) {
	var target plugin.Target = example(t)
	ctx := context.Background()
	dir := t.TempDir()
	var log bytes.Buffer

	if err := target.Validate(map[string]any{"dir": dir}); err != nil {
		t.Fatal(err)
	}
	err := target.Validate(map[string]any{"dir": "relative"})
	if err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Fatalf("Validate(relative) = %v", err)
	}

	v1 := pctx(dir, "1.0", &log, nil)
	cp, err := target.Live(ctx, v1)
	if err != nil || string(cp) != `{"release":""}` {
		t.Fatalf("Live before anything = %s, %v", cp, err)
	}
	for _, step := range []func(context.Context, plugin.Context) (plugin.Result, error){target.Deploy, target.Health, target.Activate} {
		if _, err := step(ctx, v1); err != nil {
			t.Fatal(err)
		}
	}
	if got := read(t, filepath.Join(dir, "current")); got != "1.0" {
		t.Fatalf("current = %s", got)
	}

	v2 := pctx(dir, "2.0", &log, nil)
	cp, err = target.Live(ctx, v2)
	if err != nil || string(cp) != `{"release":"1.0"}` {
		t.Fatalf("checkpoint = %s, %v", cp, err)
	}
	res, err := target.Deploy(ctx, v2)
	if err != nil || res["release"] != "2.0" {
		t.Fatalf("Deploy v2 = %v, %v", res, err)
	}
	if _, err := target.Activate(ctx, v2); err != nil {
		t.Fatal(err)
	}
	v2.Step = "rollback:activation"
	if _, err := target.RollbackActivation(ctx, v2, cp); err != nil {
		t.Fatal(err)
	}
	v2.Step = "rollback:deploy"
	if _, err := target.RollbackDeploy(ctx, v2, cp); err != nil {
		t.Fatal(err)
	}
	if got := read(t, filepath.Join(dir, "current")); got != "1.0" {
		t.Fatalf("current after rollback = %s, want 1.0", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "releases", "2.0")); !os.IsNotExist(err) {
		t.Fatalf("releases/2.0 still there: %v", err)
	}
	actions := strings.Fields(strings.ReplaceAll(read(t, filepath.Join(dir, "actions.log")), "\n", " | "))
	gotActions := []string{}
	for i, f := range actions {
		if i == 0 || actions[i-1] == "|" {
			gotActions = append(gotActions, f)
		}
	}
	want := "[live deploy health activate live deploy activate rollback:activation rollback:deploy]"
	if fmt.Sprint(gotActions) != want {
		t.Fatalf("actions = %v, want %s", gotActions, want)
	}
	if !strings.Contains(log.String(), "example: rollback:deploy for dpl_20\n") {
		t.Fatalf("stderr did not reach the deploy log: %q", log.String())
	}
}

func TestRun(t *testing.T) {
	var runner plugin.Runner = example(t)
	dir := t.TempDir()
	pc := pctx(dir, "1.0", io.Discard, nil)
	pc.Step = "smoke"
	res, err := runner.Run(context.Background(), pc)
	if err != nil {
		t.Fatal(err)
	}
	if res["marker"] != filepath.Join(dir, "ran-smoke") || read(t, filepath.Join(dir, "ran-smoke")) != "dpl_10" {
		t.Fatalf("Run = %v", res)
	}
}

func TestFailures(t *testing.T) {
	tests := []struct {
		name          string
		with          map[string]any
		timeout       time.Duration
		wantErr       string
		wantPermanent bool
	}{
		{"plugin says failed", map[string]any{"fail": "deploy"}, 0, "plugin example: deploy: deploy failed as asked", false},
		{"plugin says failed for good", map[string]any{"fail": "deploy", "permanent": true}, 0, "deploy failed as asked", true},
		{"exit without response", map[string]any{"crash": "deploy"}, 0, "exited with status 3 without a response", false},
		{"no answer in time", map[string]any{"hang": "deploy"}, 200 * time.Millisecond, "deploy timed out after 200ms", false},
		{"not JSON", map[string]any{"garbage": "deploy"}, 0, "stdout is not a JSON response", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := example(t)
			p.Timeout = tt.timeout
			var log bytes.Buffer
			start := time.Now()
			_, err := p.Deploy(context.Background(), pctx(t.TempDir(), "1.0", &log, tt.with))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Deploy error = %v, want one containing %q", err, tt.wantErr)
			}
			if got := plugin.IsPermanent(err); got != tt.wantPermanent {
				t.Fatalf("permanent = %v, want %v", got, tt.wantPermanent)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Fatalf("took %s", d)
			}
		})
	}
	// Killed by a signal: the signal is named, not "status -1".
	killedPath := writeScript(t, t.TempDir(), "manent-plugin-sig", "kill -KILL $$\n", 0o755)
	killedP := &external.Plugin{Name: "sig", Path: killedPath}
	if _, err := killedP.Deploy(context.Background(), pctx(t.TempDir(), "1.0", io.Discard, nil)); err == nil || !strings.Contains(err.Error(), "deploy was killed (signal: killed) without a response") {
		t.Fatalf("killed plugin: %v, want the signal named", err)
	}
	// A plugin that exits non-zero after printing something that is no
	// response: the error says what it printed (clipped, escaped), not
	// only "without a response".
	printedPath := writeScript(t, t.TempDir(), "manent-plugin-printed", `echo "Traceback: KeyError 'namespace'"; printf '\033[2J'; exit 1`+"\n", 0o755)
	printedP := &external.Plugin{Name: "printed", Path: printedPath}
	if _, err := printedP.Deploy(context.Background(), pctx(t.TempDir(), "1.0", io.Discard, nil)); err == nil ||
		!strings.Contains(err.Error(), "exited with status 1 without a response (stdout is not a JSON response") ||
		!strings.Contains(err.Error(), `stdout began "Traceback: KeyError 'namespace'\n\x1b[2J"`) {
		t.Fatalf("a plugin that printed no response: %v, want what it printed named", err)
	}
	// One JSON object and nothing else: a stray byte after it is refused,
	// not read as the response.
	strayPath := writeScript(t, t.TempDir(), "manent-plugin-stray", "echo '{\"ok\":true}}'\n", 0o755)
	strayP := &external.Plugin{Name: "stray", Path: strayPath}
	if _, err := strayP.Deploy(context.Background(), pctx(t.TempDir(), "1.0", io.Discard, nil)); err == nil || !strings.Contains(err.Error(), `"}" follows the response`) {
		t.Fatalf("a response with a stray byte after it: %v, want it refused", err)
	}
	missing := &external.Plugin{Name: "gone", Path: filepath.Join(t.TempDir(), "manent-plugin-gone")}
	if _, err := missing.Deploy(context.Background(), plugin.Context{}); !plugin.IsPermanent(err) {
		t.Fatalf("missing executable: %v, want a permanent error", err)
	}
}

// A refused validate may name the settings at fault: each becomes a
// plugin.SettingError (admission places it at /target/with/<path>), and
// the answer's error stays the message of one that names none.
func TestValidateNamesSettings(t *testing.T) {
	if err := example(t).Validate(map[string]any{"dir": "relative"}); err == nil {
		t.Fatal("a relative dir: accepted")
	} else if ses := plugin.SettingErrors(err); len(ses) != 1 || ses[0].Path != "dir" || ses[0].Error() != "with.dir must be an absolute path" {
		t.Fatalf("settings %+v of %v, want dir", ses, err)
	}
	path := writeScript(t, t.TempDir(), "manent-plugin-picky", `cat > /dev/null
echo '{"ok": false, "permanent": true, "error": "2 settings refused", "settings": [{"path": "/headers/X~1A", "error": "must be a string"}, {"path": "", "error": ""}]}'
`, 0o755)
	p := &external.Plugin{Name: "picky", Path: path}
	err := p.Validate(map[string]any{"headers": map[string]any{"X/A": 1}})
	ses := plugin.SettingErrors(err)
	if len(ses) != 2 || ses[0].Path != "headers/X~1A" || ses[0].Error() != "must be a string" || ses[1].Path != "" || ses[1].Error() != "2 settings refused" {
		t.Fatalf("settings %+v of %v: want headers/X~1A and the answer's error at with", ses, err)
	}
	if !plugin.IsPermanent(err) {
		t.Errorf("%v: want permanent, as answered", err)
	}
}

// The request on stdin, as a plugin sees it.
func TestRequest(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "request.json")
	path := writeScript(t, dir, "manent-plugin-dump", "cat > "+dump+"\necho '{\"ok\": true, \"output\": {\"n\": 1}}'\n", 0o755)
	p := &external.Plugin{Name: "dump", Path: path}
	pc := plugin.Context{
		DeployID: "dpl_1", Application: "billing", Environment: "prod", Version: "1.4.2", Step: "rollback:activation",
		WorkDir: dir, Artifact: dir + "/a.tgz", With: map[string]any{"k": "v"}, Parameters: map[string]any{"replicas": 3},
	}
	res, err := p.RollbackActivation(context.Background(), pc, json.RawMessage(`{"release":"1.4.1"}`))
	if err != nil || res["n"] != 1.0 {
		t.Fatalf("RollbackActivation = %v, %v", res, err)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(read(t, dump)), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"protocol": "manent.plugin/v1", "action": "rollback:activation",
		"context": map[string]any{
			"deploy_id": "dpl_1", "application": "billing", "environment": "prod", "version": "1.4.2",
			"step": "rollback:activation", "workdir": dir, "artifact": dir + "/a.tgz", "parameters": map[string]any{"replicas": 3.0},
		},
		"with":       map[string]any{"k": "v"},
		"checkpoint": map[string]any{"release": "1.4.1"},
	}
	if gj, wj := mustJSON(t, got), mustJSON(t, want); gj != wj {
		t.Fatalf("request\n got %s\nwant %s", gj, wj)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An external plugin receives the wave in its request's context
// (`rollout: {wave, index, targets, percent}`, absent outside a rollout),
// and honours percentages only when its validate answer declares
// capabilities.percentages.
func TestRolloutInRequest(t *testing.T) {
	dir := t.TempDir()
	writeScript(t, dir, "manent-plugin-canary", `req=$(cat)
echo "$req" >> "$(dirname "$0")/requests"
case "$req" in
  *'"action":"validate"'*'"caps":"yes"'*) echo '{"ok":true,"output":{"capabilities":{"percentages":true}}}';;
  *) echo '{"ok":true}';;
esac
`, 0o755)
	found, err := external.Discover([]string{dir})
	if err != nil || found["canary"] == nil {
		t.Fatalf("discover: %v %v", found, err)
	}
	p := found["canary"]
	ctx := context.Background()
	pc := plugin.Context{DeployID: "dpl_1", Step: "deploy[34%]", Wave: "34%", WaveIndex: 1, Percent: 34, With: map[string]any{}}
	if _, err := p.Deploy(ctx, pc); err != nil {
		t.Fatal(err)
	}
	pc = plugin.Context{DeployID: "dpl_1", Step: "deploy", With: map[string]any{}}
	if _, err := p.Deploy(ctx, pc); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(read(t, filepath.Join(dir, "requests")), "\n")
	if len(lines) != 2 {
		t.Fatalf("requests %q", lines)
	}
	var reqs [2]external.Request
	for i, l := range lines {
		if err := json.Unmarshal([]byte(l), &reqs[i]); err != nil {
			t.Fatalf("request %s: %v", l, err)
		}
	}
	if ro := reqs[0].Context.Rollout; ro == nil || ro.Wave != "34%" || ro.Index != 1 || ro.Percent != 34 || ro.Targets == nil {
		t.Errorf("request in a wave: rollout %+v, want {34%% 1 [] 34}", ro)
	}
	if !strings.Contains(lines[0], `"rollout":{"wave":"34%","index":1,"targets":[],"percent":34}`) {
		t.Errorf("request JSON %s", lines[0])
	}
	if reqs[1].Context.Rollout != nil || strings.Contains(lines[1], "rollout") {
		t.Errorf("request outside a rollout carries one: %s", lines[1])
	}

	if err := p.HonoursPercentages(map[string]any{"caps": "yes"}); err != nil {
		t.Errorf("a plugin declaring percentages: %v", err)
	}
	if err := p.HonoursPercentages(map[string]any{}); err == nil || !strings.Contains(err.Error(), `capability "percentages"`) {
		t.Errorf("a plugin declaring nothing: %v, want a refusal", err)
	}
}

// A flood of submissions naming a plugin whose validate hangs starts no
// more than MaxValidations of its processes at a time; each submission
// past them waits for a slot within the validate timeout, then is refused
// saying which plugin did not answer and what to do — as is one whose own
// validate does not answer in time (its process group killed).
func TestHungValidateIsBounded(t *testing.T) {
	dir := t.TempDir()
	// Each process, as it starts, notes how many of them are alive (itself
	// included): a killed one has been waited for before its slot frees.
	running, counts := filepath.Join(dir, "running"), filepath.Join(dir, "counts")
	if err := os.Mkdir(running, 0o755); err != nil {
		t.Fatal(err)
	}
	path := writeScript(t, dir, "manent-plugin-hung", "touch "+running+"/$$\nn=0\nfor f in "+running+"/*; do kill -0 \"${f##*/}\" 2>/dev/null && n=$((n+1)); done\necho $n >> "+counts+"\nexec sleep 60\n", 0o755)
	p := &external.Plugin{Name: "hung", Path: path, ValidateTimeout: 500 * time.Millisecond}
	const n = 3 * external.MaxValidations
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { errs[i] = p.Validate(map[string]any{}) })
	}
	wg.Wait()
	b, _ := os.ReadFile(counts)
	alive := strings.Fields(string(b))
	if len(alive) < external.MaxValidations {
		t.Errorf("%d validate processes started, want at least %d (the bound was not reached)", len(alive), external.MaxValidations)
	}
	for _, a := range alive {
		if n, _ := strconv.Atoi(a); n > external.MaxValidations {
			t.Errorf("%d validate processes ran at once, want at most %d (each one's count as it started: %v)", n, external.MaxValidations, alive)
			break
		}
	}
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "plugin hung") || !strings.Contains(err.Error(), "within 500ms") || !strings.Contains(err.Error(), "try again") {
			t.Errorf("validate %d: %v, want a refusal naming the plugin, the timeout and what to do", i, err)
		}
	}
}
