package governance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/manent"
)

// Rego is a governance policy written in Rego and evaluated with OPA. The
// policy is `package manent` and either defines
//
//	decision := {"deny": …, "approvals": …, "change_required": …, …}
//
// with the shape of Decision, or the same names as separate rules
// (`deny contains msg if …`, `approvals := …`, `change_required if …`,
// `freeze := …`, `break_glass if …`, `missing_promotions contains env if …`).
// See docs/governance.md. It is compiled once and safe for concurrent use.
type Rego struct {
	// Timeout bounds one evaluation, whatever the caller's context:
	// DefaultTimeout unless set. A policy still evaluating then is stopped
	// and Decide fails, so the deploy is refused (fail closed) instead of
	// holding a submission, a cron tick or a worker slot.
	Timeout time.Duration

	query  rego.PreparedEvalQuery
	whole  bool // no decision rule: the package document is the decision
	source string
	rules  []ruleLines
}

// DefaultTimeout is how long a policy may take to decide. A policy decides
// in milliseconds; one that takes seconds loops over too much data.
const DefaultTimeout = 5 * time.Second

// MaxDecisionBytes bounds the JSON of a policy's decision: it is saved with
// the deploy and its reasons are quoted in refusals and step errors.
const MaxDecisionBytes = 1 << 20

// ruleLines is where one rule of the policy is written, to name the rule
// a runtime error comes from.
type ruleLines struct {
	name        string
	first, last int
}

// LoadRego reads and compiles a Rego policy file.
func LoadRego(path string) (*Rego, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read governance policy: %w", err)
	}
	return ParseRego(path, string(src))
}

// ParseRego compiles a Rego policy; name is the file name used in messages
// and in Decision.Source. Parse and compile errors are a *LoadError with
// the line of each.
func ParseRego(name, src string) (*Rego, error) {
	mod, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return nil, regoLoadError(name, err)
	}
	if want := ast.MustParseRef("data.manent"); !mod.Package.Path.Equal(want) {
		return nil, &LoadError{File: name, Problems: []Problem{{
			Line:    mod.Package.Location.Row,
			Message: fmt.Sprintf("the policy must be \"package manent\", not %q", mod.Package.Path.String()),
		}}}
	}
	p := &Rego{whole: true, source: "rego:" + name}
	for _, r := range mod.Rules {
		if r.Head.Ref().String() == "decision" {
			p.whole = false
		}
		if r.Location != nil {
			p.rules = append(p.rules, ruleLines{name: r.Head.Ref().String(), first: r.Location.Row,
				last: r.Location.Row + bytes.Count(r.Location.Text, []byte("\n"))})
		}
	}
	query := "data.manent.decision"
	if p.whole {
		query = "data.manent"
	}
	p.query, err = rego.New(
		rego.Query(query),
		rego.Module(name, src),
		rego.StrictBuiltinErrors(true),
	).PrepareForEval(context.Background())
	if err != nil {
		return nil, regoLoadError(name, err)
	}
	return p, nil
}

// regoLoadError turns OPA parse or compile errors into a *LoadError.
func regoLoadError(name string, err error) error {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return &LoadError{File: name, Problems: []Problem{{Message: err.Error()}}}
	}
	le := &LoadError{File: name}
	for _, e := range errs {
		p := Problem{Message: e.Message}
		if e.Location != nil {
			p.Line = e.Location.Row
		}
		le.Problems = append(le.Problems, p)
	}
	return le
}

// regoDecision is the shape a policy returns, read by readDecision;
// Source is not read.
type regoDecision struct {
	Allowed           *bool
	Deny              []string
	Approvals         *regoApprovals
	ChangeRequired    bool
	Freeze            *regoFreeze
	BreakGlass        bool
	MissingPromotions []string
}

type regoApprovals struct {
	Count     int
	Approvers []string
	Expires   string
}

type regoFreeze struct {
	Name      string
	ReopensAt string
}

