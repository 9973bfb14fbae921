package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/suggest"
	"github.com/manent-io/manent/pkg/version"
)

// NewCmdRoot builds the `manent` command tree for f.
func NewCmdRoot(f *Factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "manent <command>",
		Short: "Submit deploys to manent-server and follow them",
		Long: `manent sends deploy descriptors (deploy.yml) to manent-server and follows
the deploys it runs: their state, steps, logs and outcome.

The server and token come from --server/--token, then MANENT_SERVER and
MANENT_TOKEN, then the selected context (--context, MANENT_CONTEXT or
current_context: in the config file; see 'manent context' and 'manent
login'), then the config file's top-level "server" and "token"
($XDG_CONFIG_HOME/manent/config.yaml). Talking to a loopback server
without a token, the CLI uses the admin token of a local trial server:
$MANENT_DATA_DIR/admin.token, the token file 'manent-server serve'
recorded for that address (from any directory), or
./manent-data/admin.token.

-o json|yaml prints what a command shows as a document with absolute
RFC 3339 times; --jq <expr> filters that JSON through a jq expression
(strings print raw, other values as compact JSON, one per line).

Each request is bounded by --request-timeout (default 30s); reads and
'deploy' (which sends an Idempotency-Key) are retried a few times after a
503/429, honouring the server's Retry-After, or a dropped connection;
'cancel', 'approve' and 'reject' only after a 503/429 with a Retry-After of
at most 30s, which they wait.
Following a deploy (deploy --wait, rollback --wait, wait, logs -f), a
server that stops answering is asked again for --follow-grace (default
30s) before exit 4.

Text received from the server (logs, errors, names) is printed with control
characters and escape sequences made visible; only 'manent logs --raw'
prints log text untouched.

Exit codes: 0 success; 1 the deploy ended in another final state, or
validation failed; 2 usage or configuration error; 3 --timeout elapsed;
4 server unreachable (no connection, no answer in time) or server error
(5xx); the message says which. An error answer that is not the API's
(an HTML page from a proxy or another service) is reported in one line:
status, URL and the start of the body, with a hint to check --server.`,
		Example: `  manent validate -f deploy.yml --offline
  manent deploy -f deploy.yml --wait --timeout 20m
  manent status dpl_01JABCDEF -o json
  manent list --environment prod --state ERROR
  manent --context prod inventory
  manent list --state ERROR --jq '.items[].id'`,
		Version:       version.String(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(f.IOStreams.In)
	root.SetOut(f.IOStreams.Out)
	root.SetErr(f.IOStreams.ErrOut)
	root.SetVersionTemplate("manent {{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	root.PersistentFlags().AddFlagSet(f.GlobalFlags())
	root.SetFlagErrorFunc(flagError)

	root.AddGroup(
		&cobra.Group{ID: "deploy", Title: "Deploy commands:"},
		&cobra.Group{ID: "follow", Title: "Following deploys:"},
		&cobra.Group{ID: "other", Title: "Other commands:"},
	)
	add := func(group string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = group
			root.AddCommand(c)
		}
	}
	add("deploy",
		NewCmdValidate(f, nil),
		NewCmdDeploy(f, nil),
		NewCmdCancel(f, nil),
		NewCmdApprove(f, nil),
		NewCmdReject(f, nil),
		NewCmdRollback(f, nil),
		NewCmdDiff(f, nil),
	)
	add("follow",
		NewCmdStatus(f, nil),
		NewCmdOpen(f, nil),
		NewCmdSteps(f, nil),
		NewCmdLogs(f, nil),
		NewCmdWait(f, nil),
		NewCmdList(f, nil),
		NewCmdActivity(f, nil),
		NewCmdInventory(f, nil),
		NewCmdHistory(f, nil),
		NewCmdDORA(f, nil),
		NewCmdSchedules(f, nil),
		NewCmdAudit(f, nil),
		NewCmdClusters(f, nil),
	)
	add("other",
		NewCmdAgent(f, nil),
		NewCmdSchema(f, nil),
		NewCmdPolicy(f, nil),
		NewCmdContext(f),
		NewCmdLogin(f),
		NewCmdLogout(f),
		NewCmdVersion(f, nil),
		NewCmdCompletion(f, nil),
	)
	root.SetHelpCommandGroupID("other")
	_ = root.RegisterFlagCompletionFunc("context", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return completeContextNames(f)(nil, nil, "")
	})
	registerServerCompletion(root, f) // complete.go: ids, applications, environments, schedules
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group below the root
// (schedules, clusters, context…) refuse a word that is none of its
// subcommands as a usage error (exit 2), as the root does: cobra would print
// the group's help and exit 0, so a typo such as `manent schedules delet
// sch_…` in a script would succeed without deleting anything. A group
// called alone still prints its help, unless it lists (groupArgs).
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasParent() || !c.HasSubCommands() || c.Runnable() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = groupHelp
}

