package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/version"
)

// VersionOptions are the inputs of `manent version`.
type VersionOptions struct {
	IO       *IOStreams
	Exporter *Exporter
	Info     func() version.Info
}

// NewCmdVersion builds `manent version`.
func NewCmdVersion(f *Factory, runF func(*VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: f.IOStreams, Info: version.Get}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of manent",
		Example: `  manent version
  manent version -o json   # {"version", "commit", "date", "go"}`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			if runF != nil {
				return runF(opts)
			}
			return versionRun(opts)
		},
	}
}

func versionRun(opts *VersionOptions) error {
	info := opts.Info()
	if opts.Exporter != nil {
		return opts.Exporter.Write(opts.IO.Out, info)
	}
	_, err := fmt.Fprintf(opts.IO.Out, "manent %s\n", info)
	return err
}