// Decide evaluates the policy with in as `input`. An undefined decision, a
// runtime error (strict built-in errors are on) or a result of the wrong
// shape is an error: the caller must not let the deploy through.
func (p *Rego) Decide(ctx context.Context, in Input) (Decision, error) {
	in, err := in.normalized()
	if err != nil {
		return Decision{}, err
	}
	doc, err := inputDocument(in)
	if err != nil {
		return Decision{}, err
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rs, err := p.query.Eval(ectx, rego.EvalInput(doc), rego.EvalTime(in.Now))
	if err != nil {
		if ctx.Err() == nil && ectx.Err() != nil {
			return Decision{}, fmt.Errorf("evaluate %s: the policy did not decide within %s and was stopped (%v): a rule iterates over too much (a large range, a comprehension over the whole input); make it do less work",
				p.source, timeout, err)
		}
		return Decision{}, fmt.Errorf("evaluate %s: %w", p.source, p.located(err))
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return Decision{}, fmt.Errorf("evaluate %s: data.manent.decision is undefined for this input", p.source)
	}
	raw, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate %s: %w", p.source, err)
	}
	if len(raw) > MaxDecisionBytes {
		return Decision{}, fmt.Errorf("evaluate %s: the decision is %d bytes of JSON, more than 1 MiB: it should hold a few reasons and names (does a rule add a reason per element of a large collection?)",
			p.source, len(raw))
	}
	rd, err := readDecision(raw, p.whole)
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate %s: %w", p.source, err)
	}
	d, err := rd.decision()
	if err != nil {
		return Decision{}, fmt.Errorf("evaluate %s: %w", p.source, err)
	}
	d = d.normalized()
	d.Source = p.source
	return d, nil
}

// ruleError is a runtime error of the policy that names the rule it comes
// from: "strict.rego:7: rule deny: eval_builtin_error: …".
type ruleError struct {
	err  *topdown.Error
	rule string
}

func (e *ruleError) Error() string {
	return fmt.Sprintf("%s:%d: rule %s: %s: %s", e.err.Location.File, e.err.Location.Row, e.rule, e.err.Code, e.err.Message)
}

func (e *ruleError) Unwrap() error { return e.err }

// located names the rule of a runtime error that has a location (OPA gives
// only the file and line).
func (p *Rego) located(err error) error {
	var te *topdown.Error
	if !errors.As(err, &te) || te.Location == nil {
		return err
	}
	for _, r := range p.rules {
		if r.first <= te.Location.Row && te.Location.Row <= r.last {
			return &ruleError{err: te, rule: r.name}
		}
	}
	return err
}

func (rd regoDecision) decision() (Decision, error) {
	d := Decision{
		Allowed:           rd.Allowed == nil || *rd.Allowed,
		Deny:              rd.Deny,
		ChangeRequired:    rd.ChangeRequired,
		BreakGlass:        rd.BreakGlass,
		MissingPromotions: rd.MissingPromotions,
	}
	if !d.Allowed && len(d.Deny) == 0 {
		d.Deny = []string{"denied by the governance policy"}
	}
	if a := rd.Approvals; a != nil {
		if a.Count < 0 {
			// As in governance.yaml: a mistake, never "no approvals".
			return d, fmt.Errorf("approvals.count: %d must not be negative (0: none required)", a.Count)
		}
		// A pattern that names no identity matches no one: the deploy
		// would wait for an approval nobody can give (governance.yaml's
		// approvers are refused at start for the same reason).
		for i, p := range a.Approvers {
			if msg := manent.DeadPattern(p); msg != "" {
				return d, fmt.Errorf("approvals.approvers[%d]: %s", i, msg)
			}
		}
		d.Approvals = &Approvals{Count: a.Count, Approvers: a.Approvers}
		if a.Expires != "" {
			exp, err := time.ParseDuration(a.Expires)
			if err != nil {
				return d, fmt.Errorf("approvals.expires: %q is not a duration like \"24h\"", a.Expires)
			}
			d.Approvals.Expires = descriptor.Duration(exp)
		}
	}
	if f := rd.Freeze; f != nil {
		at, err := time.Parse(time.RFC3339, f.ReopensAt)
		if err != nil {
			return d, fmt.Errorf("freeze.reopens_at: %q is not an RFC 3339 time", f.ReopensAt)
		}
		d.Freeze = &FreezeInfo{Name: f.Name, ReopensAt: at}
	}
	return d, nil
}

// inputDocument is in as the generic JSON value OPA evaluates: exactly the
// document docs/governance.md describes.
func inputDocument(in Input) (any, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode governance input: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("encode governance input: %w", err)
	}
	return doc, nil
}
