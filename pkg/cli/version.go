package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/version"
)

// VersionOptions are the inputs of `manent version`.
type VersionOptions struct {
	IO       *IOStreams
	Exporter *Exporter
	Info     func() version.Info
	Client   func() (*api.Client, error)
	// ClientOnly skips asking the server (--client).
	ClientOnly bool
}

// VersionOutput is the `version -o json` document: the CLI's build, and
// the server's when it answered.
type VersionOutput struct {
	version.Info
	Server *api.VersionInfo `json:"server,omitempty"`
	// ServerError says why the server's version is missing.
	ServerError string `json:"server_error,omitempty"`
}

// NewCmdVersion builds `manent version`.
func NewCmdVersion(f *Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IOStreams, Info: version.Get, Client: f.Client}
	cmd := &cobra.Command{
		Use:   "version [--client]",
		Short: "Print the version of manent and of the server",
		Long: `Print the CLI's version, then the version of the server it talks to
(--server, MANENT_SERVER or the config file). When the server cannot be
asked, the reason is printed on stderr and the command still exits 0;
--client does not ask it.`,
		Example: `  manent version
  manent version --client
  manent version -o json   # {"version", "commit", "date", "go", "server": {…}}`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return versionRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.ClientOnly, "client", false, "print the CLI's version only, without asking the server")
	return cmd
}

func versionRun(ctx context.Context, opts *VersionOptions) error {
	out := VersionOutput{Info: opts.Info()}
	var server string
	if !opts.ClientOnly && opts.Client != nil {
		client, err := opts.Client()
		if err == nil {
			server = client.Server()
			out.Server, err = client.Version(ctx)
		}
		if err != nil {
			out.Server, out.ServerError = nil, err.Error()
		}
	}
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, out)
	}
	if _, err := fmt.Fprintf(opts.IO.Out, "manent %s\n", out.Info); err != nil {
		return err
	}
	if s := out.Server; s != nil {
		_, err := fmt.Fprintf(opts.IO.Out, "server %s: manent-server %s\n", safeText(server),
			safeText(version.Info{Version: s.Version, Commit: s.Commit, Date: s.Date, Go: s.Go}.String()))
		return err
	}
	if out.ServerError != "" {
		fmt.Fprintf(opts.IO.ErrOut, "server: %s\n", safeText(out.ServerError))
	}
	return nil
}
