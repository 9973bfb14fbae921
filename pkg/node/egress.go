package node

import (
	"errors"
	"fmt"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/urlpolicy"
)

// maxRedirects is how many redirects artifact downloads and health checks
// follow (net/http's default), each hop checked like the first request.
// Callbacks, chat, ITSM and the http plugin follow none.
const maxRedirects = 10

// The outbound policies (SPEC §11.1): one pkg/egress policy per use, from
// the configuration. In local trial mode, artifact downloads and health
// checks may reach private and loopback addresses (never a cloud metadata
// address); in a configured server only the hosts and addresses the
// allow-lists name.

// ArtifactPolicy is the policy of artifact downloads: artifacts.sources
// (every file, http and https URL in local trial mode without sources),
// checked on every redirect hop.
func (c *Config) ArtifactPolicy() egress.Policy {
	sources := c.Artifacts.Sources
	if len(sources) == 0 && c.Trial {
		sources = urlpolicy.TrialPatterns()
	}
	return egress.Policy{
		Outbound: urlpolicy.Outbound{
			Use: "artifact", Key: "artifacts.sources", Allow: sources,
			Schemes: []string{"file", "http", "https"}, Private: c.Trial,
		},
		MaxRedirects: maxRedirects,
	}
}

// HealthPolicy is the policy of the descriptors' health checks:
// health.allow, by default every http and https URL on a public address
// (any address in local trial mode).
func (c *Config) HealthPolicy() egress.Policy {
	allow := c.Health.Allow
	if len(allow) == 0 {
		allow = []string{"http://**", "https://**"}
	}
	return egress.Policy{
		Outbound:     urlpolicy.Outbound{Use: "health check", Key: "health.allow", Allow: allow, Private: c.Trial},
		MaxRedirects: maxRedirects,
	}
}

// HTTPPluginPolicy is the policy of the http target plugin:
// plugins.http_allow (nothing when empty), no redirects.
func (c *Config) HTTPPluginPolicy() egress.Policy {
	return egress.Policy{Outbound: urlpolicy.Outbound{Use: "http plugin call", Key: "plugins.http_allow", Allow: c.Plugins.HTTPAllow}}
}

// validateEgress reports the allow-lists that do not compile, and an
// itsm.url that is not an http(s) URL.
func (c *Config) validateEgress() error {
	var errs []error
	for _, p := range []egress.Policy{c.ArtifactPolicy(), c.HealthPolicy(), c.HTTPPluginPolicy()} {
		errs = append(errs, p.Validate())
	}
	if c.ITSM.URL != "" && egress.Origin(c.ITSM.URL) == "" {
		errs = append(errs, fmt.Errorf("itsm.url: %q is not an http or https URL", c.ITSM.URL))
	}
	return errors.Join(errs...)
}
