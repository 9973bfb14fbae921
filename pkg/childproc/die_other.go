//go:build !linux

package childproc

import "os/exec"

// dieWithParent asks nothing here: only Linux stops a child when its
// parent dies; elsewhere a test binary killed leaves its children running
// until they are killed by hand.
func dieWithParent(*exec.Cmd) {}
