// Command manent-agent is `manent agent`: it reports what runs in a
// Kubernetes cluster to manent-server. manent runs it for `manent agent`;
// the cluster's Deployment runs it directly. Everything lives in
// pkg/agentcmd.
//
// It imports pkg/agentcmd, and Mozilla's root certificates as a fallback
// for a system without any (the image is FROM scratch): it reports to
// manent-server over https.
package main

import (
	"os"

	_ "golang.org/x/crypto/x509roots/fallback" // used only when the system has no roots

	"github.com/manent-io/manent/pkg/agentcmd"
)

func main() { os.Exit(agentcmd.Main()) }
