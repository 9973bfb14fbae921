package servercmd

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/enginetest"
)

// A port in use is reported with what to do about it.
func TestServeOnAPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"serve", "--listen", ln.Addr().String(), "--data-dir", t.TempDir()}, &stdout, &stderr, nil)
	if code != 1 || !strings.Contains(stderr.String(), "address already in use") ||
		!strings.Contains(stderr.String(), "(use --listen to choose another address, or stop the server using it)") {
		t.Fatalf("exit %d, stderr %q; want 1 and the --listen hint", code, stderr.String())
	}
}

// The hint names what chose the address in use: it said --listen also when
// the address came from the file's listen: or MANENT_LISTEN.
func TestServeOnAPortInUseNamesWhereTheAddressCameFrom(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	path := filepath.Join(dir, "manent-server.yaml")
	if err := os.WriteFile(path, []byte("log_level: warn\nlisten: "+ln.Addr().String()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, env string
		args      []string
		want      string
	}{
		{"file", "", []string{"--config", path}, "(the address comes from listen at " + path + ":2:9: choose another address there (or with --listen), or stop the server using it)"},
		{"variable", ln.Addr().String(), nil, "(the address comes from MANENT_LISTEN: choose another address there (or with --listen), or stop the server using it)"},
		{"flag over both", "127.0.0.1:1", []string{"--config", path, "--listen", ln.Addr().String()}, "(use --listen to choose another address, or stop the server using it)"},
	} {
		t.Setenv("MANENT_LISTEN", c.env)
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), append([]string{"serve", "--data-dir", filepath.Join(dir, c.name)}, c.args...), &stdout, &stderr, nil)
		if code != 1 || !strings.Contains(stderr.String(), "address already in use") || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 1 and %q", c.name, code, stderr.String(), c.want)
		}
	}
}

// A trial server on another address than the CLI's default (--listen, 8080
// taken) says how to point the CLI at it: it said only where it listened,
// and a newcomer's next 'manent list' asked 127.0.0.1:8080.
func TestTrialElsewhereSaysHowToReachIt(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("MANENT_BOOTSTRAP_TOKEN", "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr enginetest.SyncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, &stdout, &stderr, nil)
	}()
	hint := regexp.MustCompile(`(?m)^the manent CLI asks http://127\.0\.0\.1:8080 unless told otherwise: export MANENT_SERVER=(http://127\.0\.0\.1:\d+) \(or pass --server (http://127\.0\.0\.1:\d+)\)$`)
	listening := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+) `)
	enginetest.Eventually(t, 2*time.Minute, func() bool { return listening.MatchString(stdout.String()) || len(done) > 0 },
		"the server to listen; stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	m := hint.FindStringSubmatch(stdout.String())
	addr := listening.FindStringSubmatch(stdout.String())
	if m == nil || addr == nil || m[1] != addr[1] || m[2] != addr[1] {
		t.Fatalf("stdout:\n%s\nwant the line saying to export MANENT_SERVER=<its address>", stdout.String())
	}
}

// A data directory the server cannot create or write is named, with
// --data-dir, not reported as a bare "permission denied" or "not a
// directory".
func TestServeOnADataDirThatCannotBeWritten(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	readOnly := filepath.Join(dir, "ro")
	if err := os.Mkdir(readOnly, 0o500); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, dataDir string
		config        bool
	}{
		{"under a file, trial", filepath.Join(file, "data"), false},
		{"under a file, configured", filepath.Join(file, "data"), true},
		{"read-only, trial", readOnly, false},
		{"read-only, configured", readOnly, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.HasPrefix(c.name, "read-only") && os.Geteuid() == 0 {
				t.Skip("root writes into a read-only directory")
			}
			args := []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", c.dataDir}
			if c.config {
				cfg := filepath.Join(t.TempDir(), "manent-server.yaml")
				if err := os.WriteFile(cfg, []byte("listen: 127.0.0.1:0\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--config", cfg)
			}
			var stdout, stderr bytes.Buffer
			code := Run(context.Background(), args, &stdout, &stderr, nil)
			if code != 1 || !strings.Contains(stderr.String(), "data directory "+c.dataDir) || !strings.Contains(stderr.String(), "--data-dir") {
				t.Fatalf("exit %d, stderr %q; want 1 naming %s and --data-dir", code, stderr.String(), c.dataDir)
			}
		})
	}
}

// A database URL that cannot be parsed is a configuration mistake (exit
// 2), said without its password; one that cannot be reached stays exit 1.
// pgx's "cannot parse" (a bad port, a bad sslmode) exited 1 like an
// outage, and its best-effort redaction left part of a password holding
// an "@" in the message.
func TestServeDatabaseURLThatCannotBeParsed(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("MANENT_DATABASE", "")
	for _, c := range []struct {
		url, says string
		code      int
	}{
		{"postgres://manent:S3CRET@127.0.0.1:54x32/manent", "invalid port", 2},
		{"postgres://manent:S3CRET@127.0.0.1:5432/manent?sslmode=bogus", "sslmode is invalid", 2},
		{"postgres://manent@127.0.0.1:5432/manent?password=S3CR@ET&sslmode=bogus", "sslmode is invalid", 2},
		{"postgres://manent:S3CR%zzET@127.0.0.1:5432/manent", "cannot be parsed", 2},
		// pgx took ET@127.0.0.1 for the host: "lookup ET@127.0.0.1: no such host".
		{"postgres://manent:S3CR@ET@127.0.0.1:1/manent?sslmode=disable", "write it %40", 2},
		// Nothing listens on port 1: an outage, not a mistake.
		{"postgres://manent:S3CRET@127.0.0.1:1/manent?sslmode=disable&connect_timeout=5", "connect to postgres", 1},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(), "--database", c.url}, &stdout, &stderr, nil)
		out := stdout.String() + stderr.String()
		if code != c.code || !strings.Contains(out, c.says) {
			t.Errorf("%s: exit %d, want %d saying %q:\n%s", c.url, code, c.code, c.says, out)
		}
		for _, part := range []string{"S3CR", "ET@127", "zzET", "CRET"} {
			if strings.Contains(out, part) {
				t.Errorf("%s: the output shows %q of the password:\n%s", c.url, part, out)
			}
		}
	}
}
