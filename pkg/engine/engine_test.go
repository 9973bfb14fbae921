package engine_test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/admit"
	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plan"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/pkg/store"
	"github.com/manent-io/manent/plugins/builtin"
)

type fixture struct {
	t       *testing.T
	cfg     *node.Config
	node    *node.Node
	eng     *engine.Engine
	st      *store.Store
	dir     string // scratch dir: artifacts, targets, scripts
	targets string
	log     *slog.Logger // the node's logger (nil: discarded)
}

// A test that mostly waits (timers, queue polls, takeovers) calls
// t.Parallel() when it touches no process-wide state: no engine.Set* hook,
// no SetReadFault (faultOnce, faultN, faultFor), no t.Setenv (hookReceiver,
// callbackRetentionFixture), no SecretReadTimeout; each fixture has its own
// temp dir and its own database (enginetest.SQLite, enginetest.Postgres).
// Parallel tests run once the serial ones are done, so a serial test's hook
// never reaches them. Tests with a narrow wall-clock window (a freeze rung a
// few seconds ahead, a cancel between two attempts 3 s apart, heartbeat
// and cut-off timing) stay serial.
//
// newFixture runs a real server node — a trial-mode configuration with fast
// retries, built by pkg/node as the binary builds it — on dbURL, without
// HTTP: tests submit through admission (f.submit) and drive the engine.
// The identity token:test may do everything.
func newFixture(t *testing.T, dbURL string, slots int, opts ...func(*node.Config)) *fixture {
	t.Helper()
	dir := t.TempDir()
	cfg := servertest.Config(dir)
	cfg.Database, cfg.ExecutorID, cfg.Workers.Slots = dbURL, "test", slots
	// The approvers the tests name are tokens of the server, allowed to
	// approve: an approval counts only while its token is (LapsedApprover).
	cfg.RBAC = []auth.RBACRule{{Subjects: []string{"token:test"}, Permissions: []string{string(auth.Admin)}},
		{Subjects: []string{"token:*"}, Permissions: []string{string(auth.DeploymentApprove)}}}
	cfg.Auth.Tokens = []auth.TokenConfig{{Name: "test", SHA256: auth.HashToken("test-secret")}}
	for _, n := range []string{"alice", "bob", "ops", "lead", "dev"} {
		groups := []string{"sre"}
		if n == "dev" {
			groups = []string{"dev"}
		}
		cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{Name: n, SHA256: auth.HashToken(n + "-secret"), Groups: groups})
	}
	for _, o := range opts {
		o(cfg)
	}
	f := &fixture{t: t, cfg: cfg, dir: dir, targets: filepath.Join(cfg.DataDir, "targets")}
	f.open()
	t.Cleanup(func() { f.node.Close(5 * time.Second) })
	return f
}

func (f *fixture) open() {
	f.t.Helper()
	ctx := context.Background()
	n, err := node.Open(ctx, f.cfg, node.Options{Plugins: builtin.Register, Logger: f.log})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := n.Launch(ctx); err != nil {
		f.t.Fatal(err)
	}
	f.node, f.eng, f.st = n, n.Engine, n.Store
}

// restart stops the node and starts a new one on the same database with
// the same executor id, as a restarted server would.
func (f *fixture) restart() {
	f.t.Helper()
	f.node.Close(5 * time.Second)
	f.open()
}

// artifact writes a .tar.gz holding index.html with content and returns its
// file:// URL and sha256.
func (f *fixture) artifact(name, content string) (string, string) {
	f.t.Helper()
	p := filepath.Join(f.dir, name+".tar.gz")
	out, err := os.Create(p)
	if err != nil {
		f.t.Fatal(err)
	}
	gz := gzip.NewWriter(out)
	tw := tar.NewWriter(gz)
	_ = tw.WriteHeader(&tar.Header{Name: "index.html", Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg})
	_, _ = tw.Write([]byte(content))
	_ = tw.Close()
	_ = gz.Close()
	_ = out.Close()
	b, _ := os.ReadFile(p)
	sum := sha256.Sum256(b)
	return "file://" + p, hex.EncodeToString(sum[:])
}

