package cli

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// selectedContext returns the context this invocation uses and where the
// name came from: --context, else $MANENT_CONTEXT, else current_context: in
// the config file; "" when none.
func selectedContext(file *cliFile, src configSource) (name, from string) {
	if fl := src.flags.Lookup("context"); fl != nil && fl.Changed && fl.Value.String() != "" {
		return fl.Value.String(), "--context"
	}
	if name := src.getenv("MANENT_CONTEXT"); name != "" {
		return name, "MANENT_CONTEXT"
	}
	if file != nil && file.CurrentContext != "" {
		return file.CurrentContext, "current_context"
	}
	return "", ""
}

// tokenOverridden says whether --token or $MANENT_TOKEN gives the token, so
// the context's token file need not be read.
func tokenOverridden(src configSource) bool {
	if fl := src.flags.Lookup("token"); fl != nil && fl.Changed && fl.Value.String() != "" {
		return true
	}
	return src.getenv("MANENT_TOKEN") != ""
}

// mergeContext puts the selected context's server, token and request
// timeout over the file's top-level keys in v: the context replaces the
// top-level server and token as a pair (a token never goes to a server it
// was not stored for), and flags and the environment, merged later, beat
// it key by key.
func mergeContext(v *viper.Viper, cfg *Config, file *cliFile, src configSource) error {
	name, from := selectedContext(file, src)
	if name == "" {
		return nil
	}
	e, err := file.lookup(name, from)
	if err != nil {
		return err
	}
	cfg.Context = name
	m := map[string]any{"server": e.Server, "token": ""}
	if e.Server == "" {
		m["server"] = DefaultServer
	}
	if !tokenOverridden(src) {
		tok, err := e.token(name)
		if err != nil {
			return err
		}
		m["token"] = tok
		if tok != "" {
			cfg.TokenSource = tokenFromContext(name, e)
		}
	}
	if e.RequestTimeout != "" {
		m["request_timeout"] = e.RequestTimeout
	}
	if err := v.MergeConfigMap(m); err != nil {
		return usageErrorf("context %q: %v", name, err)
	}
	return nil
}

// configSource returns what loadConfig reads for this invocation.
func (f *Factory) configSource() configSource {
	return configSource{flags: f.flags, getenv: f.Getenv, dir: f.WorkDir}
}

// readConfigFile reads the config file the context commands edit: the same
// one loadConfig reads (--config, $MANENT_CONFIG or the default).
func (f *Factory) readConfigFile() (*cliFile, error) {
	path, _ := configPath(f.configSource())
	if path == "" {
		return &cliFile{Contexts: map[string]*contextEntry{}}, nil
	}
	return readCLIFile(path)
}

// flagValue returns a global flag's value when it was given.
func (f *Factory) flagValue(name string) (string, bool) {
	fl := f.flags.Lookup(name)
	if fl == nil || !fl.Changed {
		return "", false
	}
	return fl.Value.String(), true
}

// refuseTokenFlag refuses --token for commands that store a token: a token
// on the command line ends up in the shell history and the process list.
func (f *Factory) refuseTokenFlag(cmd *cobra.Command, instead string) error {
	if _, ok := f.flagValue("token"); ok {
		return &UsageError{
			Err:  fmt.Errorf("%s does not take --token: a token on the command line is visible to other users and kept in the shell history", cmd.CommandPath()),
			Hint: "hint: pass it on stdin: " + instead,
		}
	}
	return nil
}

// ContextItem is one context as `context list -o json|yaml` prints it:
// never the token.
type ContextItem struct {
	Name    string `json:"name"`
	Server  string `json:"server"`
	Current bool   `json:"current"`
	// Auth is "token" (stored in the file), "token_file" or "none".
	Auth           string `json:"auth"`
	TokenFile      string `json:"token_file,omitempty"`
	RequestTimeout string `json:"request_timeout,omitempty"`
}

// ContextOptions are the inputs of the `manent context` commands.
type ContextOptions struct {
	IO       *IOStreams
	Exporter *Exporter
	Factory  *Factory

	Name       string
	Server     string
	TokenFile  string
	TokenStdin bool
	Use        bool
	Force      bool
}

