package cli_test

import (
	"bytes"
	"os"
	"strconv"

	"github.com/rogpeppe/go-internal/testscript"
)

// cmdManentIn is `manentin FILE args...`: `manent args...` with the content
// of FILE on stdin (the in-process `manent` reads an empty stdin).
func cmdManentIn(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 {
		ts.Fatalf("usage: manentin FILE args...")
	}
	in, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	runManent(ts, neg, args[1:], bytes.NewReader(in))
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
