// Command manent-agent is `manent agent`: it reports what runs in a
// Kubernetes cluster to manent-server. manent runs it for `manent agent`;
// the cluster's Deployment runs it directly. Everything lives in
// pkg/agentcmd.
//
// It imports pkg/agentcmd.
package main

import (
	"os"

	"github.com/manent-io/manent/pkg/agentcmd"
)

func main() { os.Exit(agentcmd.Main()) }
