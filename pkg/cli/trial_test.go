package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/servercmd"
	"github.com/manent-io/manent/plugins/builtin"
)

// trialServer runs the real `manent-server serve` (servercmd.Run with the
// built-in plugins, in-process) in local trial mode: no --config, a fresh
// --data-dir, a random loopback port, and $XDG_CONFIG_HOME set to xdg, where
// it records its admin token file. It returns the server's URL, its stdout
// and its data directory; the server stops when the test ends.
func trialServer(t *testing.T, xdg string) (url, stdout, dataDir string) {
	t.Helper()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("MANENT_BOOTSTRAP_TOKEN", "")
	dataDir = filepath.Join(t.TempDir(), "manent-data")
	ctx, cancel := context.WithCancel(context.Background())
	out, errOut := &enginetest.SyncBuffer{}, &enginetest.SyncBuffer{}
	done := make(chan int, 1)
	go func() {
		done <- servercmd.Run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir}, out, errOut, builtin.Register)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Errorf("manent-server serve did not stop within 60s")
		}
	})
	re := regexp.MustCompile(`listening on (http://\S+)`)
	deadline := time.Now().Add(60 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if m := re.FindStringSubmatch(out.String()); m != nil && strings.Contains(out.String(), "from any directory") {
			return m[1], out.String(), dataDir
		}
		select {
		case code := <-done:
			t.Fatalf("manent-server serve exited %d:\n%s\n%s", code, out, errOut)
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("manent-server serve did not start within 60s:\n%s\n%s", out, errOut)
		}
	}
}

// runCLI runs the CLI in-process in dir with env as its whole environment.
func runCLIIn(t *testing.T, dir string, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = cli.Run(context.Background(), cli.Invocation{
		Args: args, Stdout: &out, Stderr: &errOut, Dir: dir,
		Getenv:       func(k string) string { return env[k] },
		PollInterval: 20 * time.Millisecond,
	})
	return code, out.String(), errOut.String()
}

