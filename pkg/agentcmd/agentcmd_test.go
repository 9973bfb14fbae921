package agentcmd

import (
	"testing"

	"github.com/manent-io/manent/pkg/agent"
	"github.com/manent-io/manent/pkg/cli"
)

// TestDefaultInterval: the --interval default manent shows (it does not link
// pkg/agent) is the agent's.
func TestDefaultInterval(t *testing.T) {
	if cli.DefaultAgentInterval != agent.DefaultInterval {
		t.Errorf("cli.DefaultAgentInterval = %s, agent.DefaultInterval = %s", cli.DefaultAgentInterval, agent.DefaultInterval)
	}
}
