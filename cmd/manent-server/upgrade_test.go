package main_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/itsm/reference"
	"github.com/manent-io/manent/pkg/manent"
)

// TestUpgradeFromOldRelease is the upgrade promise of docs/operations.md
// ("Upgrades") run as an operator would: an older release's manent-server,
// built from the commits in MANENT_UPGRADE_FROM (comma- or space-separated;
// scripts/upgrade.sh), holds deploys in every waiting and running shape —
// in the gate for an approval, DELAYED, waiting on a dependency, awaiting a
// wave's approval, in a wave's observation, in a slow script step, waiting
// for its ITSM change — and a recurring schedule; it is stopped (SIGTERM,
// and separately SIGKILL) and this tree's manent-server starts on the same
// database. Every deploy must then end as it should, no step's effect
// twice, one `finished` callback each, the audit chain intact, the
// inventory naming what runs, and the schedule firing on, once per tick.
// On PostgreSQL (MANENT_TEST_POSTGRES) two old workers are rolled one by
// one, so an old and a new worker run side by side.
//
// Building an old commit takes a minute or two the first time (cached in
// $TMPDIR/manent-upgrade-bin/<commit>), so it is not part of the default
// test run.
func TestUpgradeFromOldRelease(t *testing.T) {
	commits := strings.Fields(strings.ReplaceAll(os.Getenv("MANENT_UPGRADE_FROM"), ",", " "))
	if len(commits) == 0 {
		t.Skip("MANENT_UPGRADE_FROM names no commit to upgrade from (scripts/upgrade.sh)")
	}
	for _, c := range commits {
		old := oldServer(t, c)
		t.Run(c+"/sqlite/SIGTERM", func(t *testing.T) { upgradeSQLite(t, old, syscall.SIGTERM) })
		t.Run(c+"/sqlite/SIGKILL", func(t *testing.T) { upgradeSQLite(t, old, syscall.SIGKILL) })
		if os.Getenv("MANENT_TEST_POSTGRES") != "" {
			t.Run(c+"/postgres/rolling", func(t *testing.T) { upgradeRolling(t, old) })
		}
	}
}

// oldServer builds manent-server at commit from `git archive`, once per
// commit in $TMPDIR/manent-upgrade-bin.
func oldServer(t *testing.T, commit string) string {
	t.Helper()
	full, err := exec.Command("git", "rev-parse", "--verify", commit+"^{commit}").Output()
	if err != nil {
		t.Fatalf("git rev-parse %s: %v", commit, err)
	}
	hash := strings.TrimSpace(string(full))
	dir := filepath.Join(os.TempDir(), "manent-upgrade-bin", hash)
	bin := filepath.Join(dir, "manent-server")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		t.Fatal(err)
	}
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Fatal(err)
	}
	archive := exec.Command("sh", "-c", fmt.Sprintf("git -C %q archive %s | tar -x -C %q", strings.TrimSpace(string(top)), hash, src))
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", commit, err, out)
	}
	build := exec.Command("go", "build", "-o", bin+".tmp", "./cmd/manent-server")
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build manent-server at %s: %v\n%s", commit, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	_ = os.RemoveAll(src)
	return bin
}

// upgradeBed is what the shapes need around the servers: the
// configuration, the reference ITSM, the callback receiver, the artifact.
type upgradeBed struct {
	dir, cfg, db string
	itsm         *httptest.Server
	hooks        *hookCounter
	hookURL      string
	art          string
	effects      string // each step appends "<deploy> <step>" when it ends
	release      string // the slow step waits for this file
	started      string // the slow step touches this file
}