// The trial server records its admin token file for its loopback address;
// the CLI, run from any other directory with no token configured, finds it
// there (README "Trying it by hand").
func TestTrialTokenFromAnyDirectory(t *testing.T) {
	xdg := t.TempDir()
	url, stdout, dataDir := trialServer(t, xdg)
	if !strings.Contains(stdout, "admin token (shown once") {
		t.Errorf("serve did not print the new admin token:\n%s", stdout)
	}

	rec := filepath.Join(xdg, "manent", cli.TrialRecordName)
	st, err := os.Stat(rec)
	if err != nil {
		t.Fatalf("no trial record: %v", err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %04o, want 0600", rec, st.Mode().Perm())
	}
	data, _ := os.ReadFile(rec)
	token, _ := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if len(bytes.TrimSpace(token)) == 0 || bytes.Contains(data, bytes.TrimSpace(token)) {
		t.Errorf("the record must name the token file, not hold the token:\n%s", data)
	}
	if !strings.Contains(string(data), url+":") || !strings.Contains(string(data), filepath.Join(dataDir, "admin.token")) {
		t.Errorf("the record does not map %s to the token file:\n%s", url, data)
	}

	elsewhere := t.TempDir()
	env := map[string]string{"XDG_CONFIG_HOME": xdg, "MANENT_SERVER": url}
	if code, out, errOut := runCLIIn(t, elsewhere, env, "list", "-o", "json"); code != 0 {
		t.Fatalf("manent list from another directory exited %d:\n%s%s", code, out, errOut)
	}
	// localhost is the same loopback server.
	env["MANENT_SERVER"] = strings.Replace(url, "127.0.0.1", "localhost", 1)
	if code, out, errOut := runCLIIn(t, elsewhere, env, "list"); code != 0 {
		t.Fatalf("manent list via localhost exited %d:\n%s%s", code, out, errOut)
	}

	// Without the record (another config dir) there is no token: exit 2.
	env = map[string]string{"XDG_CONFIG_HOME": t.TempDir(), "MANENT_SERVER": url}
	if code, _, errOut := runCLIIn(t, elsewhere, env, "list"); code != 2 {
		t.Fatalf("manent list without the record exited %d, want 2:\n%s", code, errOut)
	}
	// A record others may write is not trusted.
	if err := os.Chmod(rec, 0o622); err != nil {
		t.Fatal(err)
	}
	env = map[string]string{"XDG_CONFIG_HOME": xdg, "MANENT_SERVER": url}
	if code, _, errOut := runCLIIn(t, elsewhere, env, "list"); code != 2 {
		t.Fatalf("manent list with a world-writable record exited %d, want 2:\n%s", code, errOut)
	}
}

// readmeBlock returns the first fenced block of lang after the line
// containing marker in file.
func readmeBlock(t *testing.T, file, marker, lang string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	i := strings.Index(s, marker)
	if i < 0 {
		t.Fatalf("%s has no %q", file, marker)
	}
	s = s[i:]
	open := "```" + lang + "\n"
	j := strings.Index(s, open)
	if j < 0 {
		t.Fatalf("%s has no ```%s block after %q", file, lang, marker)
	}
	s = s[j+len(open):]
	k := strings.Index(s, "```")
	if k < 0 {
		t.Fatalf("%s: unclosed block after %q", file, marker)
	}
	return s[:k]
}

// The README's "Trying it by hand" works as written: make-artifact.sh makes
// the artifact, and both examples/hello/deploy.yml and the README's minimal
// descriptor, copied as they are, validate and deploy to SUCCESS on a real
// trial server, the CLI finding the admin token on its own.
func TestReadmeTryingItByHand(t *testing.T) {
	if _, err := exec.LookPath("tar"); err != nil {
		t.Skip("tar is not installed")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Every examples/ path the README's commands name exists.
	steps := readmeBlock(t, filepath.Join(root, "README.md"), "## Trying it by hand", "sh")
	paths := regexp.MustCompile(`examples/\S+`).FindAllString(steps, -1)
	if len(paths) < 2 {
		t.Fatalf("the README's commands name no examples/ files:\n%s", steps)
	}
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("the README names %s: %v", p, err)
		}
	}

	mk := exec.Command("bash", filepath.Join(root, "examples/hello/make-artifact.sh"))
	mk.Dir = t.TempDir()
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("examples/hello/make-artifact.sh: %v\n%s", err, out)
	} else if !strings.Contains(string(out), "/tmp/manent-example/hello-1.0.0.tar.gz") {
		t.Errorf("make-artifact.sh does not say where the artifact is:\n%s", out)
	}

	minimal := readmeBlock(t, filepath.Join(root, "README.md"), "A minimal descriptor", "yaml")
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "deploy.yml"), []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}

	url, _, dataDir := trialServer(t, t.TempDir())
	env := map[string]string{"XDG_CONFIG_HOME": os.Getenv("XDG_CONFIG_HOME"), "MANENT_SERVER": url}
	for _, tc := range []struct{ dir, file, app string }{
		{root, "examples/hello/deploy.yml", "hello"},
		{work, "deploy.yml", "billing"},
	} {
		if code, out, errOut := runCLIIn(t, tc.dir, env, "validate", "--offline", "-f", tc.file); code != 0 {
			t.Fatalf("validate --offline -f %s exited %d:\n%s%s", tc.file, code, out, errOut)
		}
		if code, out, errOut := runCLIIn(t, tc.dir, env, "validate", "-f", tc.file); code != 0 {
			t.Fatalf("validate -f %s exited %d:\n%s%s", tc.file, code, out, errOut)
		}
		code, out, errOut := runCLIIn(t, tc.dir, env, "deploy", "-f", tc.file, "--wait", "--timeout", "2m", "-o", "json")
		if code != 0 {
			t.Fatalf("deploy -f %s --wait exited %d:\n%s%s", tc.file, code, out, errOut)
		}
		var d struct{ State string }
		if err := json.Unmarshal([]byte(out), &d); err != nil || d.State != "SUCCESS" {
			t.Fatalf("deploy -f %s: state %q (%v):\n%s", tc.file, d.State, err, out)
		}
		index := filepath.Join(dataDir, "targets", tc.app, "staging", "current", "index.html")
		if _, err := os.Stat(index); err != nil {
			t.Errorf("deploy -f %s: the release has no index.html: %v", tc.file, err)
		}
	}
}
