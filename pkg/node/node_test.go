package node_test

import (
	"context"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/servertest"
	"github.com/manent-io/manent/plugins/builtin"
)

// A typo in pipeline.steps stops the server at start (SPEC §11.2), as a
// configuration error (manent-server exits 2), instead of failing deploys
// after they wrote their target.
func TestPipelineTypoIsAConfigurationError(t *testing.T) {
	cfg := servertest.Config(t.TempDir())
	cfg.Pipeline.Steps = []string{"artifacts", "deploy", "activaton"}
	n, err := node.Open(context.Background(), cfg, node.Options{Plugins: builtin.Register})
	if err == nil {
		n.Close(0)
		t.Fatal("a server with an unknown pipeline step started")
	}
	if !node.IsConfigError(err) || !strings.Contains(err.Error(), `unknown step "activaton"`) {
		t.Fatalf("got %v, want a configuration error naming the step", err)
	}
}