// submit parses yml, plans it and submits it with the local target.
func (f *fixture) submit(yml string, opts ...func(*plan.Input)) string {
	f.t.Helper()
	return f.submitWith(yml, nil, opts...)
}

// submitWith submits yml through admission (SPEC §3 checks 2–6, as
// token:test); opts then change the admitted input (waits a test wants
// without a governance policy). A non-nil pipeline replaces the plan.
func (f *fixture) submitWith(yml string, pipeline []string, opts ...func(*plan.Input)) string {
	f.t.Helper()
	d, err := descriptor.Parse([]byte(yml))
	if err != nil {
		f.t.Fatalf("descriptor: %v\n%s", err, yml)
	}
	adm, err := f.node.Admitter.Admit(context.Background(), admit.Request{Descriptor: d, Identity: manent.Identity{Subject: "token:test"}})
	if err != nil {
		f.t.Fatalf("admission: %v", err)
	}
	in := adm.Input
	if pipeline != nil {
		if in.Plan, err = plan.Build(d, pipeline); err != nil {
			f.t.Fatal(err)
		}
	}
	for _, o := range opts {
		o(&in)
	}
	rec, err := f.eng.Submit(context.Background(), in, adm.Decision)
	if err != nil {
		f.t.Fatal(err)
	}
	if want := manent.StateEnqueued; in.Waits.Empty() && rec.State != want {
		f.t.Fatalf("state after submit = %s, want %s", rec.State, want)
	}
	return rec.ID
}

func (f *fixture) wait(id string, timeout time.Duration) *store.Record {
	f.t.Helper()
	var rec *store.Record
	enginetest.Eventually(f.t, timeout, func() bool {
		r, err := f.eng.Refresh(context.Background(), id)
		if err != nil {
			f.t.Fatal(err)
		}
		rec = r
		return r.State.Final()
	}, "deploy %s to end", id)
	return rec
}

func step(t *testing.T, rec *store.Record, name string) manent.Step {
	t.Helper()
	for _, s := range rec.Steps {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("deploy %s has no step %q (steps %v)", rec.ID, name, rec.Steps)
	return manent.Step{}
}

func descriptorYAML(app, env, version, url, sha string, extra string) string {
	s := fmt.Sprintf("apiVersion: manent/v1\napplication: %s\nenvironment: %s\nversion: %q\nartifact:\n  url: %s\n", app, env, version, url)
	if sha != "" {
		s += "  sha256: " + sha + "\n"
	}
	return s + extra
}

func TestHappyPath(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, sum := f.artifact("app-1", "version one")
		id := f.submit(descriptorYAML("billing", "staging", "1.0", url, sum, ""))
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateSuccess {
			t.Fatalf("state = %s (%s), want SUCCESS", rec.State, rec.Error)
		}
		want := []string{"config", "notify:started", "secrets", "artifacts", "qa", "checkpoint:deploy", "deploy", "post-test", "checkpoint:activation", "activation", "cleanup"}
		var got []string
		for _, s := range rec.Steps {
			got = append(got, s.Name)
			if s.State != manent.StepSuccess || s.Attempts != 1 {
				t.Errorf("step %s: state %s attempts %d, want SUCCESS 1", s.Name, s.State, s.Attempts)
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("steps = %v, want %v", got, want)
		}
		if rec.ArtifactSHA256 != sum {
			t.Errorf("sha256 = %q, want %q", rec.ArtifactSHA256, sum)
		}
		cur := filepath.Join(f.targets, "billing", "staging", "current")
		b, err := os.ReadFile(filepath.Join(cur, "index.html"))
		if err != nil || string(b) != "version one" {
			t.Fatalf("current/index.html = %q, %v", b, err)
		}
		inv, err := f.st.Inventory(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(inv) != 1 || inv[0].Current == nil || inv[0].Current.Version != "1.0" || inv[0].Current.DeploymentID != id {
			t.Fatalf("inventory = %+v", inv)
		}
		if _, err := os.Stat(f.eng.WorkDir(id)); !os.IsNotExist(err) {
			t.Errorf("work dir not removed by cleanup: %v", err)
		}
		logs, _ := f.st.Logs(context.Background(), id, 0, 0)
		if len(logs) == 0 {
			t.Error("no log lines recorded")
		}
		var config []string
		for _, l := range logs {
			if l.Step == "config" {
				config = append(config, l.Text)
			}
		}
		if want := "configuration: none (no environment configuration provider): target local, 6 plan steps"; !slices.Contains(config, want) {
			t.Errorf("config step logs %q, want the line %q", config, want)
		}
	})
}

func TestSHA256MismatchIsPermanent(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, sum := f.artifact("app-1", "x")
		wrong := strings.Repeat("ab", 32)
		id := f.submit(descriptorYAML("billing", "staging", "1.0", url, wrong, "max_retries: 3\n"))
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateError {
			t.Fatalf("state = %s, want ERROR", rec.State)
		}
		s := step(t, rec, "artifacts")
		if s.Attempts != 1 {
			t.Errorf("artifacts attempts = %d, want 1 (permanent)", s.Attempts)
		}
		for _, want := range []string{`step "artifacts" failed`, wrong, sum} {
			if !strings.Contains(rec.Error, want) {
				t.Errorf("error %q does not name %q", rec.Error, want)
			}
		}
		if st := step(t, rec, "deploy").State; st != manent.StepSkipped {
			t.Errorf("deploy step = %s, want SKIPPED", st)
		}
		inv, _ := f.st.Inventory(context.Background())
		if len(inv) != 1 || inv[0].LastFailure == nil || inv[0].Current != nil {
			t.Fatalf("inventory = %+v, want a last failure and no current", inv)
		}
	})
}

