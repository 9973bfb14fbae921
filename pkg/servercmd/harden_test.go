package servercmd

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
)

// mainDumpableEnv makes the test binary, run again as a child, call Main
// (manent-server version) and print its dumpable flag afterwards.
const mainDumpableEnv = "MANENT_TEST_MAIN_DUMPABLE"

func TestMain(m *testing.M) {
	if os.Getenv(mainDumpableEnv) == "1" {
		os.Args = []string{"manent-server", "version"}
		if code := Main(nil); code != 0 {
			os.Exit(code)
		}
		d, err := dumpable()
		fmt.Printf("dumpable=%d err=%v\n", d, err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestMainHidesTheProcess: manent-server makes itself non-dumpable before
// anything else, so that a step running as the same user cannot read the
// server's environment through /proc/$PPID/environ (SPEC §11.1). The test
// process itself starts dumpable (1), as every exec'd process does.
func TestMainHidesTheProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("prctl is Linux's")
	}
	if d, err := dumpable(); err != nil || d != 1 {
		t.Fatalf("the test process: dumpable %d, %v; want 1 before Main", d, err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainDumpableEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "dumpable=0 err=<nil>") {
		t.Fatalf("after Main the process is still dumpable:\n%s", out)
	}
}
