package main_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// The chaos harness (issue "crashes tell the truth"): the real
// manent-server runs N deploys over M environments whose steps take 0.2–2 s
// while the test SIGKILLs it at random instants K times and restarts it,
// then checks the invariants:
//
//  1. every accepted deploy ends in a final state, and a submission retried
//     with its Idempotency-Key across kills is one deploy;
//  2. no step's command runs twice at once: each attempt takes a lock that
//     names its pid, and finds any earlier attempt of the step dead;
//  3. no two deploys of one environment overlap: neither their steps'
//     processes nor their started..finished intervals;
//  4. each environment's live release (the local target's `current`) is its
//     last SUCCESS, and the inventory says the same;
//  5. every final deploy is announced exactly once (one `finished`
//     webhook-id per deploy, however often it was retried);
//  6. a deploy whose check after activation fails (about one in five) ends
//     ERROR with both rollback steps done, whenever the kills fell, and no
//     final deploy leaves a step RUNNING.
//
// It runs on SQLite — one server; every other restart uses another
// executor id, as a server restarted without its --executor-id does, so
// the deploys the killed one ran are then taken over at start (SQLite
// adoption), not resumed under the same id — and on PostgreSQL: three
// workers, a killed one down past dead_after while the others take its
// deploys over, with steps longer than dead_after, so that a step whose
// processes outlived their worker would run twice at once (its lifeline
// stops them). Every other fault on PostgreSQL is a pause (SIGSTOP, up to
// twice dead_after) instead of a kill: past its cut-off the paused
// worker's lifeline must stop its steps' processes before the others run
// them again, and the resumed worker stops and is started again.
//
// The default test run has the short version (30 deploys, 5 kills);
// scripts/chaos.sh runs the long one (200 deploys, 20 kills) and prints
// the figures. MANENT_CHAOS_SEED replays a run.
func TestChaos(t *testing.T) {
	t.Parallel()
	// The default run is the short one (30 deploys, 5 kills, ~40 s);
	// scripts/chaos.sh runs the long one (200 deploys, 20 kills).
	if testing.Short() {
		t.Skip("the chaos harness starts and kills the server for about 40 s")
	}
	t.Run("sqlite", func(t *testing.T) { chaos(t, enginetest.SQLite(t), 1) })
	// Three workers on one PostgreSQL: each kill takes one down (and
	// starts it again); the others take its deploys over after dead_after,
	// and its lifeline stops its steps' processes meanwhile.
	t.Run("postgres", func(t *testing.T) { chaos(t, enginetest.Postgres(t), 3) })
}

