//go:build !linux

package servercmd

// hideProcess does nothing outside Linux (see harden_linux.go).
func hideProcess() error { return nil }

// closeInheritedOnExec does nothing outside Linux (see harden_linux.go).
func closeInheritedOnExec() error { return nil }

func dumpable() (int, error) { return 0, nil }

func passedOnExec(int) (bool, error) { return false, nil }
