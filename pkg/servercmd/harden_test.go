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

// mainInheritedEnv makes that child also say whether the file its parent
// left open as fd 3 would still be open in a program it starts.
const mainInheritedEnv = "MANENT_TEST_MAIN_INHERITED"

func TestMain(m *testing.M) {
	if os.Getenv(mainDumpableEnv) == "1" {
		os.Args = []string{"manent-server", "version"}
		if code := Main(nil); code != 0 {
			os.Exit(code)
		}
		d, err := dumpable()
		fmt.Printf("dumpable=%d err=%v\n", d, err)
		if os.Getenv(mainInheritedEnv) == "1" {
			// fd 3: the file the parent gave as ExtraFiles[0].
			passed, err := passedOnExec(3)
			fmt.Printf("fd3 passed on exec=%v err=%v\n", passed, err)
		}
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

// TestMainClosesInheritedFilesOnExec: a file manent-server inherited open
// from whatever started it (a supervisor's pipe, a shell's descriptor, a
// socket) is not passed on to the programs it starts — its steps' commands,
// external plugins, the lifeline. Go marks close-on-exec only the files it
// opens itself, so a step's `ls -l /proc/self/fd` listed such a file (a
// pipe of the shell that started the server, fd 251) and could write to it.
func TestMainClosesInheritedFilesOnExec(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc/self/fd is Linux's")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), mainDumpableEnv+"=1", mainInheritedEnv+"=1")
	cmd.ExtraFiles = []*os.File{w} // fd 3 in the child, open across its exec
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "fd3 passed on exec=false err=<nil>") {
		t.Fatalf("after Main a file the process inherited is still passed to the programs it starts:\n%s", out)
	}
}
