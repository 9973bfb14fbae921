package servercmd

import "golang.org/x/sys/unix"

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
