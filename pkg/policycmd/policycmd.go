// Package policycmd is the manent-policy binary: `manent policy test` with
// the Rego engine (OPA). pkg/cli defines the command (flags, checks, help)
// and, in manent, runs it in this binary so that manent does not link OPA;
// here the same command evaluates the cases with pkg/governance.
//
// It imports pkg/cli and pkg/governance.
package policycmd

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/cli"
	"github.com/manent-io/manent/pkg/governance"
)

// Main runs manent-policy for the current process and returns its exit
// code: `manent-policy test …` is `manent policy test …`.
func Main() int { return cli.SiblingMain(NewCmd) }

// NewCmd builds `manent policy` whose `test` evaluates in this process.
func NewCmd(f *cli.Factory) *cobra.Command {
	var cmd *cobra.Command
	cmd = cli.NewCmdPolicy(f, func(opts *cli.PolicyTestOptions) error {
		ctx := context.Background()
		if test, _, err := cmd.Find([]string{"test"}); err == nil && test.Context() != nil {
			ctx = test.Context()
		}
		return Run(ctx, opts)
	})
	return cmd
}

// Result is the `policy test -o json` document.
type Result struct {
	Passed int          `json:"passed"`
	Failed int          `json:"failed"`
	Cases  []CaseResult `json:"cases"`
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	Name string `json:"name"`
	Line int    `json:"line"`
	Pass bool   `json:"pass"`
	// Problems are the mismatches with the expectation, or the error.
	Problems []string             `json:"problems"`
	Decision *governance.Decision `json:"decision"`
}

// Run evaluates the cases of checked options and prints the outcome; a
// failed case is exit status 1.
func Run(ctx context.Context, opts *cli.PolicyTestOptions) error {
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
		return &cli.UsageError{Err: err}
	}

	res := Result{Cases: []CaseResult{}}
	for _, c := range cases {
		r := CaseResult{Name: c.Name, Line: c.Line, Problems: []string{}}
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
		printResult(opts.IO, res)
	}
	if res.Failed > 0 {
		return &cli.SilentError{Code: cli.ExitFailed}
	}
	return nil
}

// loadDecider reads and loads the rules or the policy; any problem is a
// usage error listing every mistake with its line.
func loadDecider(opts *cli.PolicyTestOptions) (governance.Decider, error) {
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
		return nil, &cli.UsageError{Err: err}
	}
	return d, nil
}

// printResult prints "PASS  name" or "FAIL  name" with each problem and the
// decision indented below, then a summary line.
func printResult(s *cli.IOStreams, res Result) {
	for _, c := range res.Cases {
		if c.Pass {
			fmt.Fprintf(s.Out, "PASS  %s\n", cli.SafeText(c.Name))
			continue
		}
		fmt.Fprintf(s.Out, "%s  %s\n", s.Bold("FAIL"), cli.SafeText(c.Name))
		for _, p := range c.Problems {
			fmt.Fprintf(s.Out, "      %s\n", cli.SafeLines(p))
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
