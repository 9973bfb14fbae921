package kubetest

import "syscall"

// dieWithParent has the kernel kill the child (SIGKILL) when the thread
// that started it ends: with the test binary, however it dies.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