func TestRetries(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("app", "x")
		counter := filepath.Join(f.dir, "count")
		// Fails on its first two runs, succeeds on the third.
		flaky := fmt.Sprintf(`n=$(cat %[1]s 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s; [ $n -ge 3 ]`, counter)
		id := f.submit(descriptorYAML("shop", "qa", "2", url, "", fmt.Sprintf(`steps:
  - name: flaky
    before: deploy
    plugin: script
    max_retries: 3
    with: {command: ["sh", "-c", %q]}
`, flaky)))
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateSuccess {
			t.Fatalf("state = %s (%s), want SUCCESS", rec.State, rec.Error)
		}
		if a := step(t, rec, "flaky").Attempts; a != 3 {
			t.Fatalf("flaky attempts = %d, want 3", a)
		}

		// A missing command is permanent: one attempt, ERROR.
		id = f.submit(descriptorYAML("shop", "qa", "3", url, "", `steps:
  - name: broken
    after: qa
    plugin: script
    max_retries: 3
    with: {command: ["/nonexistent/command"]}
`))
		rec = f.wait(id, 30*time.Second)
		if rec.State != manent.StateError {
			t.Fatalf("state = %s, want ERROR", rec.State)
		}
		if a := step(t, rec, "broken").Attempts; a != 1 {
			t.Fatalf("broken attempts = %d, want 1", a)
		}
		if !strings.HasPrefix(rec.Error, `step "broken" failed: `) {
			t.Fatalf("error = %q", rec.Error)
		}
	})
}

// slowStep is a custom step that records its start, then runs for d.
func slowStep(name, marker string, d time.Duration) string {
	return fmt.Sprintf(`  - name: %s
    before: deploy
    plugin: script
    max_retries: 0
    with: {command: ["sh", "-c", "date +%%s%%N > %s.$MANENT_DEPLOY_ID; sleep %.2f"]}
`, name, marker, d.Seconds())
}

