package envconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// Effective is a deploy as it runs: the descriptor merged with its
// environment's configuration. Its JSON uses the descriptor's field names;
// target and rollback are always present, resolved.
type Effective struct {
	APIVersion  string                   `json:"apiVersion"`
	Application string                   `json:"application"`
	Environment string                   `json:"environment"`
	Version     string                   `json:"version"`
	Artifact    descriptor.Artifact      `json:"artifact"`
	Parameters  map[string]any           `json:"parameters,omitempty"`
	Target      descriptor.Target        `json:"target"`
	Secrets     map[string]string        `json:"secrets,omitempty"`
	Health      []descriptor.HealthCheck `json:"health,omitempty"`
	Steps       []descriptor.CustomStep  `json:"steps,omitempty"`
	After       []string                 `json:"after,omitempty"`
	Schedule    *descriptor.Schedule     `json:"schedule,omitempty"`
	Rollback    RollbackPolicy           `json:"rollback"`
	Rollout     *descriptor.Rollout      `json:"rollout,omitempty"`
	Callbacks   []descriptor.Callback    `json:"callbacks,omitempty"`
	Notify      *descriptor.Notify       `json:"notify,omitempty"`
	MaxRetries  *int                     `json:"max_retries,omitempty"`
	Source      *descriptor.Source       `json:"source,omitempty"`
	// Regions are the environment's regions, when it names them.
	Regions []string `json:"regions,omitempty"`
	// Warnings are what the submitter and the config step's log must be
	// told about a merge that is allowed: the environment's target
	// credentials running under the descriptor's target settings, which an
	// explicit allow_target_override permits.
	Warnings []string `json:"-"`
}

// RollbackPolicy is the resolved rollback of a deploy: whether to
// compensate, and after the failure of which steps.
type RollbackPolicy struct {
	Enabled bool     `json:"enabled"`
	On      []string `json:"on"`
}

// DefaultRollbackOn is rollback.on when neither the descriptor nor the
// environment sets it.
func DefaultRollbackOn() []string {
	return []string{manent.StepDeploy, manent.StepPostTest, manent.StepActivation}
}

// Merge merges the descriptor d with its environment's configuration env
// (nil: the environment has none) under env's descriptor policy (nil: all
// allowed) and returns the effective deploy, sharing no memory with either.
//
//   - Target: the descriptor's if the environment gives none, the
//     environment's if the descriptor names none. When both do and name the
//     same plugin, `with` is deep-merged (the descriptor wins); another
//     plugin replaces the environment's target. Either is a conflict unless
//     the policy allows target overrides, except when the descriptor only
//     repeats what the environment says. Neither: an error at /target.
//   - Parameters: the descriptor's are deep-merged over the environment's.
//     Each one the descriptor sets must be allowed by the policy's patterns,
//     or be equal to the environment's value.
//   - Rollback: enabled is the descriptor's if set, else the environment's,
//     else false; on is the descriptor's if set, else the environment's,
//     else DefaultRollbackOn. A descriptor value that differs from one the
//     environment sets is a conflict unless the policy allows rollback
//     overrides.
//   - Regions: when the environment names regions, every rollout wave
//     target must be one of them.
//   - Credentials: when the environment's target.with holds credentials
//     (what readers see redacted: plugin.SettingSecrets) and the descriptor
//     changes any value of the same plugin's `with`, the environment's
//     credentials would run under the descriptor's settings (its command,
//     its URL). Without a policy (env.Policy nil) that is refused at each
//     changed path; only a policy that says allow_target_override allows
//     it, with a warning in Effective.Warnings.
//
// What the environment leaves unset the descriptor may always set, except
// parameters. On failure Merge returns one *manent.Error with code EInvalid
// and a field error for every problem, at the JSON path of the descriptor
// value that causes it.
func Merge(d *descriptor.Descriptor, env *Config) (*Effective, error) {
	if d == nil {
		return nil, errors.New("merge environment configuration: no descriptor")
	}
	if env == nil {
		env = &Config{}
	}
	m := &merger{d: d, env: env, policy: AllowAll(), implicit: env.Policy == nil}
	if env.Policy != nil {
		m.policy = *env.Policy
	}
	eff, err := copyDescriptor(d)
	if err != nil {
		return nil, err
	}
	eff.Target = m.target()
	eff.Parameters = m.parameters()
	eff.Rollback = m.rollback()
	m.regions()
	eff.Regions = slices.Clone(env.Regions)
	eff.Warnings = m.warnings
	if len(m.errs) > 0 {
		noun := "problems"
		if len(m.errs) == 1 {
			noun = "problem"
		}
		return nil, &manent.Error{Code: manent.EInvalid,
			Message: fmt.Sprintf("the deploy does not fit the configuration of environment %s: %d %s", d.Environment, len(m.errs), noun),
			Fields:  m.errs}
	}
	return eff, nil
}