// chaos runs the harness against workers manent-servers on db.
func chaos(t *testing.T, db string, workers int) {
	deploys := envInt(t, "MANENT_CHAOS_DEPLOYS", 30)
	kills := envInt(t, "MANENT_CHAOS_KILLS", 5)
	envs := envInt(t, "MANENT_CHAOS_ENVIRONMENTS", 6)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("MANENT_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seed = s
	}
	t.Logf("chaos: %d deploys over %d environments, %d kills, seed %d", deploys, envs, kills, seed)
	rng := rand.New(rand.NewPCG(seed, seed))      // the kills
	subRng := rand.New(rand.NewPCG(seed, seed+1)) // the submissions (their own goroutine)

	dir := t.TempDir()
	targets := filepath.Join(dir, "targets")
	markers := filepath.Join(dir, "markers")
	if err := os.MkdirAll(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	hooks := newHookCounter()
	recv := httptest.NewServer(hooks)
	defer recv.Close()
	cfgPath := filepath.Join(dir, "manent-server.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`artifacts: {sources: ["file:///**"]}
callbacks: {allow: ["http://127.0.0.1:*/**"], secret_env: CHAOS_SECRET}
plugins: {steps: [script], local: {root: %q}}
workers: {slots: 4, max_recovery_attempts: 50, retry_base: 50ms}
`, targets)), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := []string{"CHAOS_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))}
	// The data directory and environment of worker w's k-th start. One
	// server on SQLite: every other start takes another executor id, as a
	// server restarted without its --executor-id does. Several workers on
	// PostgreSQL: each keeps its id, as a supervisor restarts it.
	dataOf := func(w int) string { return filepath.Join(dir, fmt.Sprintf("data-%d", w)) }
	env := func(w, k int) []string {
		if workers == 1 {
			return append([]string{fmt.Sprintf("MANENT_EXECUTOR_ID=chaos-worker-%d", k%2)}, secret...)
		}
		// Fast heartbeats: a killed worker's deploys are taken over
		// within seconds.
		return append(append([]string{fmt.Sprintf("MANENT_EXECUTOR_ID=chaos-w%d", w)}, secret...), workerEnv...)
	}
	// How long a step takes at most: on PostgreSQL longer than dead_after,
	// so that a killed worker's step would still run when another worker
	// takes it over, were its processes not stopped (its lifeline).
	longest := 2.0
	if workers > 1 {
		longest = 2 * testDeadAfter.Seconds()
	}
	serverLogs := func() []byte {
		var all []byte
		for w := 0; w < workers; w++ {
			b, _ := os.ReadFile(filepath.Join(dataOf(w), "server.log"))
			all = append(all, b...)
		}
		return all
	}
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("chaos\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	guard := filepath.Join(dir, "guard.sh")
	if err := os.WriteFile(guard, []byte(chaosGuard), 0o755); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	ps := make([]*proc, workers)
	for w := range ps {
		ps[w] = startArgs(t, []string{"--config", cfgPath}, dataOf(w), db, env(w, 0)...)
	}
	// restart starts worker w again (its k-th start), as its supervisor
	// would; worker returns it as it is now.
	restart := func(w, k int) {
		np := startArgs(t, []string{"--config", cfgPath}, dataOf(w), db, env(w, k)...)
		mu.Lock()
		ps[w] = np
		mu.Unlock()
	}
	worker := func(w int) *proc {
		mu.Lock()
		defer mu.Unlock()
		return ps[w]
	}
	next := 0
	// current is a worker to talk to, each in turn.
	current := func() *proc {
		mu.Lock()
		defer mu.Unlock()
		next++
		return ps[next%workers]
	}

	// Submit every deploy, each with its own Idempotency-Key, retrying
	// through the kills until it is accepted.
	type accepted struct {
		key, id, env string
		fails        bool // its verify step fails: it must end ERROR, rolled back
	}
	var acc []accepted
	var accMu sync.Mutex
	submitted := make(chan struct{})
	go func() {
		defer close(submitted)
		for i := 0; i < deploys; i++ {
			e := fmt.Sprintf("env-%d", i%envs)
			key := fmt.Sprintf("chaos-%d", i)
			body, fails := chaosDescriptor(art, e, i, guard, markers, filepath.Join(targets, "chaos", e), recv.URL, longest, subRng)
			deadline := time.Now().Add(3 * time.Minute)
			for time.Now().Before(deadline) {
				id, err := submitKeyed(current().addr, key, body)
				var refused *refusedError
				if errors.As(err, &refused) {
					t.Errorf("submission %s refused: %v", key, err)
					return
				}
				if err == nil {
					accMu.Lock()
					acc = append(acc, accepted{key, id, e, fails})
					accMu.Unlock()
					break
				}
				time.Sleep(100 * time.Millisecond) // retry pacing of a client, not synchronisation
			}
			time.Sleep(time.Duration(subRng.IntN(150)) * time.Millisecond) // submission pacing
		}
	}()

	pauses := 0
	for k := 0; k < kills; k++ {
		time.Sleep(time.Duration(500+rng.IntN(2500)) * time.Millisecond) // the random instant of a kill
		w := rng.IntN(workers)
		pk := worker(w)
		select {
		case <-pk.done:
			// It stopped by itself (cut off under load): start it again,
			// as its supervisor would.
			restart(w, k+1)
			continue
		default:
		}
		if workers > 1 && k%2 == 1 {
			// Every other fault on PostgreSQL is a pause (SIGSTOP): shorter
			// than the worker's cut-off, it goes on; longer, its lifeline
			// stops its steps' processes and the others take its deploys
			// over, and once resumed it stops (and is started again at
			// the next fault).
			if err := pk.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Duration(rng.IntN(int(2*testDeadAfter/time.Millisecond))) * time.Millisecond) // the length of the pause
			if err := pk.cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			resumed := time.Now()
			pauses++
			// Either it stops (it was cut off or declared dead) or its
			// heartbeat lands again (it goes on): no third way.
			peer := worker((w + 1) % workers)
			enginetest.Eventually(t, 30*time.Second, func() bool {
				select {
				case <-pk.done:
					return true
				default:
				}
				ws, err := peer.client().Workers(context.Background())
				if err != nil {
					return false
				}
				for _, x := range ws.Items {
					if x.ID == fmt.Sprintf("chaos-w%d", w) && x.State == "alive" && x.LastSeen.After(resumed) {
						return true
					}
				}
				return false
			}, "worker %d, resumed, to stop or to beat again", w)
			select {
			case <-pk.done:
				restart(w, k+1)
			default:
			}
			continue
		}
		if err := pk.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-pk.done
		if workers > 1 {
			// Down past dead_after, as a machine that died: the other
			// workers take its deploys over, while the restart of a
			// worker would sweep its own steps' processes first.
			time.Sleep(testDeadAfter + 2*time.Second) // the length of the outage, not synchronisation
		}
		restart(w, k+1)
	}
	<-submitted
	if pauses > 0 {
		t.Logf("%d of the %d faults were pauses", pauses, kills)
	}
	// A worker that stopped after the last pause: started again, so that
	// current() always reaches a live one.
	for w := range ps {
		select {
		case <-worker(w).done:
			restart(w, kills+1)
		default:
		}
	}
	c := current().client()

	// 1. Every accepted deploy ends final; one deploy per key.
	accMu.Lock()
	defer accMu.Unlock()
	if len(acc) != deploys {
		t.Fatalf("%d of %d submissions accepted", len(acc), deploys)
	}
	byID := map[string]*manent.Deployment{}
	for _, a := range acc {
		d := waitFinalLong(t, c, a.id, 5*time.Minute)
		byID[a.id] = d
	}
	all := listAll(t, c)
	if len(all) != deploys {
		t.Fatalf("%d deploys on the server for %d keys: a retried submission was duplicated", len(all), deploys)
	}
	states := map[manent.State]int{}
	for _, d := range byID {
		states[d.State]++
	}
	t.Logf("final states: %v", states)

	// 6. A failed check rolls back, whatever the kills; nothing stays RUNNING.
	for _, a := range acc {
		d := byID[a.id]
		steps := map[string]manent.StepState{}
		for _, st := range d.Steps {
			steps[st.Name] = st.State
			if st.State == manent.StepRunning {
				t.Errorf("deploy %s (%s, %s): step %s still RUNNING", a.key, a.id, d.State, st.Name)
			}
		}
		switch {
		case a.fails && d.State != manent.StateError:
			t.Errorf("deploy %s (%s): its verify step fails, it ended %s (%s)", a.key, a.id, d.State, d.Error)
		case a.fails:
			for _, rb := range []string{"rollback:activation", "rollback:deploy"} {
				if steps[rb] != manent.StepSuccess {
					t.Errorf("deploy %s (%s, ERROR): step %s is %q, want SUCCESS", a.key, a.id, rb, steps[rb])
				}
			}
		case d.State != manent.StateSuccess:
			t.Errorf("deploy %s (%s): ended %s (%s), want SUCCESS", a.key, a.id, d.State, d.Error)
		}
	}

	// 2 and 3 (processes): what the guard script recorded.
	if b, err := os.ReadFile(filepath.Join(markers, "violations")); err == nil && len(b) > 0 {
		t.Errorf("processes overlapped:\n%s", b)
		// What the server said about those deploys, to tell why.
		logs := serverLogs()
		for _, a := range acc {
			if !strings.Contains(string(b), " d"+strings.TrimPrefix(a.key, "chaos-")+"/") {
				continue
			}
			var lines []string
			for _, l := range strings.Split(string(logs), "\n") {
				if strings.Contains(l, a.id) {
					lines = append(lines, l)
				}
			}
			t.Logf("server log of %s (%s):\n%s", a.key, a.id, strings.Join(lines, "\n"))
			tr, _ := os.ReadFile(filepath.Join(markers, "trace"))
			for _, l := range strings.Split(string(tr), "\n") {
				if strings.Contains(l, " d"+strings.TrimPrefix(a.key, "chaos-")+"/") {
					t.Logf("  guard %s", l)
				}
			}
			if d := byID[a.id]; d != nil {
				for _, st := range d.Steps {
					t.Logf("  step %s: %s, %d attempts, started %v, finished %v", st.Name, st.State, st.Attempts, st.StartedAt, st.FinishedAt)
				}
			}
			if ll, err := c.Logs(context.Background(), a.id); err == nil {
				for _, l := range ll.Lines {
					t.Logf("  log %s [%s] %s", l.Time.Format("15:04:05.000"), l.Step, l.Text)
				}
			}
		}
	}
	// 3 (intervals): no two deploys of an environment overlap.
	perEnv := map[string][]*manent.Deployment{}
	for _, d := range byID {
		if d.StartedAt != nil {
			perEnv[d.Environment] = append(perEnv[d.Environment], d)
		}
	}
	for e, ds := range perEnv {
		sort.Slice(ds, func(i, j int) bool { return ds[i].StartedAt.Before(*ds[j].StartedAt) })
		for i := 1; i < len(ds); i++ {
			if ds[i].StartedAt.Before(*ds[i-1].FinishedAt) {
				t.Errorf("%s: %s started at %s before %s finished at %s", e, ds[i].ID, ds[i].StartedAt, ds[i-1].ID, ds[i-1].FinishedAt)
			}
		}
	}
	// 4. current = last SUCCESS = inventory.
	inv, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	invByEnv := map[string]string{}
	for _, it := range inv.Items {
		if it.Current != nil {
			invByEnv[it.Environment] = it.Current.Version
		}
	}
	for e, ds := range perEnv {
		last := ""
		var lastAt time.Time
		for _, d := range ds {
			if d.State == manent.StateSuccess && d.FinishedAt.After(lastAt) {
				last, lastAt = d.Version, *d.FinishedAt
			}
		}
		link, err := os.Readlink(filepath.Join(targets, "chaos", e, "current"))
		live := filepath.Base(link)
		if last == "" {
			continue
		}
		if err != nil || live != last {
			t.Errorf("%s: current -> %q (%v), last SUCCESS %q", e, live, err, last)
		}
		if invByEnv[e] != live {
			t.Errorf("%s: inventory says %q, current is %q", e, invByEnv[e], live)
		}
	}
	// 5. Every final deploy announced once.
	enginetest.Eventually(t, 2*time.Minute, func() bool { return hooks.announced(len(byID)) }, "every deploy's finished callback")
	for id, d := range byID {
		if n := hooks.finishedIDs(id); n != 1 {
			t.Errorf("deploy %s (%s) announced with %d distinct webhook-ids, want 1", id, d.State, n)
		}
	}
	t.Logf("chaos figures: deploys %d, kills %d, states %v, callbacks received %d (retries included)", deploys, kills, states, hooks.total())
}

// chaosGuard wraps a step's command: it takes the step's lock and the
// environment's lock (a file naming its pid and deploy), recording a
// violation when a live process still holds either — a step running twice
// at once, or two deploys of one environment at once — then runs the
// command. Locks of dead processes are stale and taken over.
const chaosGuard = `#!/bin/sh
# usage: guard.sh MARKERS DEPLOY STEP ENVLOCK SECONDS [EXIT]
m=$1; d=$2; s=$3; e=$4; secs=$5
# field N (3: state, 22: start time in clock ticks since boot) of
# /proc/<pid>/stat as read once in $st; the command name may hold spaces.
field() { echo "$st" | sed 's/^.*) //' | cut -d' ' -f$(($1 - 2)); }
# alive PID START: PID is still the process that started at START, and not
# a zombie. One read of /proc/PID/stat: PID 1 may reap a zombie between two
# reads (then the second would fail and a dead holder would look alive).
alive() {
  st=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$(field 22)" = "$2" ] && [ "$(field 3)" != Z ] && [ "$(field 3)" != X ]
}
me() { st=$(cat /proc/$$/stat); field 22; }
trace() { echo "$(date +%s.%N) $$ ppid=$PPID $d/$s $*" >> "$m/trace"; }
take() {
  lock=$1; who=$2
  if [ -e "$lock" ]; then
    read pid start owner < "$lock"
    if [ -n "$pid" ] && alive "$pid" "$start"; then
      echo "$(date +%s.%N) $who found $lock held by live pid $pid ($owner)" >> "$m/violations"
    fi
  fi
  echo "$$ $(me) $who" > "$lock"
}
trace start
take "$m/step-$d-$s.lock" "$d/$s"
take "$m/$e.lock" "$d/$s"
sleep "$secs"
rm -f "$m/step-$d-$s.lock"
rm -f "$m/$e.lock"
trace end
exit "${6:-0}"
`

// chaosDescriptor returns the i-th deploy: a prepare step before deploy and
// a verify step after activation, each taking 0.2 s to longest. In about one deploy
// in five the verify step fails, once (max_retries 0): the deploy must then
// roll back its activation and its deploy.
func chaosDescriptor(art, env string, i int, guard, markers, target, hook string, longest float64, rng *rand.Rand) (body []byte, fails bool) {
	secs := func() string { return fmt.Sprintf("%.2f", 0.2+rng.Float64()*(longest-0.2)) }
	fails = rng.IntN(5) == 0
	id := fmt.Sprintf("d%d", i)
	step := func(name, anchor string, exit int) string {
		return fmt.Sprintf("  - {name: %s, %s, plugin: script, max_retries: 0, with: {command: [%q, %q, %q, %q, %q, %q, \"%d\"]}}\n",
			name, anchor, guard, markers, id, name, "env-lock-"+env, secs(), exit)
	}
	verifyExit := 0
	if fails {
		verifyExit = 1
	}
	return []byte(fmt.Sprintf(`apiVersion: manent/v1
application: chaos
environment: %s
version: "%d"
artifact: {url: "file://%s"}
target: {plugin: local, with: {dir: %q}}
rollback: {enabled: true, on: [deploy, post-test, activation, verify]}
callbacks: [{url: "%s/hook", events: [finished]}]
steps:
%s%s`, env, i, art, target, hook, step("prepare", "before: deploy", 0), step("verify", "after: activation", verifyExit))), fails
}

// submitKeyed submits body once with an Idempotency-Key.
func submitKeyed(addr, key string, body []byte) (string, error) {
	req, err := http.NewRequest(http.MethodPost, addr+"/api/v1/deployments", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Idempotency-Key", key)
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode == http.StatusAccepted:
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return "", &refusedError{fmt.Sprintf("%d %s", resp.StatusCode, b)}
	default:
		return "", fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var res api.SubmitResult
	if err := json.Unmarshal(b, &res); err != nil {
		return "", err
	}
	return res.ID, nil
}

func waitFinalLong(t *testing.T, c *api.Client, id string, timeout time.Duration) *manent.Deployment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d, err := c.Wait(ctx, id, 200*time.Millisecond)
	if err != nil {
		t.Fatalf("deploy %s not final: %v (last state %v)", id, err, d)
	}
	return d
}

func listAll(t *testing.T, c *api.Client) []manent.Deployment {
	t.Helper()
	var out []manent.Deployment
	cursor := ""
	for {
		page, err := c.List(context.Background(), api.ListOptions{Application: "chaos", Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Items...)
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a count", name, v)
	}
	return n
}

// hookCounter receives callbacks: per deploy, the distinct webhook-ids of
// its `finished` events.
type hookCounter struct {
	mu       sync.Mutex
	finished map[string]map[string]bool
	state    map[string]string // the state the last `finished` of a deploy said
	n        int
}

func newHookCounter() *hookCounter {
	return &hookCounter{finished: map[string]map[string]bool{}, state: map[string]string{}}
}

func (h *hookCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var ev struct {
		Type       string `json:"type"`
		Deployment struct {
			ID    string `json:"id"`
			State string `json:"state"`
		} `json:"deployment"`
	}
	if json.Unmarshal(b, &ev) == nil && ev.Type == "finished" {
		h.mu.Lock()
		h.n++
		if h.finished[ev.Deployment.ID] == nil {
			h.finished[ev.Deployment.ID] = map[string]bool{}
		}
		h.finished[ev.Deployment.ID][r.Header.Get("webhook-id")] = true
		h.state[ev.Deployment.ID] = ev.Deployment.State
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

func (h *hookCounter) announced(n int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.finished) >= n
}

func (h *hookCounter) finishedIDs(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.finished[id])
}

func (h *hookCounter) stateOf(id string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state[id]
}

func (h *hookCounter) total() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// refusedError is a submission the server refused for good (a 4xx): the
// harness is wrong, retrying would not help.
type refusedError struct{ msg string }

func (e *refusedError) Error() string { return e.msg }

// The guard itself: a second run of a step while the first still runs is
// reported; a holder that ended (a zombie, or gone) is not.
func TestChaosGuard(t *testing.T) {
	dir := t.TempDir()
	guard := filepath.Join(dir, "guard.sh")
	if err := os.WriteFile(guard, []byte(chaosGuard), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(secs string) *exec.Cmd {
		return exec.Command(guard, dir, "d1", "prepare", "env-lock-e", secs)
	}
	violations := func() string { b, _ := os.ReadFile(filepath.Join(dir, "violations")); return string(b) }

	first := run("30")
	first.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // killed with its sleep below
	firstProc, err := childproc.Start(first)
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "step-d1-prepare.lock")
	enginetest.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "env-lock-e.lock"))
		return len(b) > 0
	}, "the first run to take its locks")
	if out, err := run("0").CombinedOutput(); err != nil {
		t.Fatalf("second run: %v\n%s", err, out)
	}
	if v := violations(); !strings.Contains(v, "step-d1-prepare.lock held by live pid") || !strings.Contains(v, "env-lock-e.lock held by live pid") {
		t.Fatalf("a run beside a live one was not reported:\n%s", v)
	}
	// The first run is killed (it leaves its locks behind, as after a
	// crash) and reaped: a later run finds dead holders.
	_ = syscall.Kill(-first.Process.Pid, syscall.SIGKILL)
	_ = firstProc.Wait()
	_ = os.Remove(filepath.Join(dir, "violations"))
	if err := os.WriteFile(lock, []byte(fmt.Sprintf("%d 1 d1/prepare\n", first.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := run("0").CombinedOutput(); err != nil {
		t.Fatalf("third run: %v\n%s", err, out)
	}
	if v := violations(); v != "" {
		t.Fatalf("a dead holder was reported as live:\n%s", v)
	}
}
