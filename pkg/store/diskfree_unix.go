//go:build unix

package store

import "syscall"

// diskFree is the space an unprivileged writer may still use on the file
// system of dir; ok is false when it cannot be known.
func diskFree(dir string) (free uint64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, false
	}
	return uint64(st.Bavail) * uint64(st.Bsize), true
}
