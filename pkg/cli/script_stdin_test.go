package cli_test

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/manent-io/manent/pkg/cli"
)

// cmdManentIn is `manentin FILE args...`: `manent args...` with the content
// of FILE on stdin (the in-process `manent` reads an empty stdin).
func cmdManentIn(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: manentin FILE args...")
	}
	in, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	var stdout, stderr bytes.Buffer
	code := cli.Run(context.Background(), cli.Invocation{
		Args:         args[1:],
		Stdin:        bytes.NewReader(in),
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

// cmdFileMode is `filemode FILE PERM`: asserts FILE's permission bits
// (octal, e.g. 0600).
func cmdFileMode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: filemode FILE PERM")
	}
	st, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	got := "0" + strconv.FormatUint(uint64(st.Mode().Perm()), 8)
	if (got == args[1]) == neg {
		ts.Fatalf("%s has mode %s, want %s%s", args[0], got, map[bool]string{true: "not ", false: ""}[neg], args[1])
	}
}
