package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/servertest"
)

// The server's database is restored from a backup older than what `logs
// -f` has printed: its reconnect's Last-Event-ID is past the restored
// stream's end (a 422). logs -f says so once on stderr, prints the log
// the server has now from its start — the deploy runs again from the
// backup's state — and exits with the deploy's result. It exited 1, "Last-Event-ID … is past
// the last event", as if the deploy had failed, while it went on.
func TestLogsFollowAcrossARestoredDatabase(t *testing.T) {
	srv := startRestartable(t)
	dir := t.TempDir()
	gate, noisy := filepath.Join(dir, "gate"), filepath.Join(dir, "noisy")
	art := writeArtifact(t, dir, "hello\n")
	desc := fmt.Sprintf(`apiVersion: manent/v1
application: billing
environment: prod
version: 1.0.0
artifact: {url: "file://%s"}
steps:
  - name: talk
    before: activation
    plugin: script
    with: {command: ["sh", "-c", "echo started; if [ -f '%s' ]; then for i in $(seq 40); do echo noise $i; done; fi; while [ ! -f '%s' ]; do sleep 0.05; done; echo through"]}
`, art, noisy, gate)
	client := api.NewClient(srv.url(), servertest.DefaultToken, nil)
	res, err := client.Submit(context.Background(), []byte(desc), false)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MANENT_SERVER": srv.url(), "MANENT_TOKEN": servertest.DefaultToken}
	stdout, stderr := &enginetest.SyncBuffer{}, &enginetest.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		done <- cli.Run(ctx, cli.Invocation{
			Args: []string{"logs", "-f", res.ID}, Stdout: stdout, Stderr: stderr,
			Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
		})
	}()
	waitFor(t, "the step to start", func() bool { return strings.Count(stdout.String(), "[talk] started") == 1 })

	// The backup: taken while the step waits.
	backup := t.TempDir()
	srv.stop(false)
	enginetest.RestoreSQLite(t, srv.dir, backup)
	if err := os.WriteFile(noisy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv.start()
	// The deploy goes on past the backup (its step is resumed, the CLI
	// prints what it says again, and more than it will after the
	// restore: the stream's end after the restore stays below what the
	// CLI saw)...
	waitFor(t, "the resumed step to talk", func() bool { return strings.Contains(stdout.String(), "[talk] noise 40") })
	// ...then the database is restored from the backup.
	srv.stop(false)
	enginetest.RestoreSQLite(t, backup, srv.dir)
	if err := os.Remove(noisy); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	srv.start()

	var code int
	select {
	case code = <-done:
	case <-time.After(100 * time.Second):
		t.Fatalf("logs -f did not end\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	if code != 0 {
		t.Fatalf("logs -f: exit %d, want 0 (the deploy ended SUCCESS)\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	// Every line of the log the server has now was printed.
	got, err := api.NewClient(srv.url(), servertest.DefaultToken, nil).Logs(context.Background(), res.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range got.Lines {
		if line := "[" + l.Step + "] " + l.Text; !strings.Contains(stdout.String(), l.Time.UTC().Format("2006-01-02T15:04:05.000Z")+" "+line) {
			t.Errorf("logs -f did not print %q of the restored server's log\nstdout:\n%s\nstderr:\n%s", line, stdout, stderr)
		}
	}
	if !strings.Contains(stdout.String(), "[talk] through") {
		t.Errorf("stdout:\n%s\nwant the step's last line\nstderr:\n%s", stdout, stderr)
	}
	if n := strings.Count(stderr.String(), "database was restored from an older backup"); n != 1 {
		t.Errorf("stderr:\n%s\nwant the restore said once, got %d", stderr, n)
	}
}

// The token a CI job follows a deploy with is revoked (or expires) while
// the deploy runs: deploy --wait, wait and logs -f exit 2 as before, and
// now say that the deploy goes on and how to follow it, so that the job
// is not re-run to submit it again. They said only that the token was
// refused, "set the right one".
func TestFollowingSaysTheDeployGoesOnWhenItsTokenIsRefused(t *testing.T) {
	srv := startRestartable(t)
	gate := filepath.Join(t.TempDir(), "gate")
	id, followers := followThree(t, srv.url(), 30*time.Second, "while [ ! -f '"+gate+"' ]; do sleep 0.05; done")

	// The server is restarted with another admin token: the one the
	// followers hold is revoked.
	srv.stop(true)
	srv.token = "rotated-admin-token-0123456789abcdef"
	srv.start()

	want := fmt.Sprintf("the deploy goes on on the server: follow it with 'manent wait %s' and a valid token (do not submit it again)", id)
	expectFollowers(t, followers, 2, "refused the token", want)
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The server's database is restored from a backup taken before the deploy
// was submitted, while deploy --wait, wait and logs -f follow it: the
// deploy is undone and will never run. They exit 2 as for any unknown
// deploy, and now say why it vanished and what to do; they said only
// "deployment … not found", as if the id they had followed were a typo.
func TestFollowingADeployARestoreUndid(t *testing.T) {
	srv := startRestartable(t)
	backup := t.TempDir()
	srv.stop(true)
	enginetest.RestoreSQLite(t, srv.dir, backup) // the backup: before any deploy
	srv.start()

	gate := filepath.Join(t.TempDir(), "gate")
	t.Cleanup(func() { _ = os.WriteFile(gate, nil, 0o644) })
	id, followers := followThree(t, srv.url(), 30*time.Second, "while [ ! -f '"+gate+"' ]; do sleep 0.05; done")

	srv.stop(true)
	enginetest.RestoreSQLite(t, backup, srv.dir)
	srv.start()

	want := fmt.Sprintf("hint: deploy %s was on the server while this command followed it and is no longer: the server's database was most likely restored from a backup taken before the deploy was submitted", id)
	expectFollowers(t, followers, 2, "not found", want)
}
