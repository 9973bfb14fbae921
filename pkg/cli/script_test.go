package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/manent-io/manent/pkg/agentcmd"
	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/policycmd"
	"github.com/manent-io/manent/pkg/servertest"
)

var updateScripts = flag.Bool("update-scripts", false, "rewrite cmp targets inside the .txtar scripts")

// TestMain makes the test binary double as the real `manent` binary: a script
// can run `exec manent-exec ...` to go through cli.Main, os.Exit and real
// file descriptors in a child process. Most scripts use the in-process
// `manent` command instead (see scriptParams). It doubles as the sibling
// binaries manent-agent and manent-policy too, which testscript puts on the
// scripts' PATH: `manent policy test` and `manent agent` find and run them
// there as they would beside a real manent.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"manent-exec":    func() { os.Exit(cli.Main()) },
		cli.AgentBinary:  func() { os.Exit(agentcmd.Main()) },
		cli.PolicyBinary: func() { os.Exit(policycmd.Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Each script gets a real
// manent-server of its own (pkg/servertest: SQLite, the DBOS engine, the
// HTTP API in local trial mode) on a random loopback port; MANENT_SERVER
// and MANENT_TOKEN point the CLI at it, and SERVER and TOKEN keep the
// values for scripts that change those.
func TestScripts(t *testing.T) {
	testscript.Run(t, scriptParams(t, "testdata/script", serverSetup))
}

// serverSetup starts a server for one script.
func serverSetup(e *testscript.Env) error {
	{
		dir, err := os.MkdirTemp("", "manent-script-server")
		if err != nil {
			return err
		}
		srv, err := servertest.New(dir)
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		e.Defer(func() {
			srv.Close()
			os.RemoveAll(dir)
		})
		for k, v := range map[string]string{"MANENT_SERVER": srv.URL, "MANENT_TOKEN": srv.Token, "SERVER": srv.URL, "TOKEN": srv.Token} {
			e.Setenv(k, v)
		}
		return nil
	}
}

// scriptParams returns the testscript parameters every CLI script suite
// shares. Scripts get two commands:
//
//	manent args...   runs the CLI in-process (cli.Run) with the script's
//	                 environment and working directory; stdout and stderr
//	                 go to the script's stdout/stderr. Like exec, it fails
//	                 the script on a non-zero exit unless prefixed with "!".
//	exitcode N       asserts the exit code of the last `manent` command.
//	jsonvar NAME F   sets $NAME to the string field F of the JSON document
//	                 the last `manent` command printed (e.g. a deploy id).
//	expandwork FILE… replaces "$WORK" in the files with the script's work
//	                 directory (descriptors need absolute file:// URLs).
//	waitlog ID TEXT  waits (at most 30 s) until the log of deploy ID has a
//	                 line containing TEXT.
//	manentin FILE args...
//	                 like manent, with the content of FILE on stdin.
//	filemode FILE PERM
//	                 asserts FILE's permission bits (octal, e.g. 0600).
//	report FILE      sends the cluster snapshot in FILE (JSON) to the
//	                 server, as manent agent does, timed now; $NAME in
//	                 FILE is the script's variable (e.g. a deploy id).
//	fakeserver [-body FILE] NAME STATUS [RETRY-AFTER]
//	                 starts a loopback HTTP server that answers every
//	                 request with STATUS and a problem+json body (and
//	                 Retry-After when given), or never answers when STATUS
//	                 is "hang"; sets $NAME to its URL and $NAME_HITS to a
//	                 file counting its requests. With -body it answers
//	                 FILE's content instead, with the Content-Type
//	                 http.DetectContentType gives it (a server that is
//	                 not manent: an nginx's HTML error page).
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
			e.Values[lastStdoutKey{}] = new([]byte)
			// No config file or admin token of the developer's machine
			// may leak in: HOME is /no-home already; pin the rest.
			e.Setenv("XDG_CONFIG_HOME", e.WorkDir+"/.config")
			if setup != nil {
				return setup(e)
			}
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"manent":     cmdManent,
			"exitcode":   cmdExitcode,
			"jsonvar":    cmdJSONVar,
			"expandwork": cmdExpandWork,
			"waitlog":    cmdWaitLog,
			"fakeserver": cmdFakeServer,
			"report":     cmdReport,
			"manentin":   cmdManentIn, // script_stdin_test.go
			"filemode":   cmdFileMode, // script_stdin_test.go
		},
	}
}

type (
	lastExitKey   struct{}
	lastStdoutKey struct{}
)