// groupHelp runs a command group called alone: its help, or the usage
// error of groupArgs.
func groupHelp(cmd *cobra.Command, args []string) error {
	if err := groupArgs(cmd, args); err != nil {
		return err
	}
	return cmd.Help()
}

// groupArgs refuses a word that is none of a command group's subcommands
// as a usage error (exit 2). It is the Args of a group that runs its
// listing when called alone (`manent schedules`, `manent clusters`), and
// what every other group answers (refuseUnknownSubcommands, groupHelp).
//
// Its hint names the subcommand a typo was likely meant for (`clusters
// stauts` → 'manent clusters status'), as the root's does, or, for a word
// that is no typo given to a group that shows one of its items
// (annotation showOne: `manent clusters eu-1`), the command that shows it.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	path := cmd.CommandPath()
	hint := fmt.Sprintf("Run '%s --help' for usage.", path)
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(append(names, sub.Name()), sub.Aliases...)
		}
	}
	if near := suggest.Closest(args[0], names); near != "" {
		hint = fmt.Sprintf("Did you mean '%s %s'?\n", path, near) + hint
	} else if one := cmd.Annotations[showOne]; one != "" && len(args) == 1 {
		a := safeText(shellQuote(args[0]))
		hint = fmt.Sprintf("To show %s: %s %s %s\n", a, path, one, a) + hint
	}
	return &UsageError{Err: fmt.Errorf("unknown command %q for %q", args[0], path), Hint: hint}
}

// showOne is the annotation of a command group naming its subcommand that
// shows one item (clusters: "status"), for groupArgs' hint.
const showOne = "manent.showOne"

// exactArgs is cobra.ExactArgs with a message naming what is missing.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < n:
			return &UsageError{
				Err:  fmt.Errorf("missing %s", what),
				Hint: fmt.Sprintf("Usage: %s", cmd.UseLine()),
			}
		case len(args) > n:
			return &UsageError{
				Err:  fmt.Errorf("too many arguments: want %s, got %q", what, args),
				Hint: fmt.Sprintf("Usage: %s", cmd.UseLine()),
			}
		}
		return nil
	}
}

// idArg is exactArgs(1, what) for an argument that names one resource
// in a request path (a deploy id, a schedule id, a cluster name). An empty
// one (an unset variable in "$ID") or "." or ".." is refused as a usage
// error: in the path they name another route ("/deployments/" + "" + "/steps"
// is read as the deploy "steps", ".." climbs to the parent), which answered
// "not found" for something else, a 405, a panic, or the wrong document
// with exit 0.
func idArg(what string) cobra.PositionalArgs {
	n := exactArgs(1, what)
	return func(cmd *cobra.Command, args []string) error {
		if err := n(cmd, args); err != nil {
			return err
		}
		switch args[0] {
		case "":
			return &UsageError{
				Err:  fmt.Errorf("empty %s (an unset variable?)", what),
				Hint: fmt.Sprintf("Usage: %s", cmd.UseLine()),
			}
		case ".", "..":
			return &UsageError{
				Err:  fmt.Errorf("%q is not a %s", args[0], what),
				Hint: fmt.Sprintf("Usage: %s", cmd.UseLine()),
			}
		}
		return nil
	}
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return &UsageError{
			Err:  fmt.Errorf("unexpected argument %q", args[0]),
			Hint: fmt.Sprintf("Usage: %s", cmd.UseLine()),
		}
	}
	return nil
}
