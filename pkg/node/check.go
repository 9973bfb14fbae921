package node

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/manent-io/manent/pkg/envconfig"
	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/urlpolicy"
	"github.com/manent-io/manent/plugins/external"
)

// CheckSetup checks, before anything is opened, the parts of cfg that Open
// builds from other files and from the plugins: environments.* and
// descriptor_policy, governance.rules or governance.rego (the file is
// read and checked), artifacts.sources and plugins.steps (each a step
// plugin of plugins or of plugins.path, as Open registers them; nil
// plugins: those of plugins.path alone). Every mistake
// is a field of the *manent.Error returned, its Path the key it is about
// ("plugins.steps[1]"), so that manent-server places each in its file
// beside the other mistakes; Open reported them one section at a time
// and placed nowhere. Paths must be resolved already (a relative
// governance.rules is read from the working directory).
//
// What it built comes back as a *Setup (nil with a mistake), for Open to
// take (Options.Setup) instead of building it again.
func CheckSetup(cfg *Config, plugins Registrar) (*Setup, error) {
	var fields []manent.FieldError
	add := func(err error, key string) {
		var me *manent.Error
		switch {
		case err == nil:
		case errors.As(err, &me) && len(me.Fields) > 0:
			fields = append(fields, me.Fields...)
		default:
			fields = append(fields, manent.FieldError{Path: key, Message: err.Error()})
		}
	}
	s := &Setup{}
	var err error
	s.environments, err = envconfig.FromConfig(cfg.Environments, cfg.DescriptorPolicy)
	add(err, "environments")
	g := cfg.Governance
	switch {
	case g.Rules != "" && g.Rego != "":
		add(errors.New("set either governance.rules or governance.rego, not both"), "governance.rego")
	case g.Rules != "" || g.Rego != "":
		key := "governance.rules"
		if g.Rego != "" {
			key = "governance.rego"
		}
		var err error
		s.governance, err = governance.FromConfig(g.Rules, g.Rego)
		var le *governance.LoadError
		if errors.As(err, &le) && len(le.Problems) > 1 {
			// One problem a line under the key: "<file>:<line>: …".
			err = errors.New(strings.ReplaceAll(err.Error(), "\n", "\n    "))
		}
		add(err, key)
	}
	if len(cfg.Artifacts.Sources) > 0 {
		src, err := urlpolicy.NewSources(cfg.Artifacts.Sources)
		add(err, "artifacts.sources")
		s.sources = &src
	}
	// The plugins of plugins.path: found once, registered by Open. An
	// entry that is there but no directory (a plugin's own file given for
	// its directory) is a mistake; one not there yet is not (serve warns).
	for i, dir := range cfg.Plugins.Path {
		if st, err := os.Stat(dir); err == nil && !st.IsDir() {
			add(fmt.Errorf("%s is not a directory: give the directory that holds the plugins (files named %s<name>)", dir, external.Prefix), fmt.Sprintf("plugins.path[%d]", i))
		}
	}
	if found, err := external.Discover(cfg.Plugins.Path); err == nil {
		s.external = found
	}
	if len(cfg.Plugins.Steps) > 0 {
		add(checkSteps(cfg, plugins, s.external), "plugins.steps")
	}
	if len(fields) == 0 {
		return s, nil
	}
	return nil, &manent.Error{Code: manent.EInvalid, Message: "invalid configuration", Fields: fields}
}

// Setup is what CheckSetup built from a configuration's other files and
// directories: the environments, the governance decider (a Rego policy
// compiled), the artifact sources and the plugins found in plugins.path.
// Open takes it instead of building them again, so each file is read once
// and the server runs with what was checked.
type Setup struct {
	environments *envconfig.Defaults
	governance   governance.Decider // nil: no governance configured
	sources      *urlpolicy.Sources // nil: artifacts.sources unset
	external     map[string]*external.Plugin
}

// checkSteps checks each name of plugins.steps against the step plugins
// registered as Open registers them (found: the plugins of plugins.path,
// nil when they could not be listed). A registration that fails is left
// to Open to report.
func checkSteps(cfg *Config, plugins Registrar, found map[string]*external.Plugin) error {
	if found == nil {
		return nil
	}
	reg := plugin.NewRegistry()
	if plugins != nil {
		if err := plugins(reg, Host{Config: cfg}); err != nil {
			return nil
		}
	}
	if err := external.Register(reg, found); err != nil {
		return nil
	}
	var fields []manent.FieldError
	for i, n := range cfg.Plugins.Steps {
		if _, err := reg.Runner(n); err != nil {
			fields = append(fields, manent.FieldError{Path: fmt.Sprintf("plugins.steps[%d]", i), Message: err.Error()})
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return &manent.Error{Code: manent.EInvalid, Message: "invalid plugins.steps", Fields: fields}
}