// cmdManent runs the CLI in-process, with an empty stdin.
func cmdManent(ts *testscript.TestScript, neg bool, args []string) {
	runManent(ts, neg, args, strings.NewReader(""))
}

// runManent runs the CLI in-process with stdin, records its exit code and
// stdout for exitcode and the stdout checks, and fails the script on an
// unexpected outcome.
func runManent(ts *testscript.TestScript, neg bool, args []string, stdin io.Reader) {
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.Invocation{
		Args:         args,
		Stdin:        stdin,
		Stdout:       &stdout,
		Stderr:       &stderr,
		Getenv:       ts.Getenv,
		Dir:          ts.MkAbs("."),
		PollInterval: 20 * time.Millisecond,
	})
	*ts.Value(lastExitKey{}).(*int) = code
	*ts.Value(lastStdoutKey{}).(*[]byte) = stdout.Bytes()
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

// cmdJSONVar sets an environment variable from the last command's JSON output.
func cmdJSONVar(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: jsonvar NAME FIELD")
	}
	var doc map[string]any
	ts.Check(json.Unmarshal(*ts.Value(lastStdoutKey{}).(*[]byte), &doc))
	v, ok := doc[args[1]].(string)
	if !ok || v == "" {
		ts.Fatalf("the last output has no string field %q", args[1])
	}
	ts.Setenv(args[0], v)
}

// cmdExpandWork replaces "$WORK" in files with the work directory.
func cmdExpandWork(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: expandwork FILE...")
	}
	for _, name := range args {
		p := ts.MkAbs(name)
		b, err := os.ReadFile(p)
		ts.Check(err)
		ts.Check(os.WriteFile(p, bytes.ReplaceAll(b, []byte("$WORK"), []byte(ts.Getenv("WORK"))), 0o644))
	}
}

// cmdWaitLog waits until a deploy's log has a line containing a text.
func cmdWaitLog(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitlog ID TEXT")
	}
	client := api.NewClient(ts.Getenv("SERVER"), ts.Getenv("TOKEN"), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := client.Logs(ctx, args[0])
		if err == nil {
			for _, l := range res.Lines {
				if strings.Contains(l.Text, args[1]) {
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			ts.Fatalf("the log of %s has no line with %q after 30s (last error: %v)", args[0], args[1], err)
		case <-tick.C:
		}
	}
}

// cmdReport sends a cluster snapshot (a JSON file; its time is now) to
// the script's server as an agent does.
func cmdReport(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: report FILE")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	var snap clusterstate.Snapshot
	ts.Check(json.Unmarshal([]byte(os.Expand(string(b), ts.Getenv)), &snap))
	snap.Time = time.Now().UTC()
	_, err = api.NewClient(ts.Getenv("SERVER"), ts.Getenv("TOKEN"), nil).Report(context.Background(), &snap)
	ts.Check(err)
}

// cmdFakeServer starts a misbehaving server for the script.
func cmdFakeServer(ts *testscript.TestScript, neg bool, args []string) {
	var body []byte
	if len(args) >= 2 && args[0] == "-body" {
		b, err := os.ReadFile(ts.MkAbs(args[1]))
		ts.Check(err)
		body, args = b, args[2:]
	}
	if neg || len(args) < 2 || len(args) > 3 {
		ts.Fatalf("usage: fakeserver [-body FILE] NAME STATUS|hang [RETRY-AFTER]")
	}
	hits := ts.MkAbs(args[0] + ".hits")
	var (
		mu sync.Mutex
		n  int
	)
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		_ = os.WriteFile(hits, []byte(strconv.Itoa(n)+"\n"), 0o644)
		mu.Unlock()
		if args[1] == "hang" {
			select {
			case <-stop:
			case <-r.Context().Done():
			}
			return
		}
		status, err := strconv.Atoi(args[1])
		if err != nil {
			http.Error(w, err.Error(), http.StatusTeapot)
			return
		}
		if len(args) == 3 {
			w.Header().Set("Retry-After", args[2])
		}
		if body != nil {
			w.Header().Set("Content-Type", http.DetectContentType(body))
			w.WriteHeader(status)
			_, _ = w.Write(body)
			return
		}
		w.Header().Set("Content-Type", api.ProblemContentType)
		w.WriteHeader(status)
		fmt.Fprintf(w, `{"title":%q,"status":%d,"detail":"the fake server fails on purpose"}`, http.StatusText(status), status)
	}))
	ts.Defer(func() {
		close(stop)
		srv.Close()
	})
	ts.Setenv(args[0], srv.URL)
	ts.Setenv(args[0]+"_HITS", hits)
}