// NewCmdContext builds `manent context add|use|list|current|delete`.
func NewCmdContext(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "context",
		Aliases: []string{"contexts"},
		Short:   "Manage named contexts: one server and its token each",
		Long: `A context names a server and the token to use with it, so one config file
serves a staging and a production server. Contexts live in the CLI config
file (--config, MANENT_CONFIG, default $XDG_CONFIG_HOME/manent/config.yaml)
under contexts:, and current_context: names the selected one.

The context a command uses is --context NAME, else MANENT_CONTEXT, else
current_context:. It replaces the file's top-level server: and token:;
--server/--token and MANENT_SERVER/MANENT_TOKEN still beat it, key by key:

  flags > MANENT_SERVER/MANENT_TOKEN > the selected context
        > top-level server:/token: > the trial admin token

A context that does not exist is a usage error (exit 2) that lists the
known ones. The file is rewritten atomically with mode 0600; a file that
holds a token and is readable by others is used, with a warning.`,
		Example: `  manent context add staging --server https://manent-staging.example --token-stdin < token.txt
  manent context add prod --server https://manent.example --token-file /run/secrets/manent
  manent context use staging
  manent context list
  manent --context prod list --state ERROR
  MANENT_CONTEXT=prod manent inventory`,
	}

	add := &cobra.Command{
		Use:   "add <name> --server URL [--token-stdin | --token-file FILE]",
		Short: "Add a context (or replace one with --force)",
		Long: `Add a context: a server and, optionally, a token. --token-stdin reads the
token from stdin and stores it in the config file (mode 0600);
--token-file stores the file's absolute path and reads it on each run.
A context is never given a token on the command line (--token).
'manent login' adds a context after checking the token with the server.`,
		Example: `  manent context add staging --server https://manent-staging.example --token-stdin < token.txt
  manent context add prod --server https://manent.example --token-file /run/secrets/manent --use`,
		Args: exactArgs(1, "context name"),
		RunE: func(c *cobra.Command, args []string) error {
			opts := &ContextOptions{IO: f.IOStreams, Factory: f, Name: args[0]}
			opts.TokenFile, _ = c.Flags().GetString("token-file")
			opts.TokenStdin, _ = c.Flags().GetBool("token-stdin")
			opts.Use, _ = c.Flags().GetBool("use")
			opts.Force, _ = c.Flags().GetBool("force")
			if err := f.refuseTokenFlag(c, "--token-stdin < token.txt, or --token-file FILE"); err != nil {
				return err
			}
			server, ok := f.flagValue("server")
			if !ok || server == "" {
				return &UsageError{Err: fmt.Errorf("missing --server"), Hint: "Usage: " + c.UseLine()}
			}
			opts.Server = server
			return contextAddRun(opts)
		},
	}
	add.Flags().String("token-file", "", "file holding the token, read on each run (its path is stored, not the token)")
	add.Flags().Bool("token-stdin", false, "read the token from stdin and store it in the config file")
	add.Flags().Bool("use", false, "select the context (current_context)")
	add.Flags().Bool("force", false, "replace a context of the same name")
	add.MarkFlagsMutuallyExclusive("token-file", "token-stdin")
	_ = add.MarkFlagFilename("token-file")

	use := &cobra.Command{
		Use:     "use <name>",
		Short:   "Select a context for the commands that follow",
		Example: `  manent context use prod`,
		Args:    exactArgs(1, "context name"),
		RunE: func(c *cobra.Command, args []string) error {
			return contextUseRun(&ContextOptions{IO: f.IOStreams, Factory: f, Name: args[0]})
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the contexts, the selected one marked with *",
		Long: `List the contexts of the config file: name, server and how each
authenticates (token, token_file or none), never the token itself. The
selected context (--context, MANENT_CONTEXT or current_context:) is marked
with * in the CURRENT column and "current": true in -o json|yaml.`,
		Example: `  manent context list
  manent context list -o json`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return contextListRun(&ContextOptions{IO: f.IOStreams, Factory: f, Exporter: f.Exporter()})
		},
	}
	current := &cobra.Command{
		Use:   "current",
		Short: "Print the name of the selected context",
		Long: `Print the name of the context commands use now: --context, else
MANENT_CONTEXT, else current_context: of the config file. With none
selected it exits 2.`,
		Example: `  manent context current
  manent context current -o json   # {"name", "server", "from"}`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return contextCurrentRun(&ContextOptions{IO: f.IOStreams, Factory: f, Exporter: f.Exporter()})
		},
	}
	del := &cobra.Command{
		Use:     "delete <name>",
		Aliases: []string{"rm"},
		Short:   "Delete a context and its stored token",
		Example: `  manent context delete staging`,
		Args:    exactArgs(1, "context name"),
		RunE: func(c *cobra.Command, args []string) error {
			return contextDeleteRun(&ContextOptions{IO: f.IOStreams, Factory: f, Name: args[0]})
		},
	}
	for _, c := range []*cobra.Command{use, del} {
		c.ValidArgsFunction = completeContextNames(f)
	}
	cmd.AddCommand(add, use, list, current, del)
	return cmd
}

// completeContextNames completes the names of the config file's contexts.
func completeContextNames(f *Factory) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		file, err := f.readConfigFile()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return file.names(), cobra.ShellCompDirectiveNoFileComp
	}
}

// readToken reads a token from r: surrounding space and newlines are
// dropped; an empty token is a usage error.
func readToken(r io.Reader, what string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, 64<<10))
	if err != nil {
		return "", usageErrorf("read the token from %s: %v", what, err)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", usageErrorf("no token on %s", what)
	}
	if strings.ContainsAny(tok, "\r\n\t ") {
		return "", usageErrorf("the token on %s has more than one line or word", what)
	}
	return tok, nil
}

