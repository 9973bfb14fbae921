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

// alivePid says whether pid is a running process (a zombie is not).
func alivePid(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// pidsIn reads the pids listed in path.
func pidsIn(path string) []int {
	b, _ := os.ReadFile(path)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// A server SIGKILLed while a script step runs leaves that step's processes
// orphaned; the restarted server stops them — the whole process group,
// the shell's child included — before the step runs again, so the step
// never runs twice at once (SPEC §11.2). On SQLite the restarted server
// does so, and resumes the deploy, also when it runs under another
// executor id than the killed one (an --executor-id given once, then
// dropped): it is the database's only server, so the killed one's deploys
// run nowhere and would otherwise hold their environment's queue forever.
func TestSIGKILLOrphansStoppedBeforeRerun(t *testing.T) {
	t.Run("same executor id", func(t *testing.T) { orphansStoppedBeforeRerun(t, "crash-worker") })
	t.Run("another executor id", func(t *testing.T) { orphansStoppedBeforeRerun(t, "alpha") })
}

// orphansStoppedBeforeRerun kills a server of executor id first during a
// script step and restarts one of executor id crash-worker on the same
// SQLite database.
func orphansStoppedBeforeRerun(t *testing.T, first string) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	markers := filepath.Join(dir, "markers")
	if err := os.MkdirAll(markers, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Whatever a failed run left behind.
		for _, pid := range pidsIn(filepath.Join(markers, "pids")) {
			if alivePid(pid) {
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
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done
	for _, pid := range pids {
		if !alivePid(pid) {
			t.Fatalf("pid %d of the step died with the server: the test cannot tell orphans apart", pid)
		}
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
		if alivePid(pid) {
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
