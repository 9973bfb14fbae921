package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/servertest"
)

// writeArtifact writes an artifact holding body in dir and returns its path.
func writeArtifact(t *testing.T, dir, body string) string {
	t.Helper()
	art := filepath.Join(dir, "app.txt")
	if err := os.WriteFile(art, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return art
}

func writeDescriptor(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	art := writeArtifact(t, dir, "hello\n")
	p := filepath.Join(dir, "deploy.yml")
	desc := fmt.Sprintf("apiVersion: manent/v1\napplication: billing\nenvironment: prod\nversion: %s\nartifact: {url: \"file://%s\"}\n", version, art)
	if err := os.WriteFile(p, []byte(desc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A test that runs the CLI in-process (runCLI, startCLI, cli.Run) against a
// server of its own (servertest.Start or New: its own temp dir and SQLite
// file, or enginetest.Postgres/ProxiedPostgres: a random database per
// call; a loopback port of its own) mostly waits on that server, so it
// calls t.Parallel() when it touches no process-wide state: no t.Setenv
// (the CLI's environment is the Invocation's Getenv map), no os.Chdir, no
// package-level variable it sets, no signal handler, and no narrow
// wall-clock window. Parallel tests run once the serial ones are done.
// Kept serial: tests that start a server again on the same port
// (startRestartable: TestFollowAcrossServerRestart and restore_test.go —
// another test's listener could take the port meanwhile), t.Setenv tests
// (trial_test.go), TestLogsFollowResumesSilentStream's 300 ms idle bound,
// TestScripts (parallel inside already) and the quick unit tests. Subtests
// keep their parent's fixture and stay sequential.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code = cli.Run(ctx, cli.Invocation{
		Args: args, Stdout: &out, Stderr: &errOut,
		Getenv: func(k string) string { return env[k] }, PollInterval: 20 * time.Millisecond,
	})
	return code, out.String(), errOut.String()
}

func deployIDs(t *testing.T, srv *servertest.Server) []string {
	t.Helper()
	list, err := srv.Client().List(context.Background(), api.ListOptions{Application: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range list.Items {
		ids = append(ids, d.ID)
	}
	return ids
}

// `manent deploy --wait` through two 503s and a connection dropped after
// the server committed: the CLI retries with one Idempotency-Key, prints
// the one deploy it created, follows it to SUCCESS and exits 0.
func TestDeployRetriesWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	proxy := &servertest.SubmitFaults{Target: srv.URL, Busy: 2, Drops: 1}
	ps := httptest.NewServer(proxy)
	defer ps.Close()
	env := map[string]string{"MANENT_SERVER": ps.URL, "MANENT_TOKEN": srv.Token}

	code, stdout, stderr := runCLI(t, env, "deploy", "-f", writeDescriptor(t, "1.0.0"), "--wait", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var d struct{ ID, State string }
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("stdout is not the deployment: %v\n%s", err, stdout)
	}
	if ids := deployIDs(t, srv); len(ids) != 1 || ids[0] != d.ID || d.State != "SUCCESS" {
		t.Fatalf("server holds %v, CLI printed %s %s; want one deploy, SUCCESS", ids, d.ID, d.State)
	}
	keys := proxy.Keys()
	if len(keys) != 4 || !strings.HasPrefix(keys[0], "manent-cli-") {
		t.Fatalf("keys sent %q, want four submissions with one manent-cli- key", keys)
	}
	for _, k := range keys[1:] {
		if k != keys[0] {
			t.Errorf("the retries changed the key: %q", keys)
		}
	}
	if strings.Contains(stderr, "already submitted") {
		t.Errorf("the CLI's own retry was announced as a repeat:\n%s", stderr)
	}

	// Each invocation has a key of its own: a second deploy is a second deploy.
	code, _, stderr = runCLI(t, map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token},
		"deploy", "-f", writeDescriptor(t, "1.0.1"), "-o", "json")
	if code != 0 {
		t.Fatalf("second deploy: exit %d\n%s", code, stderr)
	}
	if ids := deployIDs(t, srv); len(ids) != 2 {
		t.Fatalf("after a second invocation the server holds %v, want 2 deploys", ids)
	}
}

// --idempotency-key given twice (a re-run CI job): the second run prints
// the first run's deploy and says so; no new deploy.
func TestDeployIdempotencyKeyFlag(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	env := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	file := writeDescriptor(t, "2.0.0")
	code, first, stderr := runCLI(t, env, "deploy", "-f", file, "--idempotency-key", "ci-pipeline-42", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	code, second, stderr := runCLI(t, env, "deploy", "-f", file, "--idempotency-key", "ci-pipeline-42", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if first != second {
		t.Errorf("second run printed\n%s\nwant the first run's\n%s", second, first)
	}
	if !strings.Contains(stderr, `notice: already submitted with idempotency key "ci-pipeline-42"`) {
		t.Errorf("stderr does not say it is a repeat:\n%s", stderr)
	}
	if ids := deployIDs(t, srv); len(ids) != 1 {
		t.Errorf("server holds %v, want one deploy", ids)
	}
	code, _, stderr = runCLI(t, env, "deploy", "-f", file, "--idempotency-key", "bad\x01key")
	if code != 2 || !strings.Contains(stderr, "--idempotency-key must be printable ASCII") {
		t.Errorf("a control character in the key: exit %d, stderr %q; want 2 and a usage error", code, stderr)
	}
}

// `manent rollback --wait` through a 503 and a connection dropped after the
// server committed the rollback: the CLI retries with one Idempotency-Key
// and the server answers the retry with the first rollback's deploy, so
// one rollback deploy exists and the CLI follows it to SUCCESS.
func TestRollbackRetriesWithOneIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t)
	direct := map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token}
	for _, v := range []string{"1.0.0", "2.0.0"} {
		if code, _, stderr := runCLI(t, direct, "deploy", "-f", writeDescriptor(t, v), "--wait"); code != 0 {
			t.Fatalf("deploy %s: exit %d\n%s", v, code, stderr)
		}
	}
	proxy := &servertest.SubmitFaults{Target: srv.URL, Busy: 1, Drops: 1, Path: "/api/v1/environments/billing/prod/rollback"}
	ps := httptest.NewServer(proxy)
	defer ps.Close()

	code, stdout, stderr := runCLI(t, map[string]string{"MANENT_SERVER": ps.URL, "MANENT_TOKEN": srv.Token},
		"rollback", "billing", "prod", "--wait", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var d struct{ ID, State, Version, RollbackOf string }
	if err := json.Unmarshal([]byte(stdout), &d); err != nil {
		t.Fatalf("stdout is not the deployment: %v\n%s", err, stdout)
	}
	if d.State != "SUCCESS" || d.Version != "1.0.0" {
		t.Fatalf("CLI printed %+v, want the rollback to 1.0.0, SUCCESS", d)
	}
	list, err := srv.Client().List(context.Background(), api.ListOptions{Application: "billing"})
	if err != nil {
		t.Fatal(err)
	}
	var rollbacks []string
	for _, it := range list.Items {
		if it.RollbackOf != "" {
			rollbacks = append(rollbacks, it.ID)
		}
	}
	if len(list.Items) != 3 || len(rollbacks) != 1 || rollbacks[0] != d.ID {
		t.Fatalf("server holds %d deploys, rollbacks %v; want 3 and the one rollback %s", len(list.Items), rollbacks, d.ID)
	}
	keys := proxy.Keys()
	if len(keys) != 3 || !strings.HasPrefix(keys[0], "manent-cli-") || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("keys sent %q, want three requests with one manent-cli- key", keys)
	}
	if strings.Contains(stderr, "already rolled back") {
		t.Errorf("the CLI's own retry was announced as a repeat:\n%s", stderr)
	}

	// --idempotency-key given again: the first rollback's answer, said so.
	code, first, _ := runCLI(t, direct, "rollback", "billing", "prod", "--idempotency-key", "ci-rb-7", "-o", "json")
	if code != 0 {
		t.Fatalf("rollback with a key: exit %d", code)
	}
	code, second, stderr := runCLI(t, direct, "rollback", "billing", "prod", "--idempotency-key", "ci-rb-7", "-o", "json")
	if code != 0 || first != second || !strings.Contains(stderr, `notice: already rolled back with idempotency key "ci-rb-7"`) {
		t.Fatalf("repeat: exit %d, stdout\n%s\nwant\n%s\nstderr %s", code, second, first, stderr)
	}
}
