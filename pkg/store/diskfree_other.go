//go:build !unix

package store

// diskFree cannot tell the free space here: Probe relies on its write.
func diskFree(string) (uint64, bool) { return 0, false }
