package main_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/childproc"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// orphanStep is a script step that records each attempt and checks, as it
// starts, that no process of an earlier attempt is alive (a zombie is
// dead): that would be the step running twice at once. The first attempt
// leaves a child (`sleep`) and waits for it; later ones finish at once.
const orphanStep = `m=%s
alive() { [ -r /proc/$1/stat ] && [ "$(sed 's/.*) //' /proc/$1/stat | cut -d' ' -f1)" != Z ]; }
echo "start $$" >> $m/attempts
n=$(grep -c start $m/attempts)
for p in $(cat $m/pids 2>/dev/null); do
  if alive $p; then echo "attempt $n started while pid $p of an earlier attempt was alive" >> $m/violations; fi
done
echo $$ >> $m/pids
if [ "$n" -eq 1 ]; then
  sleep 300 & echo $! >> $m/pids
  touch $m/running
  wait
fi
echo "end $$" >> $m/attempts
`

// A server SIGKILLed while a script step runs would leave that step's
// processes orphaned. Its lifeline (pkg/plugin/lifeline.go) stops them —
// the whole process group, the shell's child included — as soon as the
// server is gone, without waiting for a restart. When the lifeline was
// killed too, the restarted server stops them before the step runs again.
// Either way the step never runs twice at once (SPEC §11.2). On SQLite the
// restarted server does so, and resumes the deploy, also when it runs under
// another executor id than the killed one (an --executor-id given once,
// then dropped): it is the database's only server, so the killed one's
// deploys run nowhere and would otherwise hold their environment's queue
// forever.
func TestSIGKILLOrphansStoppedBeforeRerun(t *testing.T) {
	t.Parallel()
	t.Run("the lifeline stops them", func(t *testing.T) { orphansStoppedBeforeRerun(t, "crash-worker", false) })
	t.Run("lifeline killed too, same executor id", func(t *testing.T) { orphansStoppedBeforeRerun(t, "crash-worker", true) })
	t.Run("lifeline killed too, another executor id", func(t *testing.T) { orphansStoppedBeforeRerun(t, "alpha", true) })
}

// lifelineOf returns the pid of the step lifeline server pid started: its
// child whose environment marks it so.
func lifelineOf(t *testing.T, pid int) int {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+2:]))
		if len(f) < 2 || f[1] != strconv.Itoa(pid) {
			continue
		}
		env, _ := os.ReadFile("/proc/" + e.Name() + "/environ")
		if bytes.Contains(env, []byte("MANENT_PROCS_LIFELINE=1\x00")) {
			return child
		}
	}
	t.Fatalf("server %d has no step lifeline", pid)
	return 0
}

// orphansStoppedBeforeRerun kills a server of executor id first during a
// script step — and its lifeline first when lifelineToo — and restarts one
// of executor id crash-worker on the same SQLite database.
func orphansStoppedBeforeRerun(t *testing.T, first string, lifelineToo bool) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	markers := filepath.Join(dir, "markers")
	if err := os.MkdirAll(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a failed run left behind.
		for _, pid := range pidsIn(filepath.Join(markers, "pids")) {
			if childproc.Alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	db := enginetest.SQLite(t)
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte("release"), 0o644); err != nil {
		t.Fatal(err)
	}
	yml := fmt.Sprintf(`apiVersion: manent/v1
application: orphans
environment: test
version: "1"
artifact: {url: "file://%s"}
steps:
  - {name: long, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}
`, art, fmt.Sprintf(orphanStep, markers))

	p := startAs(t, data, db, first)
	res, err := p.client().Submit(context.Background(), []byte(yml), false)
	if err != nil {
		t.Fatal(err)
	}
	enginetest.Eventually(t, 60*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(markers, "running"))
		return err == nil
	}, "the first attempt to start its child")
	pids := pidsIn(filepath.Join(markers, "pids"))
	if len(pids) != 2 {
		t.Fatalf("first attempt pids %v, want the shell and its child", pids)
	}
	if lifelineToo {
		// Stopped, the server cannot start another lifeline when this
		// one dies; then it dies too.
		line := lifelineOf(t, p.cmd.Process.Pid)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(line, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		enginetest.Eventually(t, 10*time.Second, func() bool { return !childproc.Alive(line) }, "the lifeline killed")
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	if lifelineToo {
		for _, pid := range pids {
			if !childproc.Alive(pid) {
				t.Fatalf("pid %d of the step died with the server and its lifeline: the test cannot tell orphans apart", pid)
			}
		}
	} else {
		// No restart needed: the lifeline stops them.
		enginetest.Eventually(t, 15*time.Second, func() bool {
			for _, pid := range pids {
				if childproc.Alive(pid) {
					return false
				}
			}
			return true
		}, "the lifeline to stop the step's processes %v", pids)
	}

	p2 := start(t, data, db)
	d := waitFinal(t, p2.client(), res.ID)
	if d.State != manent.StateSuccess {
		t.Fatalf("state after restart = %s (%s), want SUCCESS", d.State, d.Error)
	}
	if v, err := os.ReadFile(filepath.Join(markers, "violations")); err == nil {
		t.Fatalf("the step ran twice at once:\n%s", v)
	}
	attempts, err := os.ReadFile(filepath.Join(markers, "attempts"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(attempts), "start"); got != 2 {
		t.Fatalf("attempts:\n%s\nwant 2 (interrupted, then re-run)", attempts)
	}
	for _, pid := range pids {
		if childproc.Alive(pid) {
			t.Errorf("pid %d of the interrupted attempt is still running", pid)
		}
	}
	if first == "crash-worker" {
		return
	}
	// The killed worker is recorded as taken over by the new one, so
	// nothing says the deploy still waits on it.
	ws, err := p2.client().Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range ws.Items {
		if w.ID == first {
			found = true
			if w.State != "dead" || w.TakenOverBy != "crash-worker" {
				t.Errorf("worker %s: state %s, taken over by %q; want dead, taken over by crash-worker", first, w.State, w.TakenOverBy)
			}
		}
	}
	if !found {
		t.Errorf("no worker %s in %+v", first, ws.Items)
	}
}

// On SQLite the server holding the database's lock is its only one: the
// servers of other executor ids that left it — killed, or stopped with
// SIGTERM — are listed dead, not alive forever.
func TestSQLiteOtherExecutorsListedDead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := enginetest.SQLite(t)
	data := filepath.Join(dir, "data")
	alpha := startAs(t, data, db, "alpha")
	if err := alpha.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-alpha.done
	beta := startAs(t, data, db, "beta")
	if err := beta.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-beta.done
	gamma := startAs(t, data, db, "gamma")
	res, err := gamma.client().Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range res.Items {
		got[w.ID] = w.State
	}
	if want := map[string]string{"alpha": "dead", "beta": "dead", "gamma": "alive"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("workers %v, want %v", got, want)
	}
}
