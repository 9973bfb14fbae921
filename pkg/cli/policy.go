package cli

import (
	"fmt"

	"github.com/spf13/cobra"
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

// NewCmdPolicy builds `manent policy` and its subcommand `test`. runF runs
// the checked options of `policy test`: nil in manent, which runs the
// command in the manent-policy binary (see sibling.go); pkg/policycmd gives
// the real evaluation (OPA); tests check flag parsing.
func NewCmdPolicy(f *Factory, runF func(*PolicyTestOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy <command>",
		Short: "Work with governance rules and Rego policies",
		Long: `Work with the governance of manent-server (freezes, promotion, approvals,
change tickets) locally, without a server.`,
		Example: `  manent policy test --rules governance.yaml --cases cases.yaml`,
		RunE:    groupHelp,
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
rules, a policy or cases that cannot be read or loaded).

The evaluation runs in a separate binary, manent-policy, shipped beside
manent (the release archive, the image), so that the other commands do not
carry the Rego engine: manent runs it with the same flags.`,
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
			return runSibling(cmd.Context(), f, cmd, PolicyBinary, []string{"test"}, args)
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
