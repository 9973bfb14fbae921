package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/servertest"
)

// The documented precedence, key by key: flags > MANENT_SERVER/MANENT_TOKEN
// > the selected context (--context > MANENT_CONTEXT > current_context:) >
// the top-level keys > the trial token.
func TestContextPrecedence(t *testing.T) {
	dir := t.TempDir()
	xdg := filepath.Join(dir, "xdg")
	write(t, filepath.Join(dir, "b.token"), "b-token\n")
	write(t, filepath.Join(xdg, "manent", "config.yaml"), `server: http://legacy:1
token: legacy-token
request_timeout: 7s
current_context: a
contexts:
  a: {server: "http://a:1", token: a-token}
  B: {server: "http://b:1", token_file: `+filepath.Join(dir, "b.token")+`, request_timeout: 3s}
  notoken: {server: "http://c:1"}
  gone: {server: "http://d:1", token_file: /nonexistent/token}
  trial: {server: "http://127.0.0.1:8181"}
`)
	write(t, filepath.Join(xdg, "manent", TrialRecordName),
		"servers:\n  http://127.0.0.1:8181: {token_file: "+filepath.Join(dir, "trial.token")+"}\n")
	write(t, filepath.Join(dir, "trial.token"), "trial-token\n")
	write(t, filepath.Join(dir, "nocurrent.yaml"), "server: http://legacy:1\ntoken: legacy-token\ncontexts:\n  a: {server: \"http://a:1\", token: a-token}\n")

	tests := []struct {
		name          string
		args          []string
		env           map[string]string
		server, token string
		context       string
		timeout       time.Duration
		from          string // TokenSource.Name
	}{
		{name: "current_context", server: "http://a:1", token: "a-token", context: "a", timeout: 7 * time.Second, from: `context "a"`},
		{name: "--context; token file; names are case-sensitive", args: []string{"--context", "B"},
			server: "http://b:1", token: "b-token", context: "B", timeout: 3 * time.Second,
			from: `the token file of context "B" (` + filepath.Join(dir, "b.token") + ")"},
		{name: "MANENT_CONTEXT beats current_context", env: map[string]string{"MANENT_CONTEXT": "B"},
			server: "http://b:1", token: "b-token", context: "B", timeout: 3 * time.Second,
			from: `the token file of context "B" (` + filepath.Join(dir, "b.token") + ")"},
		{name: "--context beats MANENT_CONTEXT", args: []string{"--context", "a"}, env: map[string]string{"MANENT_CONTEXT": "B"},
			server: "http://a:1", token: "a-token", context: "a", timeout: 7 * time.Second, from: `context "a"`},
		{name: "MANENT_SERVER beats the context, its token stays", env: map[string]string{"MANENT_SERVER": "http://env:1"},
			server: "http://env:1", token: "a-token", context: "a", timeout: 7 * time.Second, from: `context "a"`},
		{name: "MANENT_TOKEN beats the context; its token file is not read", args: []string{"--context", "gone"},
			env:    map[string]string{"MANENT_TOKEN": "env-token"},
			server: "http://d:1", token: "env-token", context: "gone", timeout: 7 * time.Second, from: "MANENT_TOKEN"},
		{name: "flags beat everything", args: []string{"--context", "B", "--server", "http://flag:1", "--token", "flag-token", "--request-timeout", "1s"},
			env:    map[string]string{"MANENT_SERVER": "http://env:1", "MANENT_TOKEN": "env-token"},
			server: "http://flag:1", token: "flag-token", context: "B", timeout: time.Second, from: "--token"},
		{name: "a context without a token never takes the top-level one", args: []string{"--context", "notoken"},
			server: "http://c:1", context: "notoken", timeout: 7 * time.Second},
		{name: "a loopback context without a token: the trial token", args: []string{"--context", "trial"},
			server: "http://127.0.0.1:8181", token: "trial-token", context: "trial", timeout: 7 * time.Second,
			from: "the trial admin token file " + filepath.Join(dir, "trial.token")},
		{name: "no context selected: the top-level keys", args: []string{"--config", filepath.Join(dir, "nocurrent.yaml")},
			server: "http://legacy:1", token: "legacy-token", timeout: DefaultRequestTimeout,
			from: "token: in " + filepath.Join(dir, "nocurrent.yaml")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_CONFIG_HOME": xdg}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := configFor(t, dir, tt.args, env)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Server != tt.server || cfg.Token != tt.token || cfg.Context != tt.context || cfg.RequestTimeout != tt.timeout {
				t.Errorf("got server %q token %q context %q timeout %v, want %q %q %q %v",
					cfg.Server, cfg.Token, cfg.Context, cfg.RequestTimeout, tt.server, tt.token, tt.context, tt.timeout)
			}
			if cfg.TokenSource.Name != tt.from {
				t.Errorf("token from %q, want %q", cfg.TokenSource.Name, tt.from)
			}
		})
	}

	// A context whose token file is missing is a usage error naming it.
	_, err := configFor(t, dir, []string{"--context", "gone"}, map[string]string{"XDG_CONFIG_HOME": xdg})
	if ExitCodeOf(err) != ExitUsage || !strings.Contains(fmtErr(err), "/nonexistent/token") {
		t.Errorf("missing token file: %v (exit %d), want a usage error naming the file", err, ExitCodeOf(err))
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestUnknownContext(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "two.yaml"), "contexts:\n  prod: {server: http://p:1}\n  staging: {server: http://s:1}\n")
	write(t, filepath.Join(dir, "stale.yaml"), "current_context: old\ncontexts:\n  prod: {server: http://p:1}\n")
	write(t, filepath.Join(dir, "none.yaml"), "server: http://x:1\n")
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"--context", []string{"--config", "two.yaml", "--context", "qa"}, nil,
			`unknown context "qa" (--context) in ` + filepath.Join(dir, "two.yaml") + `: known contexts: prod, staging`},
		{"MANENT_CONTEXT", []string{"--config", "two.yaml"}, map[string]string{"MANENT_CONTEXT": "qa"},
			`unknown context "qa" (MANENT_CONTEXT)`},
		{"a stale current_context", []string{"--config", "stale.yaml"}, nil,
			`unknown context "old" (current_context)`},
		{"no contexts at all", []string{"--config", "none.yaml", "--context", "qa"}, nil, `none is defined`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := configFor(t, dir, tt.args, tt.env)
			var usage *UsageError
			if !errors.As(err, &usage) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(usage.Hint, "manent context add") {
				t.Errorf("got %v, want a usage error containing %q with a hint", err, tt.want)
			}
		})
	}
}

