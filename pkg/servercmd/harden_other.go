//go:build !linux

package servercmd

// hideProcess does nothing outside Linux (see harden_linux.go).
func hideProcess() error { return nil }

func dumpable() (int, error) { return 0, nil }
