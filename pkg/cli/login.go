package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/manent-io/manent/pkg/manent"
)

// LoginOptions are the inputs of `manent login`.
type LoginOptions struct {
	IO      *IOStreams
	Factory *Factory

	// WithToken reads the token from stdin.
	WithToken bool
	// ReadSecret reads a token typed on the terminal without echo; nil when
	// stdin is not a terminal.
	ReadSecret func(prompt string) (string, error)
}

// NewCmdLogin builds `manent login`.
func NewCmdLogin(f *Factory) *cobra.Command {
	opts := &LoginOptions{IO: f.IOStreams, Factory: f}
	cmd := &cobra.Command{
		Use:   "login [--context NAME] [--server URL] [--with-token]",
		Short: "Check a token with the server and store it in a context",
		Long: `Store a token in a named context of the CLI config file and select that
context, after checking the token with the server (an authenticated
GET /api/v1/version). Nothing is written when the check fails: a refused
token exits 2, an unreachable server 4.

The context is --context, else MANENT_CONTEXT, else the selected one
(current_context:), else "default"; it is created when missing. Its server
is --server, else MANENT_SERVER, else the context's own, else
` + DefaultServer + `.

The token is read from stdin with --with-token (as 'gh auth login
--with-token'), or typed at a prompt without echo when stdin is a terminal;
with neither, login exits 2. It is never taken from --token, never printed
and never logged; the config file is written with mode 0600.`,
		Example: `  manent login --context prod --server https://manent.example    # prompts for the token
  manent login --context staging --server https://manent-staging.example --with-token < token.txt
  echo "$MANENT_CI_TOKEN" | manent login --with-token`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if err := f.refuseTokenFlag(c, "manent login --with-token < token.txt"); err != nil {
				return err
			}
			if !opts.WithToken {
				opts.ReadSecret = terminalSecretReader(f.IOStreams)
			}
			return loginRun(c.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.WithToken, "with-token", false, "read the token from stdin")
	return cmd
}

// terminalSecretReader returns a reader of a token typed on the terminal
// without echo (the prompt goes to stderr), or nil when stdin is not a
// terminal.
func terminalSecretReader(s *IOStreams) func(string) (string, error) {
	in, ok := s.In.(*os.File)
	if !ok || !term.IsTerminal(int(in.Fd())) {
		return nil
	}
	return func(prompt string) (string, error) {
		fmt.Fprint(s.ErrOut, prompt)
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(s.ErrOut)
		if err != nil {
			return "", err
		}
		return string(b), nil
	}
}

func loginRun(ctx context.Context, opts *LoginOptions) error {
	f := opts.Factory
	file, err := f.readConfigFile()
	if err != nil {
		return err
	}
	name, _ := selectedContext(file, f.configSource())
	if name == "" {
		name = "default"
	}
	if err := checkContextName(name); err != nil {
		return err
	}
	entry := file.Contexts[name]
	server, ok := f.flagValue("server")
	if !ok || server == "" {
		server = f.Getenv("MANENT_SERVER")
	}
	if server == "" && entry != nil {
		server = entry.Server
	}
	if server, err = normalizeServer(server); err != nil {
		return err
	}

	var token string
	switch {
	case opts.WithToken:
		if token, err = readToken(opts.IO.In, "stdin"); err != nil {
			return err
		}
	case opts.ReadSecret != nil:
		typed, err := opts.ReadSecret(fmt.Sprintf("Token for %s (input hidden): ", server))
		if err != nil {
			return usageErrorf("read the token: %v", err)
		}
		if token, err = readToken(strings.NewReader(typed), "the terminal"); err != nil {
			return err
		}
	default:
		return &UsageError{
			Err:  errors.New("no token: stdin is not a terminal"),
			Hint: "pipe the token with --with-token: manent login --with-token < token.txt",
		}
	}

	timeout := DefaultRequestTimeout
	if v, ok := f.flagValue("request-timeout"); ok {
		if d, err := time.ParseDuration(v); err == nil {
			timeout = d
		}
	}
	if _, err := f.ClientFor(server, token, timeout).Version(ctx); err != nil {
		if code := manent.ErrorCode(err); code == manent.EUnauthorized || code == manent.EForbidden {
			return &UsageError{
				Err:  fmt.Errorf("%s refused the token: %w", server, err),
				Hint: "nothing was written; check the token and the server",
			}
		}
		return err
	}

	if entry == nil {
		entry = &contextEntry{}
		file.Contexts[name] = entry
	}
	entry.Server, entry.Token, entry.TokenFile = server, token, ""
	file.CurrentContext = name
	if err := file.save(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(opts.IO.Out, "Logged in to %s: token stored in context %q of %s (selected)\n", server, name, file.Path)
	return err
}

// NewCmdLogout builds `manent logout`.
func NewCmdLogout(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "logout [--context NAME]",
		Short: "Remove the stored token of a context",
		Long: `Remove the token (or token file reference) of a context from the CLI
config file; the context and its server stay. The context is --context, else
MANENT_CONTEXT, else the selected one; with no context selected, logout
removes the file's top-level token:. The server is not told: a static
token stays valid until it is removed from the server's auth.tokens.`,
		Example: `  manent logout
  manent logout --context prod`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return logoutRun(f)
		},
	}
}

func logoutRun(f *Factory) error {
	file, err := f.readConfigFile()
	if err != nil {
		return err
	}
	out := f.IOStreams.Out
	name, from := selectedContext(file, f.configSource())
	if name == "" {
		if !file.LegacyToken {
			_, err := fmt.Fprintln(out, "No token stored: no context is selected and the config file has no token.")
			return err
		}
		setKey(file.root(), "token", nil, true)
		file.LegacyToken = false
		if err := file.save(); err != nil {
			return err
		}
		_, err := fmt.Fprintf(out, "Removed the token of %s\n", file.Path)
		return err
	}
	e, err := file.lookup(name, from)
	if err != nil {
		return err
	}
	if e.Token == "" && e.TokenFile == "" {
		_, err := fmt.Fprintf(out, "Context %q has no token.\n", name)
		return err
	}
	e.Token, e.TokenFile = "", ""
	if err := file.save(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "Removed the token of context %q\n", name)
	return err
}