// save keeps every other key and comment, writes mode 0600 through a
// temporary file (none is left behind), and reads back what it wrote.
func TestCLIFileSave(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "manent", "config.yaml")
	write(t, path, "# my servers\nserver: http://legacy:1 # old one\nrequest_timeout: 10s\nextra: {keep: me}\n")
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := readCLIFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Contexts["Prod.eu"] = &contextEntry{Server: "https://p.example", Token: "secret"}
	f.Contexts["dev"] = &contextEntry{Server: "http://127.0.0.1:8080"}
	f.CurrentContext = "Prod.eu"
	if err := f.save(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	for _, want := range []string{"# my servers", "server: http://legacy:1 # old one", "request_timeout: 10s", "keep: me", "current_context: Prod.eu", "Prod.eu:", "token: secret"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("saved file lacks %q:\n%s", want, data)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("the directory has %d entries, want only config.yaml (no temporary file left)", len(entries))
	}
	g, err := readCLIFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if g.CurrentContext != "Prod.eu" || g.Contexts["Prod.eu"].Token != "secret" || g.Contexts["dev"].Server != "http://127.0.0.1:8080" {
		t.Errorf("read back %+v", g)
	}
	// Deleting the last context and unselecting drops both keys.
	g.Contexts = map[string]*contextEntry{}
	g.CurrentContext = ""
	if err := g.save(); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if strings.Contains(string(data), "contexts") || strings.Contains(string(data), "current_context") || !strings.Contains(string(data), "keep: me") {
		t.Errorf("after deleting every context:\n%s", data)
	}

	// A new file in a new directory: directory 0700, file 0600.
	fresh := filepath.Join(dir, "new", "manent", "config.yaml")
	h, err := readCLIFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	h.Contexts["x"] = &contextEntry{Server: "http://x:1"}
	if err := h.save(); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(filepath.Dir(fresh)); st.Mode().Perm() != 0o700 {
		t.Errorf("new directory mode %04o, want 0700", st.Mode().Perm())
	}
}

