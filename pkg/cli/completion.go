package cli

import (
	"github.com/spf13/cobra"
)

// CompletionOptions are the inputs of `manent completion`.
type CompletionOptions struct {
	IO    *IOStreams
	Shell string
	// Root is the command tree to complete.
	Root *cobra.Command
}

// NewCmdCompletion builds `manent completion`, using cobra's generators.
func NewCmdCompletion(f *Factory, runF func(*CompletionOptions) error) *cobra.Command {
	opts := &CompletionOptions{IO: f.IOStreams}
	shells := []string{"bash", "zsh", "fish", "powershell"}
	return &cobra.Command{
		Use:   "completion bash|zsh|fish|powershell",
		Short: "Print a shell completion script",
		Long: `Print the completion script for a shell. Load it in the current shell or
install it where your shell looks for completions.

Besides commands and flags, the shell completes from the configured server
(--server/--token, MANENT_SERVER/MANENT_TOKEN, the config file): deploy ids
for status, open, steps, logs, wait, cancel, approve and reject (wait and
cancel offer deploys not final yet, approve and reject those awaiting
approval), applications and environments for history and rollback and
for --application/--environment of list and dora, schedule ids for
'schedules delete' and cluster names for 'clusters status'. The server
gets 2 s; when it cannot answer, nothing is offered.`,
		Example: `  # bash, current shell
  source <(manent completion bash)

  # bash, every shell (Linux)
  manent completion bash > /etc/bash_completion.d/manent

  # zsh: a directory listed in $fpath
  manent completion zsh > "${fpath[1]}/_manent"

  # fish
  manent completion fish > ~/.config/fish/completions/manent.fish`,
		ValidArgs: shells,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs(1, "shell (bash, zsh, fish or powershell)")(cmd, args); err != nil {
				return err
			}
			return cobra.OnlyValidArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Shell, opts.Root = args[0], cmd.Root()
			if runF != nil {
				return runF(opts)
			}
			return completionRun(opts)
		},
	}
}

func completionRun(opts *CompletionOptions) error {
	w := opts.IO.Out
	switch opts.Shell {
	case "bash":
		return opts.Root.GenBashCompletionV2(w, true)
	case "zsh":
		return opts.Root.GenZshCompletion(w)
	case "fish":
		return opts.Root.GenFishCompletion(w, true)
	case "powershell":
		return opts.Root.GenPowerShellCompletionWithDesc(w)
	}
	return usageErrorf("unsupported shell %q: want bash, zsh, fish or powershell", opts.Shell)
}
