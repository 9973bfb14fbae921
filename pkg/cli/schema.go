package cli

import (
	"github.com/spf13/cobra"

	"github.com/manent-io/manent/descriptor"
)

// SchemaOptions are the inputs of `manent schema`.
type SchemaOptions struct {
	IO *IOStreams
	// Schema returns the JSON Schema to print.
	Schema func() []byte
}

// NewCmdSchema builds `manent schema`.
func NewCmdSchema(f *Factory, runF func(*SchemaOptions) error) *cobra.Command {
	opts := &SchemaOptions{IO: f.IOStreams, Schema: descriptor.Schema}
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of deploy.yml",
		Long: `Print the JSON Schema (draft 2020-12) of the deploy descriptor, exactly as
embedded in manent, for editors and other tools. -o has no effect: the
schema is JSON.`,
		Example: `  manent schema > deploy.schema.json

  # VS Code (redhat.vscode-yaml): first line of deploy.yml
  # yaml-language-server: $schema=./deploy.schema.json`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return schemaRun(opts)
		},
	}
}

func schemaRun(opts *SchemaOptions) error {
	_, err := opts.IO.Out.Write(opts.Schema())
	return err
}
