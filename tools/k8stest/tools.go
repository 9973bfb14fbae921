//go:build tools

// Package k8stest pins the versions of kube-apiserver and etcd that the
// end-to-end tests of manent's agent start on loopback. It is a separate
// module so that k8s.io/kubernetes never enters manent's own go.mod; build
// it with scripts/k8s-test-env.sh.
package k8stest

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
