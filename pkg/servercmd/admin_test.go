package servercmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/auth"
)

// A mistyped admin task exits 2 naming it, instead of printing the help and
// exiting 0 (a script's `admin verify-adit` would pass unchecked).
func TestAdminUnknownTask(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"admin", "verify-adit"}, &stdout, &stderr, nil)
	if code != 2 || !strings.Contains(stderr.String(), `unknown command "verify-adit" for "manent-server admin"`) {
		t.Fatalf("exit %d, stderr %q; want 2 and the unknown task named", code, stderr.String())
	}
	stdout.Reset()
	if code := Run(context.Background(), []string{"admin"}, &stdout, &stderr, nil); code != 0 || !strings.Contains(stdout.String(), "verify-audit") {
		t.Fatalf("admin alone: exit %d, stdout %q; want its help", code, stdout.String())
	}
}

// admin new-token prints a fresh token alone on stdout and, on stderr, the
// auth.tokens entry that declares it: that entry, pasted into a
// configuration file the server loads, authenticates the token as
// token:NAME with its groups, and no other token. A bad or reserved name
// is a usage error and prints no token.
func TestAdminNewToken(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"admin", "new-token", "--name", "ci", "--group", "deployers"}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	token := strings.TrimSuffix(stdout.String(), "\n")
	if !regexp.MustCompile(`^mnt_[A-Z2-7]{26}$`).MatchString(token) {
		t.Fatalf("stdout %q: want the token alone", stdout.String())
	}
	if strings.Contains(stderr.String(), token) {
		t.Fatal("stderr repeats the token")
	}
	again := bytes.Buffer{}
	Run(context.Background(), []string{"admin", "new-token", "--name", "ci"}, &again, io.Discard, nil)
	if strings.TrimSpace(again.String()) == token {
		t.Fatal("two calls made the same token")
	}

	// The printed entry, as an operator pastes it.
	entry, _, ok := strings.Cut(stderr.String(), "\nthen grant")
	_, entry, ok2 := strings.Cut(entry, "manent-server.yaml:\n\n")
	if !ok || !ok2 {
		t.Fatalf("stderr has no entry to paste:\n%s", stderr.String())
	}
	path := filepath.Join(t.TempDir(), "manent-server.yaml")
	if err := os.WriteFile(path, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := loadConfig(path, nil)
	if err != nil {
		t.Fatalf("the entry does not load: %v\n%s", err, entry)
	}
	a, err := auth.New(auth.Config{Tokens: cfg.Auth.Tokens})
	if err != nil {
		t.Fatal(err)
	}
	id, err := a.Authenticate(context.Background(), "Bearer "+token)
	if err != nil || id.Subject != "token:ci" || len(id.Groups) != 1 || id.Groups[0] != "deployers" {
		t.Fatalf("the new token authenticates as %+v, %v; want token:ci in deployers", id, err)
	}
	if _, err := a.Authenticate(context.Background(), "Bearer "+strings.TrimSpace(again.String())); err == nil {
		t.Fatal("another token authenticates with this entry")
	}

	for _, args := range [][]string{{"--name", "bad name"}, {"--name", "admin"}, {}, {"--name", "ci", "--group", "two words"}} {
		stdout.Reset()
		stderr.Reset()
		if code := Run(context.Background(), append([]string{"admin", "new-token"}, args...), &stdout, &stderr, nil); code != 2 || stdout.Len() != 0 {
			t.Errorf("new-token %q: exit %d, stdout %q; want 2 and no token", args, code, stdout.String())
		}
	}
}

// An empty item of a list flag — --group "" (a variable left empty),
// --group a,, --executor-id "w1," — was dropped without a word (new-token
// made a token without the group meant) or taken for the executor id "".
// Each is a usage error naming the flag; no token is printed.
func TestAdminListFlagsRefuseEmptyItems(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "new-token", "--name", "ci", "--group", ""}, `invalid argument "" for "--group" flag: a group name must not be empty`},
		{[]string{"admin", "new-token", "--name", "ci", "--group", "deployers", "--group="}, `invalid argument "" for "--group" flag: a group name must not be empty`},
		{[]string{"admin", "new-token", "--name", "ci", "--group", "a,,b"}, `invalid argument "a,,b" for "--group" flag: a group name must not be empty`},
		{[]string{"admin", "recover", "--executor-id", "worker-2,"}, `invalid argument "worker-2," for "--executor-id" flag: an executor id must not be empty`},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), c.args, &stdout, &stderr, nil)
		if code != 2 || !strings.Contains(stderr.String(), c.want) || stdout.Len() > 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2, nothing on stdout and %q", c.args, code, stdout.String(), stderr.String(), c.want)
		}
	}
	// Several groups, repeated or comma-separated, are all kept.
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), []string{"admin", "new-token", "--name", "ci", "--group", "a,b", "--group", "c"}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "groups:\n") || !strings.Contains(stderr.String(), "- a\n") || !strings.Contains(stderr.String(), "- b\n") || !strings.Contains(stderr.String(), "- c\n") {
		t.Fatalf("the entry lacks groups a, b and c:\n%s", stderr.String())
	}
}

// The admin tasks that read the configuration did not warn of a mistyped
// MANENT_* variable as serve does: MANENT_DATADIR=/srv/manent was ignored
// without a word and the task said there was no database in ./manent-data.
// Each now warns through the same function, before anything else.
func TestAdminTasksWarnOfStrayVariables(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MANENT_DATADIR", dir)
	const warning = `"level":"WARN","msg":"MANENT_DATADIR is no variable of manent-server: it is ignored (did you mean MANENT_DATA_DIR?)"`
	for _, args := range [][]string{
		{"admin", "verify-audit"},
		{"admin", "workers"},
		{"admin", "backup", "--to", filepath.Join(dir, "backup.db")},
		{"admin", "recover", "--executor-id", "worker-2"},
	} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), append(args, "--data-dir", filepath.Join(dir, "empty")), &stdout, &stderr, nil)
		if code != 2 || !strings.Contains(stderr.String(), "no manent database") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and no database", args, code, stderr.String())
		}
		if !strings.Contains(stderr.String(), warning) {
			t.Errorf("%q did not warn of MANENT_DATADIR:\n%s", args, stderr.String())
		}
	}
	// new-token reads no configuration: nothing to warn of.
	var stderr bytes.Buffer
	if code := Run(context.Background(), []string{"admin", "new-token", "--name", "ci"}, io.Discard, &stderr, nil); code != 0 || strings.Contains(stderr.String(), "MANENT_DATADIR") {
		t.Errorf("new-token: exit %d, stderr %q", code, stderr.String())
	}
}
