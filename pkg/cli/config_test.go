package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	write(t, filepath.Join(xdg, "manent", "config.yaml"), "server: http://file:1\ntoken: file-token\n")
	write(t, filepath.Join(dir, "other.yaml"), "server: http://other:1\n")
	write(t, filepath.Join(dir, "manent-data", "admin.token"), "local-admin\n")
	write(t, filepath.Join(dir, "data2", "admin.token"), "data-dir-admin\n")

	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		server    string
		token     string
		tokenFile string
	}{
		{
			name:   "defaults, no file: admin token of the local trial server",
			env:    map[string]string{},
			server: DefaultServer, token: "local-admin", tokenFile: filepath.Join(dir, "manent-data", "admin.token"),
		},
		{
			name:   "MANENT_DATA_DIR comes first",
			env:    map[string]string{"MANENT_DATA_DIR": "data2"},
			server: DefaultServer, token: "data-dir-admin", tokenFile: filepath.Join(dir, "data2", "admin.token"),
		},
		{
			name:   "no admin token for another server",
			env:    map[string]string{"MANENT_SERVER": "https://manent.example"},
			server: "https://manent.example",
		},
		{
			name:   "localhost is the default server too",
			env:    map[string]string{"MANENT_SERVER": "localhost:8080"},
			server: "http://localhost:8080", token: "local-admin", tokenFile: filepath.Join(dir, "manent-data", "admin.token"),
		},
		{
			name:   "file",
			env:    map[string]string{"XDG_CONFIG_HOME": xdg},
			server: "http://file:1", token: "file-token",
		},
		{
			name:   "env beats file",
			env:    map[string]string{"XDG_CONFIG_HOME": xdg, "MANENT_SERVER": "http://env:1/", "MANENT_TOKEN": "env-token"},
			server: "http://env:1", token: "env-token",
		},
		{
			name:   "flags beat env",
			args:   []string{"--server", "http://flag:1", "--token", "flag-token"},
			env:    map[string]string{"XDG_CONFIG_HOME": xdg, "MANENT_SERVER": "http://env:1", "MANENT_TOKEN": "env-token"},
			server: "http://flag:1", token: "flag-token",
		},
		{
			name:   "one key from each layer",
			args:   []string{"--token", "flag-token"},
			env:    map[string]string{"XDG_CONFIG_HOME": xdg},
			server: "http://file:1", token: "flag-token",
		},
		{
			name:   "--config replaces the default file",
			args:   []string{"--config", "other.yaml"},
			env:    map[string]string{"XDG_CONFIG_HOME": xdg},
			server: "http://other:1",
		},
		{
			name:   "MANENT_CONFIG names the file",
			env:    map[string]string{"XDG_CONFIG_HOME": xdg, "MANENT_CONFIG": filepath.Join(dir, "other.yaml")},
			server: "http://other:1",
		},
		{
			name:   "HOME/.config when XDG_CONFIG_HOME is unset",
			env:    map[string]string{"HOME": filepath.Join(dir, "home")},
			server: "http://home:1", token: "home-token",
		},
	}
	write(t, filepath.Join(dir, "home", ".config", "manent", "config.yaml"), "server: http://home:1\ntoken: home-token\n")

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := configFor(t, dir, tt.args, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server != tt.server || cfg.Token != tt.token || cfg.TokenFile != tt.tokenFile {
				t.Errorf("got server %q token %q (file %q), want %q %q (%q)",
					cfg.Server, cfg.Token, cfg.TokenFile, tt.server, tt.token, tt.tokenFile)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "broken.yaml"), "server: [\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"missing --config", []string{"--config", "nope.yaml"}, nil},
		{"missing MANENT_CONFIG", nil, map[string]string{"MANENT_CONFIG": "nope.yaml"}},
		{"broken file", []string{"--config", "broken.yaml"}, nil},
		{"bad scheme", []string{"--server", "ftp://x"}, nil},
		{"no host", []string{"--server", "http://"}, nil},
		{"an API endpoint, not the base URL", []string{"--server", "http://h:1/api/v1/deployments"}, nil},
		{"the API path twice", nil, map[string]string{"MANENT_SERVER": "http://h:1/api/v1/api/v1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := configFor(t, dir, tt.args, tt.env)
			if got := ExitCodeOf(err); got != ExitUsage {
				t.Errorf("error %v: exit code %d, want %d", err, got, ExitUsage)
			}
		})
	}
}

