package web_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
)

// A deploy's page open while the server's database is restored from a
// backup older than what the page shows: its stream's reconnect is refused
// (its last event is past the restored stream's end), and the page loads
// itself again from the server's state, then follows the deploy to its
// end. It said "Disconnected from the server; retrying…" for good, asking
// every 2 s with the same id.
func TestDeployPageAfterADatabaseRestore(t *testing.T) {
	exe := findBrowser(t)
	s := startUI(t)
	gate, noisy := s.gate(t, "restore-gate"), s.gate(t, "restore-noisy")
	art := filepath.Join(t.TempDir(), "app.txt")
	if err := os.WriteFile(art, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The step prints a line, 40 more while noisy exists, waits for gate
	// and prints a last line.
	script := fmt.Sprintf(`echo "preparing 3.0"; if [ -e %s ]; then for i in $(seq 40); do echo "noise $i"; done; fi; i=0; while [ ! -e %s ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done; echo "gate opened for 3.0"`, noisy, gate)
	id := s.submit(t, "alice-token", []byte(fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: staging\nversion: \"3.0\"\nartifact: {url: %q}\nsteps:\n  - {name: prepare, before: deploy, plugin: script, with: {command: [sh, -c, %q]}}\n",
		"file://"+art, script)))
	s.waitState(t, id, manent.StatePending)

	bob := newChrome(t, exe)
	signIn(t, bob, s.URL, "bob-token")
	run(t, bob, "open the running deploy", chromedp.Navigate(s.URL+"/deployments/"+id))
	waitJS(t, bob, "the first log line", `document.getElementById('log').textContent.includes('preparing 3.0')`)

	// The backup, taken while the step waits for its gate.
	addr := s.HTTP.Listener.Addr().String()
	backup := t.TempDir()
	s.stop(t)
	enginetest.RestoreSQLite(t, s.dir, backup)
	open(t, noisy)
	s.start(t, addr)
	// The deploy goes on past the backup: its step is resumed, says more
	// than it will after the restore.
	waitJS(t, bob, "the resumed step's lines", `document.getElementById('log').textContent.includes('noise 40')`)

	// The database is restored from the backup; the step may go through now.
	s.stop(t)
	enginetest.RestoreSQLite(t, backup, s.dir)
	if err := os.Remove(noisy); err != nil {
		t.Fatal(err)
	}
	open(t, gate)
	s.start(t, addr)
	waitJS(t, bob, "the deploy's end", `document.getElementById('state').textContent.trim() === 'success'`)
	waitJS(t, bob, "the step's last line", `document.getElementById('log').textContent.includes('gate opened for 3.0')`)
}
