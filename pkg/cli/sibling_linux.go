package cli

import (
	"os/exec"
	"runtime"
	"syscall"
)

// tieToParent makes the kernel send the sibling SIGTERM when manent dies,
// however it dies (SIGKILL, a crash): an orphaned manent-agent would go on
// reporting unseen. The signal follows the thread that started the child,
// so the calling goroutine stays on it until the returned release, called
// once the child has exited.
func tieToParent(c *exec.Cmd) (release func()) {
	runtime.LockOSThread()
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Pdeathsig = syscall.SIGTERM
	return runtime.UnlockOSThread
}
