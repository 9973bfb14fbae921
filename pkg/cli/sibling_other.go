//go:build !linux

package cli

import "os/exec"

// tieToParent does nothing here: only Linux stops a child when its parent
// dies; elsewhere a supervisor that kills manent must kill its group.
func tieToParent(*exec.Cmd) (release func()) { return func() {} }
