//go:build unix && !linux

package plugin

import "syscall"

// Without /proc a group is known by its id alone.

func startTime(int) uint64 { return 0 }

func bootID() string { return "" }

// liveTargets is -pgid while a process of rec's group is alive.
func liveTargets(rec procRecord) []int {
	if rec.PGID <= 0 {
		return nil
	}
	if err := syscall.Kill(-rec.PGID, 0); err == nil || err == syscall.EPERM {
		return []int{-rec.PGID}
	}
	return nil
}
