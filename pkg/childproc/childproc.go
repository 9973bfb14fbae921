// Package childproc is test support: it starts the long-lived processes a
// test runs beside it (etcd, kube-apiserver, manent-server, a helper copy
// of the test binary) so that they die with the test binary, however it
// dies; imported only by _test.go files and other test-support packages.
//
// A test binary killed by a CI timeout or kill -9 runs no cleanup: the
// servers it had started went on running, holding their ports, files and
// PostgreSQL connections. On Linux the kernel now kills them (SIGKILL)
// with it; elsewhere nothing is asked (no parent-death signal there).
//
// It imports nothing of this module.
package childproc

import (
	"bytes"
	"os"
	"os/exec"
	"runtime"
	"strconv"
)

// Process is a child started by Start, waited for in the background.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts cmd and waits for it in the background: Done is closed once
// it has exited, and Err then holds what cmd.Wait returned. The caller
// must not call cmd.Wait itself; an error is cmd.Start's. A
// cmd.SysProcAttr the caller set (Setpgid) is kept.
//
// On Linux the child gets a parent-death signal (SIGKILL). That signal
// follows the OS thread that started the child, not the process: it fires
// when that thread ends, and a goroutine that ends while locked to its
// thread ends the thread. So the child is started and waited for by a
// goroutine of its own that holds its thread until the child has exited:
// no other goroutine runs on that thread, so none can end it early.
//
// Wait closes the pipes of cmd.StdoutPipe and cmd.StderrPipe once the
// child exits, perhaps before everything was read from them: a caller
// that needs the whole output gives cmd an *os.File or a buffer instead.
func Start(cmd *exec.Cmd) (*Process, error) {
	dieWithParent(cmd)
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := cmd.Start()
		started <- err
		if err == nil {
			p.err = cmd.Wait()
		}
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return p, nil
}

// Done is closed once the child has exited and was waited for.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is what cmd.Wait returned, once Done is closed (nil before).
func (p *Process) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return nil
	}
}

// Wait waits until the child has exited and returns what cmd.Wait
// returned.
func (p *Process) Wait() error {
	<-p.done
	return p.err
}

// Run starts cmd as Start does and waits for it to exit.
func Run(cmd *exec.Cmd) error {
	p, err := Start(cmd)
	if err != nil {
		return err
	}
	return p.Wait()
}

// Alive says whether pid is a running process, not gone and not a zombie
// (it reads /proc: false where there is none).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
