package governance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// Rules are the governance rules of a governance.yaml file (SPEC §8.1).
// They are immutable once loaded and safe for concurrent use.
type Rules struct {
	Freezes   []Freeze
	Promotion []Promotion
	Approvals []ApprovalRule
	Change    []ChangeRule

	source string
}

// Promotion requires that a deploy to Environment (a glob) has the same
// application and version ended SUCCESS in each of Requires first.
type Promotion struct {
	Environment string
	Requires    []string
}

// ApprovalRule asks Count approvals from Approvers for deploys of
// Applications to Environments (globs; empty means all). The first rule
// that matches a deploy decides; Count 0 exempts the deploy from the rules
// that follow.
type ApprovalRule struct {
	Environments []string
	Applications []string
	Count        int
	Approvers    []string
	Expires      time.Duration
}

// ChangeRule requires an ITSM change ticket for deploys of Applications to
// Environments (globs; empty means all).
type ChangeRule struct {
	Environments []string
	Applications []string
}

// The file's shape. Keys are the contract of SPEC §8.1, plus regions,
// recurring and applications.
type rulesFile struct {
	Freezes   []freezeFile    `yaml:"freezes"`
	Promotion []promotionFile `yaml:"promotion"`
	Approvals []approvalFile  `yaml:"approvals"`
	Change    []changeFile    `yaml:"change"`
}

type freezeFile struct {
	Name         string         `yaml:"name"`
	Environments []string       `yaml:"environments"`
	Regions      []string       `yaml:"regions"`
	From         string         `yaml:"from"`
	To           string         `yaml:"to"`
	Recurring    *recurringFile `yaml:"recurring"`
	Allow        []string       `yaml:"allow"`
}

type recurringFile struct {
	Timezone string `yaml:"timezone"`
	From     string `yaml:"from"`
	To       string `yaml:"to"`
}

type promotionFile struct {
	Environment string   `yaml:"environment"`
	Requires    []string `yaml:"requires"`
}

type approvalFile struct {
	Environments []string `yaml:"environments"`
	Applications []string `yaml:"applications"`
	Count        *int     `yaml:"count"`
	Approvers    []string `yaml:"approvers"`
	Expires      string   `yaml:"expires"`
}

type changeFile struct {
	Environments []string `yaml:"environments"`
	Applications []string `yaml:"applications"`
}

// LoadRules reads and checks a governance.yaml file. Every problem is
// reported at once in a *LoadError, each with its line.
func LoadRules(path string) (*Rules, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read governance rules: %w", err)
	}
	return ParseRules(path, data)
}

// ParseRules checks the rules in data; name is the file name used in
// messages and in Decision.Source.
func ParseRules(name string, data []byte) (*Rules, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, yamlLoadError(name, data, err)
	}
	var file rulesFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlLoadError(name, data, err)
	}
	c := &checker{root: &root}
	rules := c.rules(file)
	if len(c.problems) > 0 {
		return nil, &LoadError{File: name, Problems: c.problems}
	}
	rules.source = "rules:" + name
	return rules, nil
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
var unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)

// yamlLoadError turns a yaml.v3 syntax or type error into a *LoadError.
func yamlLoadError(name string, data []byte, err error) error {
	var msgs []string
	var te *yaml.TypeError
	var se *yaml.SyntaxError
	if errors.As(err, &se) {
		// At the culprit's line and column, as descriptors' errors.
		s := yamlvalue.ExplainSyntax(data, err)
		return &LoadError{File: name, Problems: []Problem{{Line: s.Line, Column: s.Column, Message: s.Message}}}
	}
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	le := &LoadError{File: name}
	for _, m := range msgs {
		p := Problem{Message: strings.TrimPrefix(m, "yaml: ")}
		if sub := yamlLine.FindStringSubmatch(m); sub != nil {
			p.Line, _ = strconv.Atoi(sub[1])
			p.Message = sub[2]
		}
		if sub := unknownField.FindStringSubmatch(p.Message); sub != nil {
			p.Message = fmt.Sprintf("unknown field %q", sub[1])
		}
		le.Problems = append(le.Problems, p)
	}
	return le
}

// checker validates the decoded file and records problems with the line of
// the offending value, found in the node tree.
type checker struct {
	root     *yaml.Node
	problems []Problem
}

// bad records a problem at path, given as keys and indexes.
func (c *checker) bad(message string, path ...any) {
	c.problems = append(c.problems, Problem{Line: lineOf(c.root, path), Path: pathString(path), Message: message})
}

