package cli_test

import (
	"bytes"
	"context"
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/manent-io/manent/pkg/cli"
)

var updateScripts = flag.Bool("update-scripts", false, "rewrite cmp targets inside the .txtar scripts")

// TestMain makes the test binary double as the real `manent` binary: a script
// can run `exec manent-exec ...` to go through cli.Main, os.Exit and real
// file descriptors in a child process. Most scripts use the in-process
// `manent` command instead (see scriptParams).
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"manent-exec": func() { os.Exit(cli.Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script gets a fake API
// server of its own whose URL is $FAKE_SERVER (token $FAKE_TOKEN); scripts
// that talk to it set MANENT_SERVER and MANENT_TOKEN themselves.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(t, "testdata/script", func(e *testscript.Env) error {
		srv := startFakeServer()
		e.Defer(srv.Close)
		e.Setenv("FAKE_SERVER", srv.URL)
		e.Setenv("FAKE_TOKEN", fakeToken)
		return nil
	}))
}

// scriptParams returns the testscript parameters every CLI script suite
// shares. Scripts get two commands:
//
//	manent args...   runs the CLI in-process (cli.Run) with the script's
//	                 environment and working directory; stdout and stderr
//	                 go to the script's stdout/stderr. Like exec, it fails
//	                 the script on a non-zero exit unless prefixed with "!".
//	exitcode N       asserts the exit code of the last `manent` command.
//
// setup runs after the common setup; a suite against a real server uses it to
// start the server and set MANENT_SERVER and MANENT_TOKEN:
//
//	testscript.Run(t, scriptParams(t, "testdata/server", func(e *testscript.Env) error {
//		e.Setenv("MANENT_SERVER", srv.URL)
//		e.Setenv("MANENT_TOKEN", token)
//		return nil
//	}))
func scriptParams(t *testing.T, dir string, setup func(*testscript.Env) error) testscript.Params {
	t.Helper()
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       *updateScripts,
		Setup: func(e *testscript.Env) error {
			e.Values[lastExitKey{}] = new(int)
			// No config file or admin token of the developer's machine
			// may leak in: HOME is /no-home already; pin the rest.
			e.Setenv("XDG_CONFIG_HOME", e.WorkDir+"/.config")
			if setup != nil {
				return setup(e)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"manent":   cmdManent,
			"exitcode": cmdExitcode,
		},
	}
}

type lastExitKey struct{}

// cmdManent runs the CLI in-process.
func cmdManent(ts *testscript.TestScript, neg bool, args []string) {
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.Invocation{
		Args:         args,
		Stdin:        strings.NewReader(""),
		Stdout:       &stdout,
		Stderr:       &stderr,
		Getenv:       ts.Getenv,
		Dir:          ts.MkAbs("."),
		PollInterval: time.Millisecond,
	})
	*ts.Value(lastExitKey{}).(*int) = code
	ts.Stdout().Write(stdout.Bytes())
	ts.Stderr().Write(stderr.Bytes())
	switch {
	case code != 0 && !neg:
		ts.Fatalf("manent exited %d", code)
	case code == 0 && neg:
		ts.Fatalf("manent succeeded unexpectedly")
	}
}

// cmdExitcode asserts the exit code of the last `manent` command.
func cmdExitcode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: exitcode N")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := *ts.Value(lastExitKey{}).(*int)
	if (got == want) == neg {
		ts.Fatalf("exit code is %d, want %s%d", got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}