func newUpgradeBed(t *testing.T, db string) *upgradeBed {
	t.Helper()
	dir := t.TempDir()
	b := &upgradeBed{dir: dir, db: db, hooks: newHookCounter(),
		art: filepath.Join(dir, "app.txt"), effects: filepath.Join(dir, "effects"),
		release: filepath.Join(dir, "release"), started: filepath.Join(dir, "started")}
	b.itsm = httptest.NewServer(reference.New())
	t.Cleanup(b.itsm.Close)
	recv := httptest.NewServer(b.hooks)
	t.Cleanup(recv.Close)
	b.hookURL = recv.URL
	for path, body := range map[string]string{b.art: "release", b.effects: "", filepath.Join(dir, "governance.yaml"): `approvals:
  - {environments: [gated], count: 1, approvers: ["token:sre"]}
change:
  - {environments: [changed]}
`} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hash := func(s string) string { h := sha256.Sum256([]byte(s)); return hex.EncodeToString(h[:]) }
	b.cfg = filepath.Join(dir, "manent-server.yaml")
	cfg := fmt.Sprintf(`artifacts: {sources: ["file:///**"]}
auth:
  tokens:
    - {name: ci, sha256: %q}
    - {name: sre, sha256: %q}
rbac:
  - {subjects: ["token:ci", "token:sre"], permissions: [admin]}
callbacks: {allow: ["http://127.0.0.1:*/**"], secret_env: TEST_SECRET}
itsm: {url: %q, poll: 200ms}
plugins: {steps: [script], local: {root: %q}}
governance: {rules: %q}
schedules: {min_interval: 1s}
workers: {scheduler_poll: 500ms}
`, hash("ci-token"), hash("sre-token"), b.itsm.URL, filepath.Join(dir, "targets"), filepath.Join(dir, "governance.yaml"))
	if err := os.WriteFile(b.cfg, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// descriptor is a deploy of application up to env whose deploy and
// activation are followed by a step noting "<deploy> <step>" in effects;
// extra is more of the descriptor (schedule, after, rollout), steps more
// custom steps.
func (b *upgradeBed) descriptor(env, extra, steps string) []byte {
	note := func(after string) string {
		return fmt.Sprintf(`  - {name: %s-mark, after: %s, plugin: script, with: {command: [sh, -c, 'echo "$MANENT_DEPLOY_ID %s" >> %s']}}`, after, after, after, b.effects)
	}
	return []byte(fmt.Sprintf(`apiVersion: manent/v1
application: up
environment: %s
version: "1"
artifact: {url: "file://%s"}
target: {plugin: local, with: {dir: %q}}
callbacks: [{url: "%s/hook", events: [finished]}]
%s
steps:
%s
%s
%s`, env, b.art, filepath.Join(b.dir, "targets", env), b.hookURL, extra, note("deploy"), note("activation"), steps))
}

// serve starts bin as executor id on the bed's database and waits until it listens.
func (b *upgradeBed) serve(t *testing.T, bin, id string) *proc {
	t.Helper()
	data := filepath.Join(b.dir, id)
	cmd := exec.Command(bin, serveArgs(data, b.db, "--config", b.cfg, "--executor-id", id)...)
	cmd.Env = append(append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token", "MANENT_WORKERS_RETRY_BASE=20ms", upgradeSecret), workerEnv...)
	return startCmd(t, cmd, data)
}

// upgradeSecret signs the callbacks.
var upgradeSecret = "TEST_SECRET=whsec_" + base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))

// shapes are the deploys an upgrade finds waiting or running.
type shapes struct {
	gated, delayed, dep, waveApproval, observe, slow, changed string
	schedule                                                  string
}

func (s shapes) all() map[string]string {
	return map[string]string{"gated": s.gated, "delayed": s.delayed, "dep": s.dep, "wave-approval": s.waveApproval,
		"observe": s.observe, "slow": s.slow, "changed": s.changed}
}

// hold submits the deploys through c and waits until each stands where
// it should: in its gate, in its wave, in its step.
func (b *upgradeBed) hold(t *testing.T, c *api.Client) shapes {
	t.Helper()
	ctx := context.Background()
	submit := func(env, extra, steps string) string {
		t.Helper()
		res, err := c.Submit(ctx, b.descriptor(env, extra, steps), false)
		if err != nil {
			var me *manent.Error
			if errors.As(err, &me) {
				t.Fatalf("submit to %s: %v %v", env, err, me.Fields)
			}
			t.Fatalf("submit to %s: %v", env, err)
		}
		return res.ID
	}
	var s shapes
	s.gated = submit("gated", "", "")
	s.delayed = submit("delayed", fmt.Sprintf("schedule: {at: %q}", time.Now().Add(40*time.Second).UTC().Format(time.RFC3339)), "")
	s.dep = submit("dep", fmt.Sprintf("after: [%s]", s.gated), "")
	s.waveApproval = submit("waves", "rollout: {waves: [{name: one, targets: [r1]}, {name: two, targets: [r2], approval: true}]}", "")
	s.observe = submit("observe", "rollout: {waves: [{name: one, targets: [r1], observe: 25s}, {name: two, targets: [r2]}]}", "")
	slow := fmt.Sprintf(`touch %s; i=0; while [ ! -e %s ] && [ $i -lt 2400 ]; do sleep 0.05; i=$((i+1)); done; [ -e %s ] && echo "$MANENT_DEPLOY_ID slow" >> %s`,
		b.started, b.release, b.release, b.effects)
	s.slow = submit("slow", "", fmt.Sprintf("  - {name: slow, after: deploy-mark, plugin: script, with: {command: [sh, -c, %q]}}", slow))
	s.changed = submit("changed", "", "")
	res, err := c.Submit(ctx, b.descriptor("cron", `schedule: {cron: "@every 3s"}`, ""), false)
	if err != nil {
		t.Fatalf("submit the schedule: %v", err)
	}
	s.schedule = res.Schedule

	in := func(id string, ok func(d *manent.Deployment) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			d, err := c.Deployment(ctx, id)
			if err == nil && ok(d) {
				return
			}
			if err == nil && d.State.Final() {
				t.Fatalf("%s ended %s instead of %s: %s", id, d.State, what, d.Error)
			}
			if time.Now().After(deadline) {
				if d != nil {
					t.Fatalf("%s is not %s after 60s: %s %q, rollout %+v", id, what, d.State, d.Reason, d.Rollout)
				}
				t.Fatalf("%s is not %s after 60s: %v", id, what, err)
			}
			<-tick.C
		}
	}
	state := func(st manent.State) func(*manent.Deployment) bool {
		return func(d *manent.Deployment) bool { return d.State == st }
	}
	wave := func(name, st string) func(*manent.Deployment) bool {
		return func(d *manent.Deployment) bool {
			for _, w := range d.Rollout {
				if w.Name == name && w.State == st {
					return true
				}
			}
			return false
		}
	}
	in(s.gated, state(manent.StateAwaitingApproval), "awaiting approval")
	in(s.delayed, state(manent.StateDelayed), "delayed")
	in(s.dep, state(manent.StateWaitingDependency), "waiting on its dependency")
	in(s.waveApproval, wave("two", "awaiting-approval"), "awaiting wave two's approval")
	in(s.observe, wave("one", "observing"), "observing wave one")
	in(s.changed, func(d *manent.Deployment) bool {
		return d.State == manent.StateAwaitingApproval && strings.Contains(d.Reason, "CHG0001")
	}, "waiting for change CHG0001")
	enginetest.Eventually(t, 60*time.Second, func() bool { _, err := os.Stat(b.started); return err == nil }, "the slow step to start")
	enginetest.Eventually(t, 60*time.Second, func() bool { return len(b.ticks(t, c)) > 0 }, "the schedule to fire")
	return s
}