func (c *checker) patterns(list []string, required bool, path ...any) {
	if required && len(list) == 0 {
		c.bad("must not be empty", path...)
	}
	for i, p := range list {
		if !validPattern(p) {
			c.bad(fmt.Sprintf("%q is not a valid glob pattern", p), append(slices.Clone(path), i)...)
		}
	}
}

// identities reports the identity patterns of list that can match no
// identity (manent.DeadPattern): approvers: [sre] left a deploy waiting
// for an approval no one could give.
func (c *checker) identities(list []string, path ...any) {
	for i, p := range list {
		if msg := manent.DeadPattern(p); msg != "" {
			c.bad(msg, append(slices.Clone(path), i)...)
		}
	}
}

func (c *checker) rules(f rulesFile) *Rules {
	r := &Rules{}
	names := map[string]int{}
	for i, ff := range f.Freezes {
		at := []any{"freezes", i}
		fz := Freeze{Name: ff.Name, Environments: ff.Environments, Regions: ff.Regions, Allow: ff.Allow}
		switch prev, dup := names[ff.Name]; {
		case ff.Name == "":
			c.bad("a freeze needs a name", at...)
		case dup:
			c.bad(fmt.Sprintf("freeze %q is already defined at freezes[%d]", ff.Name, prev), append(at, "name")...)
		default:
			names[ff.Name] = i
		}
		c.patterns(ff.Environments, false, append(at, "environments")...)
		c.patterns(ff.Regions, false, append(at, "regions")...)
		c.patterns(ff.Allow, false, append(at, "allow")...)
		c.identities(ff.Allow, append(at, "allow")...)
		switch {
		case ff.Recurring != nil && (ff.From != "" || ff.To != ""):
			c.bad("give either from/to (an absolute window) or recurring, not both", at...)
		case ff.Recurring != nil:
			fz.Recurring = c.recurring(*ff.Recurring, append(at, "recurring")...)
		case ff.From == "" || ff.To == "":
			c.bad("a freeze needs from and to (RFC 3339 times) or recurring", at...)
		default:
			fz.From = c.timestamp(ff.From, append(at, "from")...)
			fz.To = c.timestamp(ff.To, append(at, "to")...)
			if !fz.From.IsZero() && !fz.To.IsZero() && !fz.From.Before(fz.To) {
				c.bad("must be after from", append(at, "to")...)
			}
		}
		r.Freezes = append(r.Freezes, fz)
	}
	for i, pf := range f.Promotion {
		at := []any{"promotion", i}
		if pf.Environment == "" {
			c.bad("environment is required", at...)
		} else if !validPattern(pf.Environment) {
			c.bad(fmt.Sprintf("%q is not a valid glob pattern", pf.Environment), append(at, "environment")...)
		}
		if len(pf.Requires) == 0 {
			c.bad("requires must name at least one environment", at...)
		}
		for j, env := range pf.Requires {
			if strings.TrimSpace(env) == "" {
				c.bad("must not be empty", append(at, "requires", j)...)
			}
		}
		r.Promotion = append(r.Promotion, Promotion{Environment: pf.Environment, Requires: pf.Requires})
	}
	for i, af := range f.Approvals {
		at := []any{"approvals", i}
		c.patterns(af.Environments, false, append(at, "environments")...)
		c.patterns(af.Applications, false, append(at, "applications")...)
		c.patterns(af.Approvers, false, append(at, "approvers")...)
		c.identities(af.Approvers, append(at, "approvers")...)
		ar := ApprovalRule{Environments: af.Environments, Applications: af.Applications, Approvers: af.Approvers}
		switch {
		case af.Count == nil:
			c.bad("count is required (0 exempts the matching deploys from the rules below)", at...)
		case *af.Count < 0:
			c.bad("must not be negative", append(at, "count")...)
		default:
			ar.Count = *af.Count
		}
		if af.Expires != "" {
			d, err := time.ParseDuration(af.Expires)
			if err != nil || d <= 0 {
				c.bad(fmt.Sprintf("%q is not a positive duration like \"24h\"", af.Expires), append(at, "expires")...)
			}
			ar.Expires = d
		}
		r.Approvals = append(r.Approvals, ar)
	}
	for i, cf := range f.Change {
		at := []any{"change", i}
		c.patterns(cf.Environments, false, append(at, "environments")...)
		c.patterns(cf.Applications, false, append(at, "applications")...)
		r.Change = append(r.Change, ChangeRule(cf))
	}
	return r
}