func TestSerialisationPerEnvironment(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 6)
		url, _ := f.artifact("app", "x")
		var ids []string
		envOf := map[string]string{}
		for i := 0; i < 5; i++ {
			id := f.submit(descriptorYAML("api", "prod", fmt.Sprint(i), url, "", "steps:\n"+slowStep("slow", filepath.Join(f.dir, "m"), 300*time.Millisecond)))
			ids = append(ids, id)
			envOf[id] = "prod"
		}
		for i := 0; i < 5; i++ {
			env := fmt.Sprintf("env-%d", i)
			id := f.submit(descriptorYAML("api", env, "1", url, "", "steps:\n"+slowStep("slow", filepath.Join(f.dir, "m"), 300*time.Millisecond)))
			ids = append(ids, id)
			envOf[id] = env
		}
		type span struct {
			id         string
			start, end time.Time
		}
		var spans []span
		for _, id := range ids {
			rec := f.wait(id, 60*time.Second)
			if rec.State != manent.StateSuccess {
				t.Fatalf("%s: %s (%s)", id, rec.State, rec.Error)
			}
			first, last := step(t, rec, "config"), step(t, rec, "cleanup")
			spans = append(spans, span{id, *first.StartedAt, *last.FinishedAt})
		}
		// Never two deploys of one application/environment at once.
		byEnv := map[string][]span{}
		for _, s := range spans {
			byEnv[envOf[s.id]] = append(byEnv[envOf[s.id]], s)
		}
		prod := byEnv["prod"]
		sort.Slice(prod, func(i, j int) bool { return prod[i].start.Before(prod[j].start) })
		for i := 1; i < len(prod); i++ {
			if prod[i].start.Before(prod[i-1].end) {
				t.Fatalf("two prod deploys overlapped: %s [%s–%s] and %s [%s–%s]", prod[i-1].id,
					prod[i-1].start.Format(time.StampMicro), prod[i-1].end.Format(time.StampMicro),
					prod[i].id, prod[i].start.Format(time.StampMicro), prod[i].end.Format(time.StampMicro))
			}
		}
		// Other environments ran in parallel with something.
		overlaps := 0
		for i := range spans {
			for j := i + 1; j < len(spans); j++ {
				if envOf[spans[i].id] != envOf[spans[j].id] && spans[i].start.Before(spans[j].end) && spans[j].start.Before(spans[i].end) {
					overlaps++
				}
			}
		}
		if overlaps == 0 {
			t.Fatal("no two deploys of different environments overlapped")
		}
	})
}

func TestCancelRunningStopsAtNextStep(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("app", "x")
		started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
		// The step signals that it runs, then waits (bounded) for the test.
		wait := fmt.Sprintf(`touch %s; i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`, started, release)
		id := f.submit(descriptorYAML("web", "prod", "1", url, "", fmt.Sprintf(`steps:
  - name: gate
    before: deploy
    plugin: script
    with: {command: ["sh", "-c", %q]}
`, wait)))
		enginetest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "gate step to start")
		rec, err := f.eng.Cancel(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != manent.StatePending {
			t.Fatalf("state right after cancel = %s, want PENDING (the step completes)", rec.State)
		}
		if err := os.WriteFile(release, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		rec = f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled {
			t.Fatalf("state = %s, want CANCELLED", rec.State)
		}
		if s := step(t, rec, "gate"); s.State != manent.StepSuccess {
			t.Errorf("gate = %s, want SUCCESS (the running step completes)", s.State)
		}
		for _, n := range []string{"deploy", "post-test", "activation"} {
			if s := step(t, rec, n); s.State != manent.StepSkipped || s.StartedAt != nil {
				t.Errorf("%s = %s started %v, want SKIPPED and never started", n, s.State, s.StartedAt)
			}
		}
		if _, err := os.Stat(filepath.Join(f.targets, "web", "prod", "releases")); !os.IsNotExist(err) {
			t.Errorf("the target was written after cancel: %v", err)
		}
	})
}