func contextAddRun(opts *ContextOptions) error {
	f := opts.Factory
	if err := checkContextName(opts.Name); err != nil {
		return err
	}
	server, err := normalizeServer(opts.Server)
	if err != nil {
		return err
	}
	entry := &contextEntry{Server: server}
	switch {
	case opts.TokenStdin:
		if entry.Token, err = readToken(opts.IO.In, "stdin"); err != nil {
			return err
		}
	case opts.TokenFile != "":
		p := absPath(f.WorkDir, opts.TokenFile)
		if _, err := entry.tokenFrom(p); err != nil {
			return err
		}
		entry.TokenFile = p
	}
	file, err := f.readConfigFile()
	if err != nil {
		return err
	}
	if _, exists := file.Contexts[opts.Name]; exists && !opts.Force {
		return &UsageError{
			Err:  fmt.Errorf("context %q already exists", opts.Name),
			Hint: "hint: pass --force to replace it, or 'manent context delete " + opts.Name + "' first",
		}
	}
	file.Contexts[opts.Name] = entry
	if opts.Use {
		file.CurrentContext = opts.Name
	}
	if err := file.save(); err != nil {
		return err
	}
	msg := fmt.Sprintf("Context %q added: %s, auth %s", opts.Name, server, entry.auth())
	if opts.Use {
		msg += ", selected"
	}
	_, err = fmt.Fprintln(opts.IO.Out, msg)
	return err
}

// tokenFrom checks that the token file p can be read and is not empty.
func (e *contextEntry) tokenFrom(p string) (string, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		return "", &UsageError{Err: fmt.Errorf("read token file %s: %w", p, unwrapPathError(err))}
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", usageErrorf("token file %s is empty", p)
	}
	return tok, nil
}

func contextUseRun(opts *ContextOptions) error {
	file, err := opts.Factory.readConfigFile()
	if err != nil {
		return err
	}
	e, err := file.lookup(opts.Name, "")
	if err != nil {
		return err
	}
	file.CurrentContext = opts.Name
	if err := file.save(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Switched to context %q (%s)\n", opts.Name, serverOf(e))
	return err
}

func serverOf(e *contextEntry) string {
	if e.Server == "" {
		return DefaultServer
	}
	return e.Server
}

func contextListRun(opts *ContextOptions) error {
	file, err := opts.Factory.readConfigFile()
	if err != nil {
		return err
	}
	if w := file.looseModeWarning(); w != "" {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %s\n", w)
	}
	current, _ := selectedContext(file, opts.Factory.configSource())
	items := make([]ContextItem, 0, len(file.Contexts))
	for _, name := range file.names() {
		e := file.Contexts[name]
		items = append(items, ContextItem{
			Name: name, Server: serverOf(e), Current: name == current,
			Auth: e.auth(), TokenFile: e.TokenFile, RequestTimeout: e.RequestTimeout,
		})
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, items)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(opts.IO.ErrOut, "No contexts: add one with 'manent context add NAME --server URL' or 'manent login --context NAME --server URL'.")
		return err
	}
	t := opts.IO.NewTable("CURRENT", "NAME", "SERVER", "AUTH")
	for _, it := range items {
		mark := ""
		if it.Current {
			mark = "*"
		}
		auth := it.Auth
		if it.TokenFile != "" {
			auth = "token_file " + it.TokenFile
		}
		t.AddRow(mark, it.Name, it.Server, auth)
	}
	if err := t.Render(); err != nil {
		return err
	}
	if current != "" {
		if _, ok := file.Contexts[current]; !ok {
			fmt.Fprintf(opts.IO.ErrOut, "warning: the selected context %q does not exist\n", current)
		}
	}
	return nil
}

// contextCurrent is `context current -o json`.
type contextCurrent struct {
	Name   string `json:"name"`
	Server string `json:"server"`
	// From is where the name came from: --context, MANENT_CONTEXT or
	// current_context.
	From string `json:"from"`
}

func contextCurrentRun(opts *ContextOptions) error {
	file, err := opts.Factory.readConfigFile()
	if err != nil {
		return err
	}
	name, from := selectedContext(file, opts.Factory.configSource())
	if name == "" {
		return &UsageError{
			Err:  fmt.Errorf("no context is selected"),
			Hint: "select one with 'manent context use NAME', --context NAME or MANENT_CONTEXT",
		}
	}
	e, err := file.lookup(name, from)
	if err != nil {
		return err
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, contextCurrent{Name: name, Server: serverOf(e), From: from})
	}
	_, err = fmt.Fprintln(opts.IO.Out, name)
	return err
}

func contextDeleteRun(opts *ContextOptions) error {
	file, err := opts.Factory.readConfigFile()
	if err != nil {
		return err
	}
	if _, err := file.lookup(opts.Name, ""); err != nil {
		return err
	}
	delete(file.Contexts, opts.Name)
	wasCurrent := file.CurrentContext == opts.Name
	if wasCurrent {
		file.CurrentContext = ""
	}
	if err := file.save(); err != nil {
		return err
	}
	msg := fmt.Sprintf("Deleted context %q", opts.Name)
	if wasCurrent {
		msg += "; no context is selected now"
	}
	_, err = fmt.Fprintln(opts.IO.Out, msg)
	return err
}