// copyDescriptor returns an Effective holding a deep copy of d's fields.
func copyDescriptor(d *descriptor.Descriptor) (*Effective, error) {
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("merge environment configuration: %w", err)
	}
	var eff Effective
	if err := json.Unmarshal(b, &eff); err != nil {
		return nil, fmt.Errorf("merge environment configuration: %w", err)
	}
	eff.Target, eff.Parameters, eff.Rollback = descriptor.Target{}, nil, RollbackPolicy{}
	return &eff, nil
}

type merger struct {
	d      *descriptor.Descriptor
	env    *Config
	policy Policy
	// implicit says no policy was written, neither in the environment's
	// configuration nor in the server's: policy is AllowAll by default.
	implicit bool
	errs     []manent.FieldError
	warnings []string
}

func (m *merger) add(at []string, format string, args ...any) {
	m.errs = append(m.errs, manent.FieldError{Path: yamlvalue.Pointer(at), Message: fmt.Sprintf(format, args...)})
}

func (m *merger) target() descriptor.Target {
	dt, et := m.d.Target, m.env.Target
	switch {
	case dt == nil && et == nil:
		m.add([]string{"target"}, "no target: the descriptor names none and the environment configuration gives none")
		return descriptor.Target{}
	case dt == nil:
		return descriptor.Target{Plugin: et.Plugin, With: cloneMap(et.With)}
	case et == nil:
		return descriptor.Target{Plugin: dt.Plugin, With: cloneMap(dt.With)}
	}
	if dt.Plugin != et.Plugin {
		if !m.policy.AllowTargetOverride {
			m.add([]string{"target"}, "environment %s deploys with plugin %q, not %q, and its descriptor policy does not allow the descriptor to override the target (allow_target_override)",
				m.d.Environment, et.Plugin, dt.Plugin)
			return descriptor.Target{Plugin: et.Plugin, With: cloneMap(et.With)}
		}
		return descriptor.Target{Plugin: dt.Plugin, With: cloneMap(dt.With)}
	}
	changed := overrides(et.With, dt.With, []string{"target", "with"})
	guarded, credSet := changed, [][]string(nil)
	if !m.policy.AllowTargetOverride || m.implicit {
		// A credential the descriptor repeats is refused as one it changes:
		// accepting the right value and refusing a wrong one would tell a
		// submitter's dry runs which guess is the environment's.
		credSet = credentialsSet(et.With, dt.With, []string{"target", "with"}, false)
		guarded = union(changed, credSet)
	}
	switch creds := credentialNames(et.With); {
	case !m.policy.AllowTargetOverride:
		// The values quoted are those readers see: quoting a credential
		// would answer a submitter's guess of it with the real one.
		shown := plugin.RedactSettings(et.With)
		for _, p := range guarded {
			m.add(p, "%s, and its descriptor policy does not allow the descriptor to override the target (allow_target_override)",
				envSays(m.d.Environment, "target.with", shown, p[2:]))
		}
	case len(guarded) == 0 || creds == "":
	case m.implicit:
		for _, p := range guarded {
			if slices.ContainsFunc(credSet, func(q []string) bool { return slices.Equal(p, q) }) {
				m.add(p, "environment %s gives %s, which holds a credential: the descriptor may not set it, whatever its value (it is never compared with the environment's); leave it out",
					m.d.Environment, strings.Join(p, "."))
				continue
			}
			m.add(p, "environment %s gives its target credentials (%s), and the descriptor may not change %s under them: the descriptor's settings would run with those credentials (its own command, URL or files). "+
				"Repeat the environment's value or leave it out; an operator who trusts every submitter to %s with the credentials writes descriptor_policy: {allow_target_override: true} in its configuration (no policy written is not that)",
				m.d.Environment, creds, strings.Join(p, "."), m.d.Environment)
		}
	default:
		names := make([]string, len(changed))
		for i, p := range changed {
			names[i] = strings.Join(p, ".")
		}
		m.warnings = append(m.warnings, fmt.Sprintf("environment %s's target credentials (%s) run under this descriptor's %s: its descriptor policy allows it (allow_target_override: true)",
			m.d.Environment, creds, strings.Join(names, ", ")))
	}
	return descriptor.Target{Plugin: dt.Plugin, With: mergeMaps(et.With, dt.With)}
}

