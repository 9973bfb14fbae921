package envconfig

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/manent"
)

// Settings is the `environments` key of manent-server.yaml:
//
//	environments: {provider: files, dir: /etc/manent/environments}
//	environments: {provider: http, url: "https://cfg.example/environments/{environment}?application={application}", timeout: 5s}
//	environments: {provider: none}   # the default: no environment configuration
//
// With required: true, a deploy to an environment the provider has no
// configuration for is refused.
type Settings struct {
	// Provider is "files", "http", or "none" (also when empty).
	Provider string `mapstructure:"provider" yaml:"provider"`
	// Dir is the directory of the files provider.
	Dir string `mapstructure:"dir" yaml:"dir,omitempty"`
	// URL is the template of the http provider; it must contain
	// {environment} and may contain {application}.
	URL string `mapstructure:"url" yaml:"url,omitempty"`
	// Timeout bounds one request of the http provider; zero means
	// DefaultTimeout.
	Timeout time.Duration `mapstructure:"timeout" yaml:"timeout,omitempty"`
	// Required refuses deploys to environments without configuration.
	Required bool `mapstructure:"required" yaml:"required,omitempty"`
}

// Providers are the values of Settings.Provider.
func Providers() []string { return []string{"files", "http", "none"} }

// FromConfig builds the server's environment configuration from the
// `environments` settings and the `descriptor_policy` key (nil when
// absent: every override allowed where an environment sets no policy).
// Mistakes are an *manent.Error with code EInvalid and a field error per
// setting ("environments.dir"); the files directory must exist.
func FromConfig(s Settings, policy *Policy) (*Defaults, error) {
	var errs []manent.FieldError
	bad := func(at, format string, args ...any) {
		errs = append(errs, manent.FieldError{Path: at, Message: fmt.Sprintf(format, args...)})
	}
	var p Provider
	switch s.Provider {
	case "", "none":
		p = None{}
	case "files":
		if s.Dir == "" {
			bad("environments.dir", "required with provider files: the directory of <environment>.yaml files")
		} else if st, err := os.Stat(s.Dir); err != nil {
			bad("environments.dir", "%v", err)
		} else if !st.IsDir() {
			bad("environments.dir", "%s is not a directory", s.Dir)
		}
		p = Files{Dir: s.Dir}
	case "http":
		if msg := checkURLTemplate(s.URL); msg != "" {
			bad("environments.url", "%s", msg)
		}
		p = &HTTP{URL: s.URL, Timeout: s.Timeout}
	default:
		bad("environments.provider", "unknown provider %q (known: %s)", s.Provider, strings.Join(Providers(), ", "))
	}
	if s.Timeout < 0 {
		bad("environments.timeout", "must not be negative")
	}
	if policy != nil {
		var me *manent.Error
		if err := policy.Validate("descriptor_policy"); errors.As(err, &me) {
			errs = append(errs, me.Fields...)
		}
	}
	if len(errs) > 0 {
		return nil, &manent.Error{Code: manent.EInvalid, Message: "invalid environments configuration", Fields: errs}
	}
	d := &Defaults{Provider: p, Required: s.Required}
	if policy != nil {
		cp := *policy
		cp.Parameters = slices.Clone(policy.Parameters)
		d.Policy = &cp
	}
	return d, nil
}

func checkURLTemplate(raw string) string {
	if raw == "" {
		return "required with provider http: a URL such as https://cfg.example/environments/{environment}?application={application}"
	}
	if !strings.Contains(raw, "{environment}") {
		return fmt.Sprintf("%q does not contain {environment}", raw)
	}
	u, err := url.Parse(strings.NewReplacer("{environment}", "e", "{application}", "a").Replace(raw))
	if err != nil {
		return fmt.Sprintf("%q is not a URL: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("%q is not an http:// or https:// URL", raw)
	}
	if u.Host == "" {
		return fmt.Sprintf("%q has no host", raw)
	}
	return ""
}

// Defaults adds the server's settings to a provider: Policy is the
// descriptor policy of configurations that name none (nil: allow all),
// and Required turns "no configuration for this environment" into an
// EInvalid error at /environment. Without Required, an environment with no
// configuration gets an empty one holding Policy, so Merge applies it.
type Defaults struct {
	Provider Provider
	Policy   *Policy
	Required bool
	list     listings
}

// Get asks the provider and applies the defaults.
func (d *Defaults) Get(ctx context.Context, application, environment string) (*Config, Revision, error) {
	cfg, rev, err := d.Provider.Get(ctx, application, environment)
	if err != nil {
		return nil, rev, err
	}
	if cfg == nil {
		if d.Required {
			return nil, rev, &manent.Error{Code: manent.EInvalid,
				Message: fmt.Sprintf("environment %s is not configured on this server", environment),
				Fields: []manent.FieldError{{Path: "/environment",
					Message: fmt.Sprintf("environment %q is not configured on this server", environment)}}}
		}
		cfg = &Config{}
	}
	if cfg.Policy == nil && d.Policy != nil {
		p := *d.Policy
		p.Parameters = slices.Clone(d.Policy.Parameters)
		cfg.Policy = &p
	}
	return cfg, rev, nil
}

// None is the provider of a server without environment configuration:
// no environment has any.
type None struct{}

// Get returns no configuration.
func (None) Get(context.Context, string, string) (*Config, Revision, error) {
	return nil, Revision{Source: "none"}, nil
}
