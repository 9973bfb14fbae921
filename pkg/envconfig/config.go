package envconfig

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// Config is what an environment gives a deploy, for one application. Its
// YAML (Files) and JSON (HTTP) documents use the same keys as the JSON tags.
type Config struct {
	// Target is the default target: the plugin and its configuration.
	Target *descriptor.Target `json:"target,omitempty"`
	// Parameters are deep-merged under the descriptor's parameters.
	Parameters map[string]any `json:"parameters,omitempty"`
	// Rollback holds the defaults of rollback.enabled and rollback.on.
	Rollback descriptor.Rollback `json:"rollback,omitzero"`
	// Regions are the environment's regions; when set, rollout waves may
	// only target them.
	Regions []string `json:"regions,omitempty"`
	// Policy says what the descriptor may override; nil means no policy:
	// everything is allowed (see AllowAll).
	Policy *Policy `json:"descriptor_policy,omitempty"`
}

// Policy is the descriptor policy: which descriptor fields may override
// what the environment configuration sets. The zero Policy allows nothing;
// a nil *Policy allows everything.
type Policy struct {
	// AllowTargetOverride lets the descriptor name another target, or other
	// values in the target's `with`, than the environment's.
	AllowTargetOverride bool `json:"allow_target_override" mapstructure:"allow_target_override" yaml:"allow_target_override"`
	// AllowRollbackOverride lets the descriptor's rollback.enabled and
	// rollback.on replace the environment's.
	AllowRollbackOverride bool `json:"allow_rollback_override" mapstructure:"allow_rollback_override" yaml:"allow_rollback_override"`
	// Parameters are the parameters the descriptor may set: glob patterns
	// (path.Match) of parameter names, where a dot steps into a mapping
	// ("resources.cpu") and a pattern allows the whole value it names.
	// Empty allows none.
	Parameters []string `json:"parameters" mapstructure:"parameters" yaml:"parameters"`
}

// AllowAll returns the policy that applies when none is configured: every
// override and every parameter allowed.
func AllowAll() Policy {
	return Policy{AllowTargetOverride: true, AllowRollbackOverride: true, Parameters: []string{"*"}}
}

// Validate reports malformed parameter patterns as an *manent.Error with
// code EInvalid and a field error per pattern, at paths below at (for
// example "descriptor_policy").
func (p Policy) Validate(at string) error {
	var errs []manent.FieldError
	for i, pat := range p.Parameters {
		if msg := checkPattern(pat); msg != "" {
			errs = append(errs, manent.FieldError{Path: fmt.Sprintf("%s.parameters[%d]", at, i), Message: msg})
		}
	}
	if len(errs) > 0 {
		return &manent.Error{Code: manent.EInvalid, Message: "invalid descriptor policy", Fields: errs}
	}
	return nil
}

// Revision says where a configuration was read and which version it was.
type Revision struct {
	// Source is "files:<dir>" or the URL asked (credentials removed).
	Source string `json:"source"`
	// Revision is the digest of the files read (see Files) or the HTTP
	// ETag; empty when the source has no configuration for the environment.
	Revision string `json:"revision,omitempty"`
}

// Provider gives the environment configuration valid now for an application
// in an environment. A nil *Config with a nil error means the source has no
// configuration for that environment. An error that matches ErrUnavailable
// means the source did not answer; any other error is a broken source or
// configuration, for the operator to fix.
type Provider interface {
	Get(ctx context.Context, application, environment string) (*Config, Revision, error)
}

// ErrUnavailable matches (errors.Is) every error of a provider that did not
// answer: a timeout, a refused connection, a 5xx. Such errors are
// *manent.Error with code EUnavailable.
var ErrUnavailable error = &manent.Error{Code: manent.EUnavailable}

func unavailable(source string, err error) error {
	return &manent.Error{Code: manent.EUnavailable,
		Message: fmt.Sprintf("environment configuration %s is unavailable", source), Err: err}
}

// namePattern is the descriptor's pattern of application and environment
// names; providers refuse anything else, so a name never escapes a
// directory or a URL.
var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

func checkNames(application, environment string) error {
	for _, n := range [][2]string{{"application", application}, {"environment", environment}} {
		if !namePattern.MatchString(n[1]) {
			return &manent.Error{Code: manent.EInvalid, Message: fmt.Sprintf("invalid %s name %q", n[0], n[1]),
				Fields: []manent.FieldError{{Path: "/" + n[0], Message: "must match " + namePattern.String()}}}
		}
	}
	return nil
}

// checkPattern returns what is wrong with a parameter pattern, or "".
func checkPattern(p string) string {
	if strings.TrimSpace(p) == "" {
		return "a parameter pattern must not be empty"
	}
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" {
			return fmt.Sprintf("%q has an empty name between dots", p)
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Sprintf("%q is not a valid glob pattern", p)
		}
	}
	return ""
}

// problem is one mistake in a configuration document, at a JSON pointer.
type problem struct {
	path []string
	msg  string
}