func (c *checker) timestamp(s string, path ...any) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		c.bad(fmt.Sprintf("%q is not an RFC 3339 time like 2026-12-20T00:00:00Z", s), path...)
	}
	return t
}

func (c *checker) recurring(rf recurringFile, path ...any) *Recurring {
	r := &Recurring{Location: time.UTC, From: rf.From, To: rf.To}
	if rf.Timezone != "" {
		loc, err := time.LoadLocation(rf.Timezone)
		if err != nil {
			c.bad(fmt.Sprintf("unknown time zone %q (use an IANA name like Europe/Rome)", rf.Timezone), append(path, "timezone")...)
		} else {
			r.Location = loc
		}
	}
	var err error
	okFrom, okTo := true, true
	if r.from, err = parseWeekClock(rf.From); err != nil {
		c.bad(err.Error(), append(path, "from")...)
		okFrom = false
	}
	if r.to, err = parseWeekClock(rf.To); err != nil {
		c.bad(err.Error(), append(path, "to")...)
		okTo = false
	}
	switch {
	case !okFrom || !okTo:
	case (r.from.day < 0) != (r.to.day < 0):
		c.bad("from and to must both name a day (a weekly window) or neither (a daily window)", path...)
	case r.from == r.to:
		c.bad("from and to are the same time: the window would be empty", path...)
	}
	return r
}

// lineOf returns the line of the node at path (keys and indexes), or of
// the deepest node found on the way (yamlvalue.Locate).
func lineOf(root *yaml.Node, path []any) int {
	tokens := make([]string, len(path))
	for i, step := range path {
		tokens[i] = fmt.Sprint(step)
	}
	if _, n := yamlvalue.Locate(root, tokens); n != nil {
		return n.Line
	}
	return 0
}

// pathString renders a path as "freezes[1].recurring.to".
func pathString(path []any) string {
	var b strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		}
	}
	return b.String()
}

// PromotionRequires returns the environments where the same application and
// version must have succeeded before a deploy to environment, sorted: the
// ones the server must look up to fill Inventory.Successes.
func (r *Rules) PromotionRequires(environment string) []string {
	var envs []string
	for _, p := range r.Promotion {
		if matchAny([]string{p.Environment}, environment) {
			envs = append(envs, p.Requires...)
		}
	}
	return sortedSet(envs)
}

// Decide evaluates the rules for in. Freezes that block the deploy and
// missing promotions deny it; the first approval rule that matches sets the
// approvals; any matching change rule requires a change ticket.
func (r *Rules) Decide(ctx context.Context, in Input) (Decision, error) {
	if err := ctx.Err(); err != nil {
		return Decision{}, err
	}
	in, err := in.normalized()
	if err != nil {
		return Decision{}, err
	}
	env, app, version := in.Environment.Name, in.Descriptor.Application, in.Descriptor.Version
	var d Decision

	blocking, bypassed := splitHits(r.activeFreezes(in.Now, env, in.Environment.Regions, in.Identity))
	for _, h := range blocking {
		d.Deny = append(d.Deny, freezeReason(env, h))
	}
	switch {
	case len(blocking) > 0:
		h := latest(blocking)
		d.Freeze = &FreezeInfo{Name: h.freeze.Name, ReopensAt: h.reopensAt}
	case len(bypassed) > 0:
		h := latest(bypassed)
		d.Freeze = &FreezeInfo{Name: h.freeze.Name, ReopensAt: h.reopensAt}
		d.BreakGlass = true
	}

	var notRun []string
	for _, req := range r.PromotionRequires(env) {
		ok, other := promoted(in.Inventory.Successes, app, version, req, in.Descriptor.Artifact.SHA256)
		switch {
		case ok:
		case other != "":
			d.MissingPromotions = append(d.MissingPromotions, req)
			d.Deny = append(d.Deny, otherArtifactReason(env, app, version, req, other, in.Descriptor.Artifact.SHA256))
		case rolledBack(in.Inventory.RolledBack, app, version, req) != nil:
			d.MissingPromotions = append(d.MissingPromotions, req)
			d.Deny = append(d.Deny, rolledBackReason(env, req, *rolledBack(in.Inventory.RolledBack, app, version, req)))
		default:
			d.MissingPromotions = append(d.MissingPromotions, req)
			notRun = append(notRun, req)
		}
	}
	if len(notRun) > 0 {
		slices.Sort(notRun)
		d.Deny = append(d.Deny, promotionReason(env, app, version, notRun)+upstreamFacts(ctx, in, notRun))
	}

	for _, a := range r.Approvals {
		if matchScope(a.Environments, env) && matchScope(a.Applications, app) {
			if a.Count > 0 {
				d.Approvals = &Approvals{Count: a.Count, Approvers: slices.Clone(a.Approvers), Expires: descriptor.Duration(a.Expires)}
			}
			break
		}
	}
	for _, c := range r.Change {
		if matchScope(c.Environments, env) && matchScope(c.Applications, app) {
			d.ChangeRequired = true
			break
		}
	}
	d.Allowed = len(d.Deny) == 0
	d = d.normalized()
	d.Source = r.source
	return d, nil
}