// A cancel does not wait for a download: the artifacts step writes nothing
// outside the deploy's work directory, so the cancel cuts it (a source
// that stalls would otherwise hold the worker slot until
// artifacts.idle_timeout, here an hour). The step is recorded ERROR, the
// deploy ends CANCELLED, the source sees the request go.
func TestCancelCutsARunningDownload(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2, func(c *node.Config) { c.Artifacts.IdleTimeout = time.Hour })
		asked, gone := make(chan struct{}, 1), make(chan struct{}, 1)
		src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte("x"))
			w.(http.Flusher).Flush()
			asked <- struct{}{}
			select {
			case <-r.Context().Done():
				gone <- struct{}{}
			case <-time.After(time.Minute):
			}
		}))
		defer src.Close()
		id := f.submit(descriptorYAML("web", "prod", "1", src.URL+"/app.tar.gz", "", ""))
		select {
		case <-asked:
		case <-time.After(30 * time.Second):
			t.Fatal("the download did not start within 30s")
		}
		if _, err := f.eng.Cancel(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		rec := f.wait(id, 30*time.Second)
		if rec.State != manent.StateCancelled {
			t.Fatalf("state = %s (%s), want CANCELLED", rec.State, rec.Error)
		}
		if s := step(t, rec, "artifacts"); s.State != manent.StepError || !strings.Contains(s.Error, "the deploy was cancelled") || s.Attempts != 1 {
			t.Errorf("artifacts = %s %q after %d attempts, want ERROR \"stopped: the deploy was cancelled\" once", s.State, s.Error, s.Attempts)
		}
		select {
		case <-gone:
		case <-time.After(30 * time.Second):
			t.Fatal("the source still serves the download")
		}
		for _, n := range []string{"qa", "deploy"} {
			if s := step(t, rec, n); s.State != manent.StepSkipped {
				t.Errorf("%s = %s, want SKIPPED", n, s.State)
			}
		}
	})
}

func TestCancelQueuedIsImmediate(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 2)
		url, _ := f.artifact("app", "x")
		started, release := filepath.Join(f.dir, "started"), filepath.Join(f.dir, "release")
		wait := fmt.Sprintf(`touch %s; i=0; while [ ! -e %s ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done`, started, release)
		first := f.submit(descriptorYAML("web", "prod", "1", url, "", fmt.Sprintf("steps:\n  - {name: gate, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n", wait)))
		enginetest.Eventually(t, 30*time.Second, func() bool { _, err := os.Stat(started); return err == nil }, "first deploy to run")
		second := f.submit(descriptorYAML("web", "prod", "2", url, "", ""))
		rec, err := f.eng.Cancel(context.Background(), second)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State != manent.StateCancelled {
			t.Fatalf("queued deploy after cancel = %s, want CANCELLED at once", rec.State)
		}
		if _, err := f.eng.Cancel(context.Background(), second); manent.ErrorCode(err) != manent.EConflict {
			t.Fatalf("second cancel: %v, want a conflict", err)
		}
		_ = os.WriteFile(release, nil, 0o644)
		if r := f.wait(first, 30*time.Second); r.State != manent.StateSuccess {
			t.Fatalf("first = %s (%s)", r.State, r.Error)
		}
		rec = f.wait(second, 5*time.Second)
		for _, s := range rec.Steps {
			if s.StartedAt != nil {
				t.Errorf("cancelled queued deploy ran step %s", s.Name)
			}
		}
	})
}

// A step whose command floods its output (a loop printing lines, a binary
// file printed without a newline) keeps a bounded log: MaxStepLogLines
// lines at most, each cut at MaxLogLine, and a last line saying how much
// was left out. The deploy itself succeeds.
func TestStepOutputFloodIsBounded(t *testing.T) {
	f := newFixture(t, enginetest.SQLite(t), 1)
	url, _ := f.artifact("app-1", "x")
	flood := fmt.Sprintf(`i=0; while [ $i -lt %d ]; do echo "line $i"; i=$((i+1)); done`, engine.MaxStepLogLines+500)
	id := f.submit(descriptorYAML("billing", "staging", "1", url, "", fmt.Sprintf(`steps:
  - {name: lines, after: deploy, plugin: script, with: {command: [sh, -c, %q]}}
  - {name: blob, after: lines, plugin: script, with: {command: [sh, -c, "head -c 3000000 /dev/zero | tr '\\0' a"]}}
`, flood)))
	if rec := f.wait(id, 2*time.Minute); rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s), want SUCCESS", rec.State, rec.Error)
	}
	logs, err := f.st.Logs(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lines, blob []string
	for _, l := range logs {
		switch l.Step {
		case "lines":
			lines = append(lines, l.Text)
		case "blob":
			blob = append(blob, l.Text)
			if len(l.Text) > engine.MaxLogLine+100 {
				t.Fatalf("blob: a line of %d bytes kept", len(l.Text))
			}
		}
	}
	if len(lines) != engine.MaxStepLogLines+2 {
		t.Fatalf("lines: %d log lines, want %d and two notices", len(lines), engine.MaxStepLogLines)
	}
	if end := lines[len(lines)-1]; !strings.HasPrefix(end, "… 500 more lines (") {
		t.Fatalf("lines: last line %q", end)
	}
	// 3,000,000 bytes without a newline: one line, cut to MaxLogLine (the
	// script plugin hands it on in pieces, which the log joins).
	if len(blob) != 1 || !strings.Contains(blob[0], " … [line cut: 3000000 bytes") {
		t.Fatalf("blob: %d lines, first %q", len(blob), blob[0][max(0, len(blob[0])-60):])
	}
}

