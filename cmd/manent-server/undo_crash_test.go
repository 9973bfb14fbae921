package main_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// The paths that undo and roll out, killed at chosen instants (the chaos
// harness kills plain deploys at random ones). Each case runs a rollout of
// two waves on the http target against a platform on loopback that
// records every call with its Idempotency-Key and holds one chosen action
// until the worker running it is SIGKILLed: on SQLite the server is then
// started again under another executor id (SQLite adoption); on
// PostgreSQL a second worker takes the deploy over once the first is
// silent past dead_after. After the deploy ends, every check is made:
//
//   - the action cut short is sent again with the same Idempotency-Key,
//     and no action that completed before the kill is sent again;
//   - every compensation runs once (the one cut short: again, to its
//     end), none is skipped;
//   - the deploy's state, rollback outcome, steps (none RUNNING) and waves
//     are true; the inventory and history name the release that runs;
//   - one `finished` callback (one webhook-id) per deploy, with its
//     final state.
func TestUndoPathsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts and kills the server (about 25 s)")
	}
	cases := []undoCase{{
		// A failed gate compensates both waves; the kill falls in the
		// compensation's first rollback of a deploy.
		name: "compensation of a failed gate", postgres: true, failGate: "health-gate[two]", hold: "rollback:deploy[two]",
		state: manent.StateError, rollback: manent.RollbackCompleted, waves: "one=rolled-back,two=rolled-back",
	}, {
		// A cancel while wave two waits for its approval compensates wave
		// one; the kill falls in that compensation.
		name: "compensation of a cancel between waves", approval: true, hold: "rollback:activation[one]",
		state: manent.StateCancelled, rollback: manent.RollbackCompleted, waves: "one=rolled-back,two=failed",
	}, {
		// A cancel while wave one's activation runs, rollback disabled:
		// the kill falls in that activation, which must still complete
		// (a running step is never cut short) — the release is then live
		// on wave one, and the inventory says so.
		name: "cancel during an activation, rollback disabled", postgres: true, noRollback: true, hold: "activation[one]", cancelHeld: true,
		state: manent.StateCancelled, waves: "one=failed,two=pending",
	}, {
		// `manent rollback` of a two-wave release, killed in its second
		// wave's activation.
		name: "manent rollback", ondemand: true, hold: "activation[two]",
		state: manent.StateSuccess, waves: "one=healthy,two=healthy",
	}}
	for _, c := range cases {
		t.Run("sqlite/"+c.name, func(t *testing.T) { undoCrash(t, enginetest.SQLite(t), 1, c) })
	}
	// A takeover on PostgreSQL waits out dead_after (about 10 s a case):
	// the default run takes two cases there, scripts/chaos.sh
	// (MANENT_CHAOS_KILLS set) every one.
	all := os.Getenv("MANENT_CHAOS_KILLS") != ""
	for _, c := range cases {
		if !all && !c.postgres {
			continue
		}
		t.Run("postgres/"+c.name, func(t *testing.T) { undoCrash(t, enginetest.Postgres(t), 2, c) })
	}
}

// undoCase is one kill of TestUndoPathsSurviveSIGKILL.
type undoCase struct {
	name     string
	failGate string // the health gate that fails
	approval bool   // wave two waits for an approval: the deploy is cancelled there
	ondemand bool   // the deploy killed is a `manent rollback` of the release before it
	hold     string // the step whose action call is cut by the kill
	// cancelHeld: the deploy is cancelled while hold runs, before the kill.
	cancelHeld bool
	noRollback bool // rollback disabled
	state      manent.State
	rollback   string
	waves      string // want: name=state,…
	postgres   bool   // run on PostgreSQL in the default test run too
}

// platform is a deploy platform on loopback: it records each call with its
// Idempotency-Key, answers every action 200, and, once armed, holds the
// action of step hold (once) until its caller is gone and fails the
// health gate failGate.
type platform struct {
	mu       sync.Mutex
	calls    []platformCall
	armed    bool
	earlier  map[string]bool // the deploys before it was armed: left alone
	hold     string
	reached  chan struct{}
	failGate string
}