// promoted reports whether app version succeeded in env — with the
// artifact of digest when both its digest and the success's are known.
// When it did only with another artifact, other is that artifact's digest.
func promoted(successes []Success, app, version, env, digest string) (ok bool, other string) {
	for _, s := range successes {
		if s.Application != app || s.Version != version || s.Environment != env {
			continue
		}
		if digest == "" || s.SHA256 == "" || strings.EqualFold(s.SHA256, digest) {
			return true, ""
		}
		other = s.SHA256
	}
	return false, other
}

// rolledBack returns the rollback that took back app version's release in
// env, nil when none did.
func rolledBack(list []RolledBack, app, version, env string) *RolledBack {
	for i, r := range list {
		if r.Application == app && r.Version == version && r.Environment == env {
			return &list[i]
		}
	}
	return nil
}

// rolledBackReason is the deny reason for a version whose success in
// required a rollback took back: "promotion to prod requires billing 2.0
// to succeed first in staging: release 2.0 (dpl_…) was rolled back in
// staging at … by token:ci (rollback dpl_…); deploy it to staging again".
func rolledBackReason(env, required string, r RolledBack) string {
	at := ""
	if r.RolledBackAt != nil {
		at = " at " + r.RolledBackAt.UTC().Format(time.RFC3339)
	}
	by := ""
	if r.By != "" {
		by = " by " + r.By
	}
	return fmt.Sprintf("promotion to %s requires %s %s to succeed first in %s: release %s (%s) was rolled back in %s%s%s (rollback %s); "+
		"a rollback there says it is not good: deploy %s to %s again for it to count",
		env, r.Application, r.Version, required, r.Version, r.DeploymentID, required, at, by, r.RollbackID, r.Version, required)
}

// otherArtifactReason is the deny reason for a version that succeeded in
// required only with another artifact (the same version rebuilt).
func otherArtifactReason(env, app, version, required, succeeded, digest string) string {
	return fmt.Sprintf("promotion to %s requires the artifact of %s %s that succeeded in %s (sha256 %s), not sha256 %s",
		env, app, version, required, strings.ToLower(succeeded), strings.ToLower(digest))
}

// promotionReason is the deny reason for missing promotions (sorted), e.g.
// "promotion to prod requires billing 1.4.2 to succeed first in: staging".
func promotionReason(env, app, version string, missing []string) string {
	return fmt.Sprintf("promotion to %s requires %s %s to succeed first in: %s", env, app, version, strings.Join(missing, ", "))
}

// upstreamFacts is what the environments of missing (sorted) have of the
// version, when in.Upstream tells: " — its last deploy there (dpl_…) ended
// ERROR (staging runs 1.1.0)", each environment named when there are
// several; "" when nothing is known.
func upstreamFacts(ctx context.Context, in Input, missing []string) string {
	if in.Upstream == nil {
		return ""
	}
	var facts []string
	for _, env := range missing {
		u, ok := in.Upstream(ctx, env)
		if !ok {
			continue
		}
		var fact string
		switch {
		case u.LatestState == "":
			fact = "it was never deployed there"
		case u.LatestState == manent.StateSuccess:
			continue // a success that does not count is worded above
		case u.LatestState.Final():
			fact = fmt.Sprintf("its last deploy there (%s) ended %s", u.LatestID, u.LatestState)
		default:
			fact = fmt.Sprintf("it is still %s there (%s)", u.LatestState, u.LatestID)
		}
		if u.LatestState == "" || u.LatestState.Final() {
			if u.Runs != "" {
				fact += fmt.Sprintf(" (%s runs %s)", env, u.Runs)
			} else {
				fact += fmt.Sprintf(" (%s has no release yet)", env)
			}
		}
		if len(missing) > 1 {
			fact = env + ": " + fact
		}
		facts = append(facts, fact)
	}
	if len(facts) == 0 {
		return ""
	}
	return " — " + strings.Join(facts, "; ")
}