// credentialsSet returns the paths (below at) where the descriptor's value
// set meets a value of env holding a credential — what
// plugin.SettingSecrets finds, hide saying a key above was named like one —
// whether set repeats it or not.
func credentialsSet(env, set any, at []string, hide bool) [][]string {
	em, eok := env.(map[string]any)
	sm, sok := set.(map[string]any)
	if eok && sok {
		var out [][]string
		for _, k := range sortedKeys(sm) {
			ev, has := em[k]
			if !has {
				continue
			}
			out = append(out, credentialsSet(ev, sm[k], with(at, k), hide || plugin.SensitiveKey(k) || strings.EqualFold(k, "headers"))...)
		}
		return out
	}
	if env == nil {
		return nil
	}
	if hide || len(plugin.SettingSecrets("", map[string]any{"": env})) > 0 {
		return [][]string{at}
	}
	return nil
}

// union returns the paths of a and those of b not in a, in order.
func union(a, b [][]string) [][]string {
	out := slices.Clone(a)
	for _, p := range b {
		if !slices.ContainsFunc(out, func(q []string) bool { return slices.Equal(p, q) }) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, slices.Compare)
	return out
}

// credentialNames names the credentials of an environment's target.with
// (plugin.SettingSecrets: what readers see redacted), at most three and a
// count of the rest; "" when it holds none.
func credentialNames(with map[string]any) string {
	var names []string
	for _, s := range plugin.SettingSecrets("target.with", with) {
		if !slices.Contains(names, s.Where) {
			names = append(names, s.Where)
		}
	}
	if len(names) > 3 {
		names = append(names[:3], fmt.Sprintf("and %d more", len(names)-3))
	}
	return strings.Join(names, ", ")
}

// envSays describes the environment's value at path below m, named as
// prefix.path in the message.
func envSays(environment, prefix string, m map[string]any, path []string) string {
	name := strings.Join(append([]string{prefix}, path...), ".")
	var v any = m
	for _, t := range path {
		mm, ok := v.(map[string]any)
		if !ok {
			v = nil
			break
		}
		if v, ok = mm[t]; !ok {
			return fmt.Sprintf("environment %s does not set %s", environment, name)
		}
	}
	return fmt.Sprintf("environment %s sets %s to %s", environment, name, show(v))
}

// show formats a generic value briefly, as JSON (without escaping &, <
// and > for HTML: the text is read, not embedded in a page).
func show(v any) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSuffix(b.String(), "\n")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:80]) + "…"
	}
	return s
}