type platformCall struct {
	method, path, deploy, step, key string
}

func newPlatform(hold, failGate string) *platform {
	return &platform{hold: hold, reached: make(chan struct{}), failGate: failGate, earlier: map[string]bool{}}
}

// arm makes the hold and the failing gate apply to the deploys after
// earlier.
func (p *platform) arm(earlier ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, id := range earlier {
		p.earlier[id] = true
	}
	p.armed = true
}

func (p *platform) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))
	key := r.Header.Get("Idempotency-Key")
	deploy, step, _ := strings.Cut(key, ":")
	p.mu.Lock()
	p.calls = append(p.calls, platformCall{r.Method, r.URL.Path, deploy, step, key})
	armed := p.armed && !p.earlier[deploy]
	failGate := armed && step == p.failGate
	held := armed && r.Method == http.MethodPost && step != "" && step == p.hold
	if held {
		p.hold = ""
		close(p.reached)
	}
	p.mu.Unlock()
	if held {
		<-r.Context().Done() // the worker that sent it was killed
		return
	}
	switch {
	case r.URL.Path == "/live":
		_, _ = io.WriteString(w, `{"release": "before"}`)
	case r.URL.Path == "/health" && failGate:
		http.Error(w, "unhealthy", http.StatusServiceUnavailable)
	default:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{}`)
	}
}

// posts counts the actions (POSTs) of deploy per step, and checks that
// every call of a step carried that step's key.
func (p *platform) posts(t *testing.T, deploy string) map[string]int {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for _, c := range p.calls {
		if c.deploy != deploy || c.method != http.MethodPost {
			continue
		}
		if c.key != deploy+":"+c.step {
			t.Errorf("call %s %s with Idempotency-Key %q", c.method, c.path, c.key)
		}
		out[c.step]++
	}
	return out
}

// fleet is the workers of one case: one server on SQLite, restarted under
// another executor id after each kill; two on PostgreSQL, the second
// started when the first is killed.
type fleet struct {
	t       *testing.T
	db, dir string
	cfg     string
	env     []string
	n       int
	live    *proc
	starts  int
}

func (f *fleet) start() *proc {
	f.starts++
	id := fmt.Sprintf("undo-%d", f.starts)
	env := append([]string{"MANENT_EXECUTOR_ID=" + id}, f.env...)
	if f.n > 1 {
		env = append(env, workerEnv...)
	}
	f.live = startArgs(f.t, []string{"--config", f.cfg}, filepath.Join(f.dir, id), f.db, env...)
	return f.live
}

// killAndGoOn SIGKILLs the live worker and gives the deploys to another:
// on SQLite the server started again (it adopts them at start); on
// PostgreSQL a second worker started before the kill, which takes them
// over once the first is dead.
func (f *fleet) killAndGoOn() {
	dead := f.live
	if f.n > 1 {
		f.start()
	}
	if err := dead.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		f.t.Fatal(err)
	}
	<-dead.done
	if f.n == 1 {
		f.start()
	}
}

func (f *fleet) logs() string {
	var b strings.Builder
	for i := 1; i <= f.starts; i++ {
		l, _ := os.ReadFile(filepath.Join(f.dir, fmt.Sprintf("undo-%d", i), "server.log"))
		b.Write(l)
	}
	return b.String()
}

func undoCrash(t *testing.T, db string, workers int, c undoCase) {
	dir := t.TempDir()
	plat := newPlatform(c.hold, c.failGate)
	platSrv := httptest.NewServer(plat)
	defer platSrv.Close()
	hooks := newHookCounter()
	hookSrv := httptest.NewServer(hooks)
	defer hookSrv.Close()
	cfg := filepath.Join(dir, "manent-server.yaml")
	if err := os.WriteFile(cfg, []byte(`artifacts: {sources: ["file:///**"]}
callbacks: {allow: ["http://127.0.0.1:*/**"], secret_env: UNDO_SECRET}
plugins: {http_allow: ["http://127.0.0.1:*/**"]}
workers: {retry_base: 50ms}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("undo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := &fleet{t: t, db: db, dir: dir, cfg: cfg, n: workers,
		env: []string{"UNDO_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}}
	f.start()
	ctx := context.Background()
	defer func() {
		if t.Failed() {
			t.Logf("server logs:\n%s", f.logs())
		}
	}()

	descriptor := func(version string, gate string) []byte {
		rollback := "{enabled: true, on: [deploy, post-test, activation]}"
		if c.noRollback {
			rollback = "{enabled: false}"
		}
		approval := ""
		if c.approval && version == "2" {
			approval = ", approval: true"
		}
		return []byte(fmt.Sprintf(`apiVersion: manent/v1
application: undo
environment: prod
version: "%s"
artifact: {url: "file://%s"}
target:
  plugin: http
  with: {deploy_url: "%[3]s/deploy", activate_url: "%[3]s/activate", rollback_url: "%[3]s/rollback", health_url: "%[3]s/health", live_url: "%[3]s/live"}
rollback: %s
max_retries: 0
callbacks: [{url: "%s/hook", events: [finished]}]
rollout:
  waves:
    - {name: one, targets: [eu-1]}
    - {name: two, targets: [eu-2]%s}
`, version, art, platSrv.URL, rollback, hookSrv.URL, approval))
	}
	submit := func(body []byte) string {
		t.Helper()
		res, err := f.live.client().Submit(ctx, body, false)
		if err != nil {
			t.Fatal(err)
		}
		return res.ID
	}
	final := func(id string) *manent.Deployment {
		t.Helper()
		return waitFinalLong(t, f.live.client(), id, 2*time.Minute)
	}

	// The release before: version 1, not killed.
	first := submit(descriptor("1", ""))
	if d := final(first); d.State != manent.StateSuccess {
		t.Fatalf("version 1 ended %s (%s)", d.State, d.Error)
	}
	second, id := "", ""
	if c.ondemand {
		second = submit(descriptor("2", ""))
		if d := final(second); d.State != manent.StateSuccess {
			t.Fatalf("version 2 ended %s (%s)", d.State, d.Error)
		}
		plat.arm(first, second)
		res, err := f.live.client().Rollback(ctx, "undo", "prod", api.RollbackRequest{})
		if err != nil {
			t.Fatal(err)
		}
		id = res.ID
	} else {
		plat.arm(first)
		id = submit(descriptor("2", c.failGate))
	}
	if c.approval {
		enginetest.Eventually(t, time.Minute, func() bool {
			d, err := f.live.client().Deployment(ctx, id)
			return err == nil && rolloutOf(d) == "one=healthy,two=awaiting-approval"
		}, "wave two to await its approval")
		if _, err := f.live.client().Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-plat.reached:
	case <-time.After(time.Minute):
		d, _ := f.live.client().Deployment(ctx, id)
		t.Fatalf("%s was never called: the deploy is %+v", c.hold, d)
	}
	if c.cancelHeld {
		if _, err := f.live.client().Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// Before the deploy goes on elsewhere: what it has sent so far.
	before := plat.posts(t, id)
	f.killAndGoOn()
	d := final(id)

	// The deploy's ending, its steps and its waves.
	if d.State != c.state || d.Rollback != c.rollback {
		t.Errorf("ended %s with rollback %q (%s), want %s with rollback %q", d.State, d.Rollback, d.Error, c.state, c.rollback)
	}
	if c.noRollback && c.state == manent.StateCancelled && !strings.Contains(d.Error, "the release stays live on the waves activated before the cancel") {
		t.Errorf("error %q does not say the release stays live", d.Error)
	}
	if got := rolloutOf(d); got != c.waves {
		t.Errorf("waves %s, want %s", got, c.waves)
	}
	for _, s := range d.Steps {
		if s.State == manent.StepRunning {
			t.Errorf("step %s still RUNNING in a %s deploy", s.Name, d.State)
		}
		if s.Name == c.hold && s.State != manent.StepSuccess {
			t.Errorf("step %s, cut by the kill, ended %s (%s)", s.Name, s.State, s.Error)
		}
	}
	// The platform: the action cut short sent again, with its key, to its
	// end; none that completed before sent again; every one in its order.
	after := plat.posts(t, id)
	if after[c.hold] != 2 {
		t.Errorf("%s sent %d times, want 2 (cut by the kill, then again)", c.hold, after[c.hold])
	}
	for step, n := range after {
		if step != c.hold && n != 1 {
			t.Errorf("%s sent %d times, want once (%d before the kill)", step, n, before[step])
		}
	}
	want := map[string]bool{}
	for _, s := range wantActions(c) {
		want[s] = true
		if after[s] == 0 {
			t.Errorf("%s never sent: a compensation or an action skipped (sent: %v)", s, after)
		}
	}
	for s := range after {
		if !want[s] {
			t.Errorf("%s sent, not expected (sent: %v)", s, after)
		}
	}

	// The release that runs, as the inventory and history tell it.
	live := first // a compensated version 2 leaves version 1
	if c.state == manent.StateSuccess || c.noRollback {
		live = id
	}
	h, err := f.live.client().History(ctx, "undo", "prod", 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if h.Current == nil || h.Current.DeploymentID != live {
		t.Errorf("current release %+v, want deploy %s", h.Current, live)
	}
	for _, it := range h.Items {
		if it.Current != (it.ID == live) {
			t.Errorf("history marks %s (%s) current=%v, want the current one %s", it.ID, it.State, it.Current, live)
		}
		if it.ID == id && c.ondemand && it.RollbackOf != second {
			t.Errorf("history: rollback %s rollback_of %q, want %s", id, it.RollbackOf, second)
		}
	}
	inv, err := f.live.client().Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range inv.Items {
		if it.Application == "undo" && (it.Current == nil || it.Current.DeploymentID != live) {
			t.Errorf("inventory: current %+v, want deploy %s", it.Current, live)
		}
	}

	// One `finished` per deploy, with its state.
	ids := []string{first, id}
	if second != "" {
		ids = append(ids, second)
	}
	enginetest.Eventually(t, time.Minute, func() bool { return hooks.announced(len(ids)) }, "every deploy's finished callback")
	for _, x := range ids {
		if n := hooks.finishedIDs(x); n != 1 {
			t.Errorf("deploy %s announced with %d webhook-ids, want 1", x, n)
		}
	}
	if got := hooks.stateOf(id); got != string(c.state) {
		t.Errorf("finished callback of %s says %q, want %s", id, got, c.state)
	}
}

// wantActions is every action the platform must have received for the
// deploy of case c, whatever the kill.
func wantActions(c undoCase) []string {
	var out []string
	waves := []string{"one", "two"}
	if c.approval {
		waves = waves[:1]
	}
	for _, w := range waves {
		out = append(out, "deploy["+w+"]", "activation["+w+"]")
	}
	switch {
	case c.failGate != "":
		out = append(out, "rollback:activation[two]", "rollback:deploy[two]", "rollback:activation[one]", "rollback:deploy[one]")
	case c.approval:
		out = append(out, "rollback:activation[one]", "rollback:deploy[one]")
	case c.cancelHeld:
		out = out[:2] // cancelled after wave one's activation
	}
	return out
}

// rolloutOf is a deploy's waves as name=state,….
func rolloutOf(d *manent.Deployment) string {
	var out []string
	for _, w := range d.Rollout {
		out = append(out, w.Name+"="+w.State)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