// A trailing /api/v1 (the API's address) is dropped from the server; a
// prefix before it (a proxy's path) is kept.
func TestServerAPIPath(t *testing.T) {
	for in, want := range map[string]string{
		"http://h:1/api/v1":       "http://h:1",
		"http://h:1/api/v1/":      "http://h:1",
		"h:1/api/v1":              "http://h:1",
		"https://h/manent/api/v1": "https://h/manent",
		"https://h/manent/":       "https://h/manent",
		"http://h:1/api/v10":      "http://h:1/api/v10",
		"http://h:1/apis/v1":      "http://h:1/apis/v1",
	} {
		got, err := normalizeServer(in)
		if err != nil || got != want {
			t.Errorf("normalizeServer(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// A base URL with a query, a fragment or a user and password, or a port
// out of range, is refused with the address to pass instead, and the
// password is never printed:
// the CLI adds /api/v1/… after the base, which would land in the query or
// the fragment, and it authenticates with a token, not the URL's userinfo.
func TestServerAddressRefused(t *testing.T) {
	tests := []struct {
		in, wantErr, wantHint string
	}{
		{"https://x/?token=s3cret", `invalid server address "https://x/?…": a base URL has no query (?…) or fragment (#…): the CLI adds /api/v1/… after it`, "hint: pass https://x"},
		{"https://x/manent?", `invalid server address "https://x/manent?…": a base URL has no query`, "hint: pass https://x/manent"},
		{"https://x/#f", `invalid server address "https://x/#…": a base URL has no query (?…) or fragment (#…)`, "hint: pass https://x"},
		{"x:8080#", `invalid server address "http://x:8080#…": a base URL has no query`, "hint: pass http://x:8080"},
		{"https://user:s3cret@x", `invalid server address "https://user:xxxxx@x": a base URL has no user or password: manent authenticates with a token`, "hint: pass https://x, and the token with --token, MANENT_TOKEN or 'manent login'"},
		{"https://user@x/p?q=s3cret", `invalid server address "https://user@x/p?…": a base URL has no user`, "hint: pass https://x/p, and the token"},
		{"ftp://user:s3cret@x", `invalid server address "ftp://user:xxxxx@x": want http(s)://host[:port]`, "hint: set it with --server"},
		// A port no server can listen on is a mistyped address, not an
		// unreachable server (exit 4, "check that manent-server is running").
		{"http://127.0.0.1:99999", `invalid server address "http://127.0.0.1:99999": port 99999 is not a TCP port (1 to 65535)`, "hint: set it with --server"},
		{"x:0/manent", `invalid server address "http://x:0/manent": port 0 is not a TCP port (1 to 65535)`, "hint: set it with --server"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := normalizeServer(tt.in)
			var usage *UsageError
			if !errors.As(err, &usage) {
				t.Fatalf("normalizeServer(%q) = %q, %v; want a usage error", tt.in, got, err)
			}
			if msg := usage.Error(); !strings.HasPrefix(msg, tt.wantErr) {
				t.Errorf("error %q, want it to begin %q", msg, tt.wantErr)
			}
			if !strings.HasPrefix(usage.Hint, tt.wantHint) {
				t.Errorf("hint %q, want it to begin %q", usage.Hint, tt.wantHint)
			}
			if strings.Contains(usage.Error()+usage.Hint, "s3cret") {
				t.Errorf("the password or the query is printed: %q / %q", usage.Error(), usage.Hint)
			}
		})
	}
}

// configFor resolves the configuration the way a command does: global flags
// parsed, then Factory.Config.
func configFor(t *testing.T, dir string, args []string, env map[string]string) (*Config, error) {
	t.Helper()
	f := NewFactory(Invocation{Dir: dir, Getenv: func(k string) string { return env[k] }})
	if err := f.GlobalFlags().Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Config()
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
