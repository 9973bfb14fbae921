package childproc

import (
	"os/exec"
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
