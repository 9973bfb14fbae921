package servercmd

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRecordTrialServer(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	data := t.TempDir()

	// Not a loopback listener: nothing recorded.
	p, err := recordTrialServer(&net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 8080}, data)
	if err != nil || p != "" {
		t.Fatalf("non-loopback: %q, %v", p, err)
	}
	if _, err := os.Stat(filepath.Join(xdg, "manent")); !os.IsNotExist(err) {
		t.Fatalf("non-loopback created the config directory: %v", err)
	}

	p, err = recordTrialServer(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, data)
	if err != nil || p != filepath.Join(xdg, "manent", trialRecordName) {
		t.Fatalf("loopback: %q, %v", p, err)
	}
	if _, err := recordTrialServer(&net.TCPAddr{IP: net.IPv6loopback, Port: 9090}, filepath.Join(data, "b")); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	for _, want := range []string{
		"http://127.0.0.1:8080:", "token_file: " + filepath.Join(data, "admin.token"),
		"http://[::1]:9090:", "token_file: " + filepath.Join(data, "b", "admin.token"),
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("record lacks %q:\n%s", want, got)
		}
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o600 {
		t.Errorf("record mode %04o, want 0600", st.Mode().Perm())
	}
	if st, _ := os.Stat(filepath.Dir(p)); st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %04o, want 0700", st.Mode().Perm())
	}
}