func TestLooseModeWarning(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, content string
		mode          os.FileMode
		warn          bool
	}{
		{"top-level token, 0644", "token: t\n", 0o644, true},
		{"context token, 0640", "contexts:\n  a: {server: http://a:1, token: t}\n", 0o640, true},
		{"token, 0600", "token: t\n", 0o600, false},
		{"no token, 0644", "server: http://a:1\ncontexts:\n  a: {server: http://a:1, token_file: /x}\n", 0o644, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml")
			write(t, p, tt.content)
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			cfg, err := configFor(t, dir, []string{"--config", p, "--context", "", "--token", "x"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(cfg.Warnings) > 0; got != tt.warn {
				t.Errorf("warnings %q, want a warning: %v", cfg.Warnings, tt.warn)
			}
		})
	}
}

func TestLoopbackKeys(t *testing.T) {
	for server, want := range map[string]string{
		"http://127.0.0.1:8080":  "http://127.0.0.1:8080",
		"http://localhost:9090":  "http://127.0.0.1:9090 http://[::1]:9090",
		"http://[::1]:8080":      "http://[::1]:8080",
		"http://127.0.0.2:8080":  "http://127.0.0.2:8080",
		"https://127.0.0.1:8080": "",
		"http://10.0.0.1:8080":   "",
		"http://manent.example":  "",
		"http://127.0.0.1":       "",
	} {
		if got := strings.Join(loopbackKeys(server), " "); got != want {
			t.Errorf("loopbackKeys(%q) = %q, want %q", server, got, want)
		}
	}
}

// login with a token typed at the (here simulated) terminal prompt: a
// refused token writes nothing; a good one is stored and selected. The
// prompt names the server and never echoes the token.
func TestLoginPrompt(t *testing.T) {
	t.Parallel()
	srv, err := servertest.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	login := func(typed string) (string, error) {
		var out, errOut bytes.Buffer
		f := NewFactory(Invocation{Dir: dir, Stdout: &out, Stderr: &errOut})
		if err := f.GlobalFlags().Parse([]string{"--config", cfgPath, "--context", "prod", "--server", srv.URL}); err != nil {
			t.Fatal(err)
		}
		var prompt string
		err := loginRun(context.Background(), &LoginOptions{IO: f.IOStreams, Factory: f, ReadSecret: func(p string) (string, error) {
			prompt = p
			return typed, nil
		}})
		if !strings.Contains(prompt, srv.URL) || strings.Contains(out.String()+errOut.String(), typed) {
			t.Errorf("prompt %q, output %q %q", prompt, out.String(), errOut.String())
		}
		return out.String(), err
	}
	if _, err := login("wrong-token"); ExitCodeOf(err) != ExitUsage {
		t.Fatalf("a refused token: %v (exit %d), want exit 2", err, ExitCodeOf(err))
	}
	if _, err := os.Stat(cfgPath); !os.IsNotExist(err) {
		t.Fatalf("a refused token wrote the config file: %v", err)
	}
	out, err := login(srv.Token + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, `context "prod"`) {
		t.Errorf("output %q", out)
	}
	f, err := readCLIFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	if f.CurrentContext != "prod" || f.Contexts["prod"].Token != srv.Token || f.Contexts["prod"].Server != srv.URL || f.Mode != 0o600 {
		t.Errorf("stored %+v (mode %04o)", f.Contexts["prod"], f.Mode)
	}
}