// ticks are the deploys of the recurring schedule, by id.
func (b *upgradeBed) ticks(t *testing.T, c *api.Client) map[string]manent.Deployment {
	t.Helper()
	out := map[string]manent.Deployment{}
	cursor := ""
	for {
		page, err := c.List(context.Background(), api.ListOptions{Application: "up", Environment: "cron", Limit: 500, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Items {
			out[d.ID] = d
		}
		if page.NextCursor == "" {
			return out
		}
		cursor = page.NextCursor
	}
}

// explained fails unless every deploy of s that waits says why. A
// release before f5a0be8 (2026-12-05) recorded no reason for a DELAYED
// deploy: status derives it from the deploy's saved input.
func explained(t *testing.T, c *api.Client, s shapes) {
	t.Helper()
	for name, id := range s.all() {
		d, err := c.Deployment(context.Background(), id)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !d.State.Final() && d.State != manent.StatePending && d.Reason == "" {
			t.Errorf("%s (%s) is %s after the upgrade and does not say why", name, id, d.State)
		}
	}
}

// finish lets every shape go on through c (an approval, a wave's approval,
// the change approved in the ITSM, the slow step released), waits for each
// deploy's end and checks what an upgrade must keep.
func (b *upgradeBed) finish(t *testing.T, c, sre *api.Client, s shapes, upgradedAt time.Time, done map[string]bool) {
	t.Helper()
	ctx := context.Background()
	if _, err := sre.Approve(ctx, s.gated, "after the upgrade", ""); err != nil {
		t.Fatalf("approve %s: %v", s.gated, err)
	}
	resp, err := http.Post(b.itsm.URL+"/changes/CHG0001/approve", "application/json", strings.NewReader(`{"by":"cab"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := os.WriteFile(b.release, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		_, err := sre.ApproveWave(ctx, s.waveApproval, "two", "after the upgrade")
		return err == nil
	}, "wave two of %s to take its approval", s.waveApproval)

	final := map[string]*manent.Deployment{}
	for name, id := range s.all() {
		d := waitFinalLong(t, c, id, 120*time.Second)
		final[id] = d
		if d.State != manent.StateSuccess {
			t.Errorf("%s (%s) ended %s: %s", name, id, d.State, d.Error)
			for _, st := range d.Steps {
				t.Logf("  %s %s %s", st.Name, st.State, st.Error)
			}
		}
	}
	// The change is closed by a workflow of its own, after the deploy
	// ended: its step ends a moment later.
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err := c.Deployment(ctx, s.changed)
		if err != nil {
			return false
		}
		for _, st := range d.Steps {
			if st.Name == "change:close" && (st.State == manent.StepRunning || st.State == manent.StepPending) {
				return false
			}
		}
		final[s.changed] = d
		return true
	}, "change:close of %s to end", s.changed)
	// The schedule fires on after the upgrade, once per tick.
	enginetest.Eventually(t, 60*time.Second, func() bool {
		for _, d := range b.ticks(t, c) {
			if d.CreatedAt.After(upgradedAt) && d.State == manent.StateSuccess {
				return true
			}
		}
		return false
	}, "a tick of the schedule after the upgrade to succeed")
	if err := c.DeleteSchedule(ctx, s.schedule); err != nil {
		t.Fatalf("delete schedule: %v", err)
	}
	ticks := b.ticks(t, c)
	for id := range ticks {
		final[id] = waitFinalLong(t, c, id, 120*time.Second)
	}
	var at []string
	for id := range ticks {
		at = append(at, id[strings.LastIndex(id, "@")+1:])
	}
	sort.Strings(at)
	for i := 1; i < len(at); i++ {
		if at[i] == at[i-1] {
			t.Errorf("the schedule fired twice for %s", at[i])
		}
	}

	// No step's effect twice: a deploy's notes are its succeeded -mark
	// steps, one each (a rollout's per wave), and the slow step's one.
	notes := map[string]int{}
	raw, err := os.ReadFile(b.effects)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		if f := strings.Fields(l); len(f) == 2 {
			notes[f[0]+" "+f[1]]++
		}
	}
	for id, d := range final {
		want := map[string]int{}
		for _, st := range d.Steps {
			name := st.Name
			if i := strings.Index(name, "-mark"); i > 0 && st.State == manent.StepSuccess {
				want[id+" "+name[:i]]++
			}
			if name == "slow" && st.State == manent.StepSuccess {
				want[id+" slow"]++
			}
			if st.State == manent.StepRunning || st.State == manent.StepPending {
				t.Errorf("%s ended %s with step %s still %s", id, d.State, st.Name, st.State)
			}
		}
		for k, n := range want {
			if notes[k] == n+1 && done != nil && !done[k] {
				continue // killed after its effect, before its end was saved: it runs again
			}
			if notes[k] != n {
				t.Errorf("%s: noted %d times, want %d (a step ran twice or not at all)", k, notes[k], n)
			}
		}
	}
	// One `finished` callback per deploy, saying how it ended.
	enginetest.Eventually(t, 60*time.Second, func() bool { return b.hooks.announced(len(final)) }, "a finished callback for each of %d deploys", len(final))
	for id, d := range final {
		if n := b.hooks.finishedIDs(id); n != 1 {
			t.Errorf("%s: %d finished callbacks, want 1", id, n)
		}
		if got := b.hooks.stateOf(id); got != string(d.State) {
			t.Errorf("%s: the finished callback says %s, the deploy is %s", id, got, d.State)
		}
	}
	// The inventory names each environment's last success.
	inv, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	current := map[string]string{}
	for _, e := range inv.Items {
		if e.Current != nil {
			current[e.Environment] = e.Current.DeploymentID
		}
	}
	for name, id := range s.all() {
		if d := final[id]; d.State == manent.StateSuccess && current[d.Environment] != id {
			t.Errorf("the inventory names %q live in %s, want %s (%s)", current[d.Environment], d.Environment, id, name)
		}
	}
}

// succeeded are the steps noted in effects whose success is saved, as
// "<deploy> <step>": what a SIGKILL now must not run again. nil when
// sig is not SIGKILL (nothing may run twice then).
func (b *upgradeBed) succeeded(t *testing.T, c *api.Client, sig syscall.Signal) map[string]bool {
	t.Helper()
	if sig != syscall.SIGKILL {
		return nil
	}
	out := map[string]bool{}
	for _, page := range []string{"gated", "delayed", "dep", "waves", "observe", "slow", "changed", "cron"} {
		res, err := c.List(context.Background(), api.ListOptions{Application: "up", Environment: page, Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Items {
			full, err := c.Deployment(context.Background(), d.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range full.Steps {
				if i := strings.Index(st.Name, "-mark"); i > 0 && st.State == manent.StepSuccess {
					out[d.ID+" "+st.Name[:i]] = true
				}
			}
		}
	}
	return out
}

// verifyAudit runs this tree's `admin verify-audit` on the bed's database.
func (b *upgradeBed) verifyAudit(t *testing.T) {
	t.Helper()
	out, err := exec.Command(serverBin, "admin", "verify-audit", "--database", b.db).CombinedOutput()
	if err != nil {
		t.Errorf("admin verify-audit after the upgrade: %v\n%s", err, out)
	}
}

// stop ends p with sig and waits until it has exited.
func stop(t *testing.T, p *proc, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("manent-server did not exit within 60s of %v", sig)
	}
}

func upgradeSQLite(t *testing.T, old string, sig syscall.Signal) {
	b := newUpgradeBed(t, enginetest.SQLite(t))
	p := b.serve(t, old, "w1")
	s := b.hold(t, api.NewClient(p.addr, "ci-token", nil))
	releases := b.twoReleases(t, api.NewClient(p.addr, "ci-token", nil))
	done := b.succeeded(t, api.NewClient(p.addr, "ci-token", nil), sig)
	stop(t, p, sig)
	upgradedAt := time.Now()
	p = b.serve(t, serverBin, "w1")
	c, sre := api.NewClient(p.addr, "ci-token", nil), api.NewClient(p.addr, "sre-token", nil)
	explained(t, c, s)
	rollsBack(t, c, releases)
	b.finish(t, c, sre, s, upgradedAt, done)
	stop(t, p, syscall.SIGTERM)
	b.verifyAudit(t)
	b.downgrade(t, old)
}

// twoReleases deploys versions 1 and 2 of up to environment "back"
// through the old server, each to SUCCESS, and returns their ids.
func (b *upgradeBed) twoReleases(t *testing.T, c *api.Client) [2]string {
	t.Helper()
	var ids [2]string
	for i, v := range []string{"1", "2"} {
		res, err := c.Submit(context.Background(), []byte(fmt.Sprintf(`apiVersion: manent/v1
application: up
environment: back
version: %q
artifact: {url: "file://%s"}
target: {plugin: local, with: {dir: %q}}
`, v, b.art, filepath.Join(b.dir, "targets", "back"))), false)
		if err != nil {
			t.Fatalf("submit version %s to back: %v", v, err)
		}
		ids[i] = res.ID
		enginetest.Eventually(t, 60*time.Second, func() bool {
			d, err := c.Deployment(context.Background(), res.ID)
			if err == nil && d.State.Final() && d.State != manent.StateSuccess {
				t.Fatalf("version %s to back ended %s: %s", v, d.State, d.Error)
			}
			return err == nil && d.State == manent.StateSuccess
		}, "version %s to back to succeed on the old server", v)
	}
	return ids
}

// rollsBack rolls environment "back" back, through this release, to the
// version 1 the old release deployed and recorded: the rollback deploys
// the old record's descriptor and ends SUCCESS, version 1 current.
func rollsBack(t *testing.T, c *api.Client, ids [2]string) {
	t.Helper()
	ctx := context.Background()
	rb, err := c.Rollback(ctx, "up", "back", api.RollbackRequest{})
	if err != nil {
		t.Fatalf("rollback to the release the old server recorded: %v", err)
	}
	if rb.Version != "1" || rb.From != ids[0] || rb.RollbackOf != ids[1] {
		t.Errorf("rollback %+v, want version 1 from %s, rollback_of %s", rb, ids[0], ids[1])
	}
	var d *manent.Deployment
	enginetest.Eventually(t, 60*time.Second, func() bool {
		d, err = c.Deployment(ctx, rb.ID)
		return err == nil && d.State.Final()
	}, "the rollback to end")
	if d.State != manent.StateSuccess {
		t.Fatalf("the rollback to the old server's release ended %s: %s", d.State, d.Error)
	}
}

// downgrade starts the old binary on the upgraded database: refused with
// the documented message when this tree's schema is newer.
func (b *upgradeBed) downgrade(t *testing.T, old string) {
	t.Helper()
	commit := filepath.Base(filepath.Dir(old))
	if latestMigration(t, "HEAD") == latestMigration(t, commit) {
		return // the same schema: the old binary may run on it
	}
	if exec.Command("git", "grep", "-q", "the database schema is newer than this", commit, "--", "../../pkg/store").Run() != nil {
		// Releases before 48a0eeb (2026-12-05) do not check the schema:
		// docs/operations.md says to restore the backup instead.
		t.Logf("%s predates the schema check: not started on the upgraded database", commit)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, old, serveArgs(filepath.Join(b.dir, "old-again"), b.db, "--config", b.cfg, "--executor-id", "w1")...)
	cmd.Env = append(os.Environ(), "MANENT_BOOTSTRAP_TOKEN=test-token", upgradeSecret)
	out, err := combinedOutput(cmd)
	if ctx.Err() != nil || err == nil || !strings.Contains(string(out), "the database schema is newer than this manent-server") {
		t.Errorf("the old manent-server on the upgraded database: %v, want it refused with the schema message\n%s", err, tail(out))
	}
}

// latestMigration is the last migration file of commit.
func latestMigration(t *testing.T, commit string) string {
	t.Helper()
	out, err := exec.Command("git", "ls-tree", "--name-only", commit, "../../pkg/store/migrations/").Output()
	if err != nil {
		t.Fatalf("git ls-tree %s: %v", commit, err)
	}
	names := strings.Fields(string(out))
	sort.Strings(names)
	return names[len(names)-1]
}

// upgradeRolling rolls two old workers on PostgreSQL one by one: the
// shapes are held by old workers, then run while an old and a new worker
// share the queue, then on new workers only.
func upgradeRolling(t *testing.T, old string) {
	b := newUpgradeBed(t, enginetest.Postgres(t))
	w1 := b.serve(t, old, "w1")
	w2 := b.serve(t, old, "w2")
	s := b.hold(t, api.NewClient(w1.addr, "ci-token", nil))
	stop(t, w1, syscall.SIGTERM)
	upgradedAt := time.Now()
	w1 = b.serve(t, serverBin, "w1")
	c, sre := api.NewClient(w1.addr, "ci-token", nil), api.NewClient(w1.addr, "sre-token", nil)
	explained(t, c, s)
	b.finish(t, c, sre, s, upgradedAt, nil)
	stop(t, w2, syscall.SIGTERM)
	w2 = b.serve(t, serverBin, "w2")
	stop(t, w1, syscall.SIGTERM)
	stop(t, w2, syscall.SIGTERM)
	b.verifyAudit(t)
}
