package servercmd

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// hideProcess makes manent-server non-dumpable. Its steps run as the same
// user, and a same-user process may read another's /proc/<pid>/environ
// and memory unless that one is non-dumpable: a custom step could read
// the server's environment (MANENT_BOOTSTRAP_TOKEN, callback and ITSM
// secrets, DSNs) through /proc/$PPID/environ although its own environment
// holds none of them (SPEC §11.1). Non-dumpable, those files belong to
// root, the server writes no core dump, and only root (CAP_SYS_PTRACE)
// may attach a debugger. A step's exec makes it dumpable again: this
// hides the server, not the steps.
func hideProcess() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// dumpable reports the process's dumpable flag (tests).
func dumpable() (int, error) {
	return unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
}

// passedOnExec says whether fd stays open in a program the process starts
// (tests).
func passedOnExec(fd int) (bool, error) {
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
	if err != nil {
		return false, err
	}
	return flags&unix.FD_CLOEXEC == 0, nil
}

// closeInheritedOnExec marks close-on-exec every file the process
// inherited open beyond stdin, stdout and stderr. Go sets the flag on the
// files it opens itself, not on those a parent left open across its exec
// (a supervisor's or a shell's pipe, a socket): those would reach every
// program the server starts — its steps' commands, external plugins —
// which could read or write them. The server itself keeps them open.
func closeInheritedOnExec() error {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err
	}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil {
			continue // the directory ReadDir read, closed since
		}
		if flags&unix.FD_CLOEXEC == 0 {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, flags|unix.FD_CLOEXEC); err != nil {
				return err
			}
		}
	}
	return nil
}
