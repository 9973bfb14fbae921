package childproc

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// dieWithParent has the kernel kill the child (SIGKILL) when the thread
// that started it ends: with the test binary, however it dies.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// Alive says whether pid is a running process, not gone and not a zombie
// (Linux only: it reads /proc).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
