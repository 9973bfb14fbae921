// Package builtin registers manent's built-in plugins — local, script,
// http, kubernetes and cluster-ready — into a plugin registry.
// cmd/manent-server passes Register to the server; tests that run a real
// server pass it too.
//
// It imports pkg/node (for Host and the http plugin's outbound policy),
// pkg/egress, pkg/plugin and the plugin packages under plugins/.
package builtin

import (
	"errors"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/clusterready"
	httpplugin "github.com/manent-io/manent/plugins/http"
	"github.com/manent-io/manent/plugins/kubernetes"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

// Register registers the built-in plugins into reg.
func Register(reg *plugin.Registry, host node.Host) error {
	sp := script.New()
	return errors.Join(
		reg.RegisterTarget("local", local.New()),
		reg.RegisterTarget("script", sp),
		reg.RegisterRunner("script", sp),
		reg.RegisterTarget("kubernetes", kubernetes.New(kubernetes.Options{})),
		reg.RegisterRunner("cluster-ready", clusterready.New(host.Store)),
		reg.RegisterTarget("http", httpplugin.New(egress.New(host.Config.HTTPPluginPolicy()))),
	)
}