// A custom step's output is kept up to engine.MaxStepOutput: a larger one
// (an external plugin may answer 4 MiB) is replaced by a note of its size,
// the log says so, and the step and the deploy keep their outcome.
func TestLargeStepOutputNotKept(t *testing.T) {
	bin := t.TempDir()
	// An external plugin that answers a 1.5 MiB output (validate: ok).
	script := `#!/bin/sh
req=$(cat)
case "$req" in *'"action":"validate"'*|*'"action": "validate"'*) echo '{"ok": true}'; exit 0;; esac
printf '{"ok": true, "output": {"blob": "'
head -c 1572864 /dev/zero | tr '\0' x
printf '"}}\n'
`
	if err := os.WriteFile(filepath.Join(bin, "manent-plugin-big"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, enginetest.SQLite(t), 1, func(c *node.Config) { c.Plugins.Path = []string{bin} })
	url, _ := f.artifact("app-1", "x")
	id := f.submit(descriptorYAML("billing", "staging", "1", url, "", `steps:
  - {name: big, after: deploy, plugin: big}
  - {name: small, after: big, plugin: script, with: {command: [sh, -c, "true"]}}
`))
	rec := f.wait(id, time.Minute)
	if rec.State != manent.StateSuccess {
		t.Fatalf("state %s (%s), want SUCCESS", rec.State, rec.Error)
	}
	big := step(t, rec, "big")
	if big.State != manent.StepSuccess || len(big.Output) > 1024 || !strings.Contains(string(big.Output), `"output_not_kept":"1572875 bytes: more than 1048576 bytes for one step"`) {
		t.Fatalf("step big: %s, output %.200s", big.State, big.Output)
	}
	if small := step(t, rec, "small"); !strings.Contains(string(small.Output), "exit_code") {
		t.Fatalf("step small: output %s, want its own", small.Output)
	}
	logs, err := f.st.Logs(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, l := range logs {
		found = found || (l.Step == "big" && strings.HasPrefix(l.Text, "manent: this step's output (1572875 bytes) is not kept"))
	}
	if !found {
		t.Fatalf("no log line of step big says its output was not kept: %+v", logs)
	}
}

// workers.slots bounds the deploys one worker runs at once, over every
// environment: deploys submitted back to back (each enqueue wakes the
// queue) never run two at a time on a one-slot worker. DBOS counted a
// started workflow as running only once its goroutine ran, so the next
// poll could claim one more.
func TestSlotsBoundTheDeploysRunningAtOnce(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, db string) {
		f := newFixture(t, db, 1)
		url, _ := f.artifact("v1", "x")
		lock, overlap := filepath.Join(f.dir, "running"), filepath.Join(f.dir, "overlap")
		// mkdir is atomic: it fails when another deploy's step holds the lock.
		step := fmt.Sprintf(`steps:
  - {name: hold, after: qa, plugin: script, with: {command: [sh, -c, "mkdir %s || echo overlap >> %s; sleep 0.2; rmdir %s"]}}
`, lock, overlap, lock)
		var ids []string
		for i := range 6 {
			ids = append(ids, f.submit(descriptorYAML("shop", fmt.Sprintf("env-%d", i), "1", url, "", step)))
		}
		for _, id := range ids {
			if rec := f.wait(id, 60*time.Second); rec.State != manent.StateSuccess {
				t.Fatalf("deploy %s: %s (%s)", id, rec.State, rec.Error)
			}
		}
		if b, err := os.ReadFile(overlap); err == nil {
			t.Fatalf("a one-slot worker ran deploys at once: %d overlaps", strings.Count(string(b), "overlap"))
		}
	})
}