func (m *merger) parameters() map[string]any {
	m.checkParameters(m.env.Parameters, m.d.Parameters, nil)
	return mergeMaps(m.env.Parameters, m.d.Parameters)
}

// checkParameters checks the descriptor's parameters set (below at)
// against the environment's env.
func (m *merger) checkParameters(env, set map[string]any, at []string) {
	for _, k := range sortedKeys(set) {
		p := with(at, k)
		if m.parameterAllowed(p) {
			continue
		}
		ev, has := env[k]
		if sm, ok := set[k].(map[string]any); ok && m.parameterAllowedBelow(p) {
			if em, ok := ev.(map[string]any); ok || !has {
				m.checkParameters(em, sm, p)
				continue
			}
		}
		if !has {
			m.refuseParameter(p)
			continue
		}
		for _, q := range overrides(ev, set[k], p) {
			m.refuseParameter(q)
		}
	}
}

func (m *merger) refuseParameter(p []string) {
	allowed := "it allows none"
	if len(m.policy.Parameters) > 0 {
		allowed = "it allows " + strings.Join(m.policy.Parameters, ", ")
	}
	m.add(append([]string{"parameters"}, p...), "parameter %q is not allowed by the descriptor policy of environment %s (%s)",
		strings.Join(p, "."), m.d.Environment, allowed)
}

// parameterAllowed reports whether a pattern names p or a mapping above it.
func (m *merger) parameterAllowed(p []string) bool {
	for _, pat := range m.policy.Parameters {
		segs := strings.Split(pat, ".")
		if len(segs) <= len(p) && matchSegments(segs, p[:len(segs)]) {
			return true
		}
	}
	return false
}

// parameterAllowedBelow reports whether a pattern names a value inside p.
func (m *merger) parameterAllowedBelow(p []string) bool {
	for _, pat := range m.policy.Parameters {
		segs := strings.Split(pat, ".")
		if len(segs) > len(p) && matchSegments(segs[:len(p)], p) {
			return true
		}
	}
	return false
}

func matchSegments(patterns, names []string) bool {
	for i, pat := range patterns {
		if ok, err := path.Match(pat, names[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func (m *merger) rollback() RollbackPolicy {
	var dr descriptor.Rollback
	if m.d.Rollback != nil {
		dr = *m.d.Rollback
	}
	er := m.env.Rollback
	out := RollbackPolicy{On: DefaultRollbackOn()}
	if er.Enabled != nil {
		out.Enabled = *er.Enabled
	}
	if len(er.On) > 0 {
		out.On = slices.Clone(er.On)
	}
	const refuse = "and its descriptor policy does not allow the descriptor to override it (allow_rollback_override)"
	if dr.Enabled != nil {
		if er.Enabled != nil && *er.Enabled != *dr.Enabled && !m.policy.AllowRollbackOverride {
			m.add([]string{"rollback", "enabled"}, "environment %s sets rollback.enabled to %t, %s", m.d.Environment, *er.Enabled, refuse)
		} else {
			out.Enabled = *dr.Enabled
		}
	}
	if len(dr.On) > 0 {
		if len(er.On) > 0 && !sameSet(er.On, dr.On) && !m.policy.AllowRollbackOverride {
			m.add([]string{"rollback", "on"}, "environment %s sets rollback.on to [%s], %s", m.d.Environment, strings.Join(er.On, ", "), refuse)
		} else {
			out.On = slices.Clone(dr.On)
		}
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func (m *merger) regions() {
	if len(m.env.Regions) == 0 || m.d.Rollout == nil {
		return
	}
	for i, w := range m.d.Rollout.Waves {
		for j, t := range w.Targets {
			if !slices.Contains(m.env.Regions, t) {
				m.add([]string{"rollout", "waves", fmt.Sprint(i), "targets", fmt.Sprint(j)},
					"unknown region %q: environment %s has regions %s", t, m.d.Environment, strings.Join(m.env.Regions, ", "))
			}
		}
	}
}
