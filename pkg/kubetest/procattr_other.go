//go:build !linux

package kubetest

import "syscall"

// dieWithParent asks nothing here: only Linux stops a child when its
// parent dies; elsewhere a test binary killed leaves etcd and
// kube-apiserver running until they are killed by hand.
func dieWithParent() *syscall.SysProcAttr { return nil }
