package servercmd

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
