// Package deploy holds no Go code of the product: its tests render the Helm
// chart deploy/helm/manent with the helm binary and apply it, and the
// deploy/agent manifests, with server-side dry-run to a real kube-apiserver
// (pkg/kubetest), and run goreleaser on .goreleaser.yaml (`check`, and a
// snapshot build of one binary). It imports nothing of this module; its
// tests import pkg/kubetest, pkg/node, client-go and viper.
package deploy