// docChecker checks the shape of a generic configuration document. A
// partial document (a per-application override file) may leave out
// required fields, which the merged document must then have.
type docChecker struct {
	partial  bool
	problems []problem
}

func (c *docChecker) add(at []string, format string, args ...any) {
	c.problems = append(c.problems, problem{path: at, msg: fmt.Sprintf(format, args...)})
}

// checkDocument returns the problems of doc; nil (an empty file) is valid.
func checkDocument(doc any, partial bool) []problem {
	c := &docChecker{partial: partial}
	if doc == nil {
		return nil
	}
	root, ok := c.mapping(doc, nil, "target", "parameters", "rollback", "regions", "descriptor_policy")
	if !ok {
		return c.problems
	}
	if t, ok := c.mapping(root["target"], []string{"target"}, "plugin", "with"); ok {
		at := []string{"target", "plugin"}
		if p, set := t["plugin"]; set && p != nil {
			if s, ok := c.str(p, at); ok && !pluginPattern.MatchString(s) {
				c.add(at, "%q is not a plugin name (%s)", s, pluginPattern)
			}
		} else if !partial && root["target"] != nil {
			c.add(at, "missing: the target's plugin is required")
		}
		c.mapping(t["with"], []string{"target", "with"})
	}
	c.mapping(root["parameters"], []string{"parameters"})
	if r, ok := c.mapping(root["rollback"], []string{"rollback"}, "enabled", "on"); ok {
		c.boolean(r["enabled"], []string{"rollback", "enabled"})
		c.strings(r["on"], []string{"rollback", "on"}, func(at []string, s string) {
			if !slices.Contains(manent.DefaultPipeline, s) {
				c.add(at, "unknown step %q; rollback.on may name %s", s, strings.Join(manent.DefaultPipeline, ", "))
			}
		})
	}
	c.strings(root["regions"], []string{"regions"}, nil)
	if p, ok := c.mapping(root["descriptor_policy"], []string{"descriptor_policy"},
		"allow_target_override", "allow_rollback_override", "parameters"); ok {
		c.boolean(p["allow_target_override"], []string{"descriptor_policy", "allow_target_override"})
		c.boolean(p["allow_rollback_override"], []string{"descriptor_policy", "allow_rollback_override"})
		c.strings(p["parameters"], []string{"descriptor_policy", "parameters"}, func(at []string, s string) {
			if msg := checkPattern(s); msg != "" {
				c.add(at, "%s", msg)
			}
		})
	}
	return c.problems
}

// pluginPattern is the descriptor's pattern of plugin names.
var pluginPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,62}$`)

// mapping checks that v is a mapping (or absent) whose keys are among
// known (any key when known is empty).
func (c *docChecker) mapping(v any, at []string, known ...string) (map[string]any, bool) {
	if v == nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		c.add(at, "must be a mapping, got %s", kind(v))
		return nil, false
	}
	if len(known) > 0 {
		for _, k := range sortedKeys(m) {
			if !slices.Contains(known, k) {
				c.add(with(at, k), "unknown field %q; known fields: %s", k, strings.Join(known, ", "))
			}
		}
	}
	return m, true
}

func (c *docChecker) boolean(v any, at []string) {
	if _, ok := v.(bool); v != nil && !ok {
		c.add(at, "must be true or false, got %s", kind(v))
	}
}

func (c *docChecker) str(v any, at []string) (string, bool) {
	s, ok := v.(string)
	if !ok {
		c.add(at, "must be a string, got %s", kind(v))
	}
	return s, ok
}

// strings checks a list of distinct non-empty strings, each also passed to
// each when not nil.
func (c *docChecker) strings(v any, at []string, each func(at []string, s string)) {
	if v == nil {
		return
	}
	list, ok := v.([]any)
	if !ok {
		c.add(at, "must be a list of strings, got %s", kind(v))
		return
	}
	seen := map[string]bool{}
	for i, e := range list {
		ai := with(at, fmt.Sprint(i))
		s, ok := c.str(e, ai)
		switch {
		case !ok:
		case s == "":
			c.add(ai, "must not be empty")
		case seen[s]:
			c.add(ai, "%q is listed twice", s)
		default:
			seen[s] = true
			if each != nil {
				each(ai, s)
			}
		}
	}
}

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// decode turns a checked document into a Config.
func decode(doc any) (*Config, error) {
	if doc == nil {
		return &Config{}, nil
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c Config
	if err := dec.Decode(&c); err != nil {
		return nil, err // the checks accept only what decodes: a safety net
	}
	return &c, nil
}

// describe formats problems for an error message, each with its place
// given by where.
func describe(problems []problem, where func(p problem) string) string {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		at := where(p)
		if len(p.path) > 0 {
			at += ": " + yamlvalue.Pointer(p.path)
		}
		msgs[i] = at + ": " + p.msg
	}
	return strings.Join(msgs, "; ")
}
