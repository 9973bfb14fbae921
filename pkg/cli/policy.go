package cli

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/governance"
)

// PolicyTestOptions are the inputs of `manent policy test`.
type PolicyTestOptions struct {
	IO        *IOStreams
	ReadInput func(name string) ([]byte, string, error)
	Exporter  *Exporter

	Rules string
	Rego  string
	Cases string
}

// NewCmdPolicy builds `manent policy` and its subcommand `test`. runF, when
// not nil, replaces policyTestRun (tests use it to check flag parsing).
func NewCmdPolicy(f *Factory, runF func(*PolicyTestOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy <command>",
		Short: "Work with governance rules and Rego policies",
		Long: `Work with the governance of manent-server (freezes, promotion, approvals,
change tickets) locally, without a server.`,
		Example: `  manent policy test --rules governance.yaml --cases cases.yaml`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &UsageError{
					Err:  fmt.Errorf("unknown command %q for %q", args[0], cmd.CommandPath()),
					Hint: fmt.Sprintf("Run '%s --help' for usage.", cmd.CommandPath()),
				}
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newCmdPolicyTest(f, runF))
	return cmd
}

func newCmdPolicyTest(f *Factory, runF func(*PolicyTestOptions) error) *cobra.Command {
	opts := &PolicyTestOptions{IO: f.IOStreams, ReadInput: f.ReadInput}
	cmd := &cobra.Command{
		Use:   "test (--rules <file> | --rego <file>) --cases <file>",
		Short: "Evaluate governance rules or a Rego policy against a table of cases",
		Long: `Evaluate governance rules (governance.yaml) or a Rego policy locally, with
no server, against a table of cases, and print PASS or FAIL for each.

A cases file lists, under "cases", a name, the input the server would give
(descriptor, identity, environment, now, inventory) and what the decision
must say: allowed, deny (each a substring of a reason), approvals
{count, approvers, expires}, change_required, freeze (a name, "" for none,
or {name, reopens_at}), break_glass, missing_promotions. Whatever a case
leaves out is not checked. See docs/governance.md.

Exit status: 0 every case passed, 1 a case failed, 2 usage error (including
rules, a policy or cases that cannot be read or loaded).`,
		Example: `  manent policy test --rules governance.yaml --cases cases.yaml
  manent policy test --rego policy.rego --cases cases.yaml

  # every decision, for scripts
  manent policy test --rego policy.rego --cases cases.yaml -o json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if (opts.Rules == "") == (opts.Rego == "") {
				return &UsageError{
					Err:  fmt.Errorf("give either --rules or --rego"),
					Hint: fmt.Sprintf("Usage: %s", cmd.UseLine()),
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return policyTestRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Rules, "rules", "", "governance rules file (governance.yaml)")
	cmd.Flags().StringVar(&opts.Rego, "rego", "", "Rego policy file (package manent)")
	cmd.Flags().StringVar(&opts.Cases, "cases", "", "table of cases to evaluate")
	_ = cmd.MarkFlagRequired("cases")
	_ = cmd.MarkFlagFilename("rules", "yml", "yaml")
	_ = cmd.MarkFlagFilename("rego", "rego")
	_ = cmd.MarkFlagFilename("cases", "yml", "yaml")
	return cmd
}

// PolicyTestResult is the `policy test -o json` document.
type PolicyTestResult struct {
	Passed int                `json:"passed"`
	Failed int                `json:"failed"`
	Cases  []PolicyCaseResult `json:"cases"`
}

// PolicyCaseResult is the outcome of one case.
type PolicyCaseResult struct {
	Name string `json:"name"`
	Line int    `json:"line"`
	Pass bool   `json:"pass"`
	// Problems are the mismatches with the expectation, or the error.
	Problems []string             `json:"problems"`
	Decision *governance.Decision `json:"decision"`
}

func policyTestRun(ctx context.Context, opts *PolicyTestOptions) error {
	decider, err := loadDecider(opts)
	if err != nil {
		return err
	}
	data, casesName, err := opts.ReadInput(opts.Cases)
	if err != nil {
		return err
	}
	cases, err := governance.ParseCases(casesName, data)
	if err != nil {
		return &UsageError{Err: err}
	}

	res := PolicyTestResult{Cases: []PolicyCaseResult{}}
	for _, c := range cases {
		r := PolicyCaseResult{Name: c.Name, Line: c.Line, Problems: []string{}}
		d, err := decider.Decide(ctx, c.Input)
		if err != nil {
			r.Problems = append(r.Problems, err.Error())
		} else {
			r.Decision = &d
			r.Problems = append(r.Problems, c.Expect.Check(d)...)
		}
		r.Pass = len(r.Problems) == 0
		if r.Pass {
			res.Passed++
		} else {
			res.Failed++
		}
		res.Cases = append(res.Cases, r)
	}

	if opts.Exporter != nil {
		if err := opts.Exporter.Write(opts.IO.Out, res); err != nil {
			return err
		}
	} else {
		printPolicyTestResult(opts.IO, res)
	}
	if res.Failed > 0 {
		return &SilentError{Code: ExitFailed}
	}
	return nil
}

// loadDecider reads and loads the rules or the policy; any problem is a
// usage error listing every mistake with its line.
func loadDecider(opts *PolicyTestOptions) (governance.Decider, error) {
	file := opts.Rules
	if file == "" {
		file = opts.Rego
	}
	data, name, err := opts.ReadInput(file)
	if err != nil {
		return nil, err
	}
	var d governance.Decider
	if opts.Rules != "" {
		d, err = governance.ParseRules(name, data)
	} else {
		d, err = governance.ParseRego(name, string(data))
	}
	if err != nil {
		return nil, &UsageError{Err: err}
	}
	return d, nil
}

// printPolicyTestResult prints "PASS  name" or "FAIL  name" with each
// problem and the decision indented below, then a summary line.
func printPolicyTestResult(s *IOStreams, res PolicyTestResult) {
	for _, c := range res.Cases {
		if c.Pass {
			fmt.Fprintf(s.Out, "PASS  %s\n", safeText(c.Name))
			continue
		}
		fmt.Fprintf(s.Out, "%s  %s\n", s.Bold("FAIL"), safeText(c.Name))
		for _, p := range c.Problems {
			fmt.Fprintf(s.Out, "      %s\n", safeLines(p))
		}
		if c.Decision != nil {
			b, _ := json.Marshal(c.Decision)
			fmt.Fprintf(s.Out, "      %s\n", s.Faint("decision: "+string(b)))
		}
	}
	noun := "cases"
	if len(res.Cases) == 1 {
		noun = "case"
	}
	fmt.Fprintf(s.Out, "%d %s: %d passed, %d failed\n", len(res.Cases), noun, res.Passed, res.Failed)
}
