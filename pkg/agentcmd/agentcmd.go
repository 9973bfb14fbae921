// Package agentcmd is the manent-agent binary: `manent agent` (SPEC §9) with
// the Kubernetes client. pkg/cli defines the command (flags, checks, help)
// and, in manent, runs it in this binary so that manent does not link
// client-go; here the same command runs the agent of pkg/agent.
//
// It imports pkg/cli and pkg/agent.
package agentcmd

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/manent-io/manent/pkg/agent"
	"github.com/manent-io/manent/pkg/cli"
)

// Main runs manent-agent for the current process and returns its exit code.
func Main() int { return cli.SiblingMain(NewCmd) }

// NewCmd builds `manent agent` running the agent in this process.
func NewCmd(f *cli.Factory) *cobra.Command {
	var cmd *cobra.Command
	cmd = cli.NewCmdAgent(f, func(opts *cli.AgentOptions) error {
		return Run(cmd.Context(), opts)
	})
	return cmd
}

// Run runs the agent with checked options until ctx ends (SIGTERM, SIGINT:
// a clean stop, nil).
func Run(ctx context.Context, opts *cli.AgentOptions) error {
	level, err := opts.Level()
	if err != nil {
		return usageErrorf("--log-level must be debug, info, warn or error")
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	rc, err := agent.KubeConfig(opts.Kubeconfig, opts.Getenv)
	if err != nil {
		return usageErrorf("%v", err)
	}
	rc.UserAgent = "manent-agent"
	rc.Timeout = max(opts.Interval, 10*time.Second)
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return usageErrorf("kubernetes client: %v", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler = slog.NewJSONHandler(opts.IO.ErrOut, hopts)
	if opts.LogFormat == "text" {
		h = slog.NewTextHandler(opts.IO.ErrOut, hopts)
	}
	a, err := agent.New(agent.Config{
		Cluster: opts.Cluster, Namespace: opts.Namespace, Interval: opts.Interval,
		Kube: kube, Server: client, Logger: slog.New(h).With("server", client.Server()),
	})
	if err != nil {
		return usageErrorf("%v", err)
	}
	if err := a.Run(ctx); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return nil // stopped by SIGTERM/SIGINT: a clean exit
}

func usageErrorf(format string, args ...any) error {
	return &cli.UsageError{Err: fmt.Errorf(format, args...)}
}
