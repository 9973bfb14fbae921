// Package builtin registers manent's built-in plugins — local, script,
// http, kubernetes and cluster-ready — into a plugin registry.
// cmd/manent-server passes Register to the server; tests that run a real
// server pass it too.
//
// It imports pkg/node (for Host and the http plugin's outbound policy),
// pkg/egress, pkg/envconfig (the directories environment configurations
// give the local target), pkg/plugin and the plugins: plugins/local, plugins/script,
// plugins/http, plugins/kubernetes and plugins/clusterready.
package builtin

import (
	"errors"
	"fmt"
	"sync"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/clusterready"
	httpplugin "github.com/manent-io/manent/plugins/http"
	"github.com/manent-io/manent/plugins/kubernetes"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

// Register registers the built-in plugins into reg, configured from the
// node's plugins.* keys: the local target's root, the variables that reach
// a script's command, the process groups of the node.
func Register(reg *plugin.Registry, host node.Host) error {
	root, err := host.Config.LocalRoot()
	if err != nil {
		return fmt.Errorf("plugins.local.root: %w", err)
	}
	sp := script.New(script.Options{PassEnv: host.Config.Plugins.PassEnv, Procs: host.Procs})
	cr := clusterready.New(host.Store)
	hp := httpplugin.New(egress.New(host.Config.HTTPPluginPolicy()))
	if len(host.Config.Plugins.HTTPAllow) == 0 {
		hp = httpplugin.Disabled()
	}
	var kubeconfigs []kubernetes.Kubeconfig // nil: any (local trial mode)
	if ks := host.Config.Kubeconfigs(); ks != nil {
		kubeconfigs = []kubernetes.Kubeconfig{}
		for _, k := range ks {
			kubeconfigs = append(kubeconfigs, kubernetes.Kubeconfig{Path: k.Path, Environments: k.Environments})
		}
	}
	return errors.Join(
		reg.RegisterTarget("local", local.New(local.Options{Root: root, MaxZipEntries: host.Config.Plugins.Local.MaxZipEntries,
			Configured: configuredDirs(host.Environments)})),
		reg.RegisterTarget("script", sp),
		reg.RegisterRunner("script", sp),
		reg.RegisterTarget("kubernetes", kubernetes.New(kubernetes.Options{ClusterReady: cr, Kubeconfigs: kubeconfigs})),
		reg.RegisterRunner("cluster-ready", cr),
		reg.RegisterTarget("http", hp),
	)
}

// configuredDirs returns the local plugin's view of the directories the
// environment configuration gives the local target: envs' listing
// (envconfig.Defaults.Listed, kept fresh there), indexed again only when
// it is a new reading.
func configuredDirs(envs *envconfig.Defaults) func() *local.Configured {
	if envs == nil {
		return nil
	}
	var (
		mu   sync.Mutex
		seen *envconfig.Listing
		idx  *local.Configured
	)
	return func() *local.Configured {
		l := envs.Listed()
		if l == nil {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if l != seen {
			var dirs []local.ConfiguredDir
			for _, g := range l.Given {
				if d, ok := g.Target.With["dir"].(string); ok && g.Target.Plugin == "local" {
					dirs = append(dirs, local.ConfiguredDir{Dir: d, Application: g.Application, Environment: g.Environment, File: g.File})
				}
			}
			seen, idx = l, local.NewConfigured(dirs)
		}
		return idx
	}
}
