package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// The runF hook of NewCmdX lets tests check what a command line parses into
// without running anything.
func TestCommandOptions(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, got any)
		// usageErr: the command line is refused with a usage error and
		// the command does not run.
		usageErr bool
	}{
		{
			name: "deploy defaults",
			args: []string{"deploy", "-f", "d.yml"},
			check: func(t *testing.T, got any) {
				o := got.(*DeployOptions)
				if o.File != "d.yml" || o.Wait || o.Timeout != 30*time.Minute || o.Exporter != nil {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "deploy --wait --timeout -o json",
			args: []string{"deploy", "-f", "-", "--wait", "--timeout", "90s", "-o", "json"},
			check: func(t *testing.T, got any) {
				o := got.(*DeployOptions)
				if o.File != "-" || !o.Wait || o.Timeout != 90*time.Second || o.Exporter.Format() != FormatJSON {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "deploy without -f", args: []string{"deploy"}, usageErr: true},
		{name: "deploy negative timeout", args: []string{"deploy", "-f", "d.yml", "--timeout", "-1m"}, usageErr: true},
		// Without --wait the job would pass whatever became of the deploy.
		{name: "deploy --timeout without --wait", args: []string{"deploy", "-f", "d.yml", "--timeout", "20m"}, usageErr: true},
		{name: "rollback --timeout without --wait", args: []string{"rollback", "billing", "prod", "--timeout", "20m"}, usageErr: true},
		{
			name: "rollback --wait --timeout",
			args: []string{"rollback", "billing", "prod", "--wait", "--timeout", "20m"},
			check: func(t *testing.T, got any) {
				o := got.(*RollbackOptions)
				if !o.Wait || o.Timeout != 20*time.Minute || o.Application != "billing" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "list filters",
			args: []string{"list", "--application", "billing", "--environment", "prod", "--state", "error", "--limit", "5", "--cursor", "c1"},
			check: func(t *testing.T, got any) {
				o := got.(*ListOptions)
				if o.Application != "billing" || o.Environment != "prod" || o.State != "ERROR" || o.Limit != 5 || o.Cursor != "c1" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "list bad state", args: []string{"list", "--state", "DONE"}, usageErr: true},
		{name: "list bad limit", args: []string{"list", "--limit", "x"}, usageErr: true},
		{
			name: "wait",
			args: []string{"wait", "dpl_1", "--timeout", "0"},
			check: func(t *testing.T, got any) {
				o := got.(*WaitOptions)
				if o.ID != "dpl_1" || o.Timeout != 0 {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "wait two ids", args: []string{"wait", "a", "b"}, usageErr: true},
		{
			name: "logs -f",
			args: []string{"logs", "-f", "dpl_1", "--timeout", "5m", "-o", "yaml"},
			check: func(t *testing.T, got any) {
				o := got.(*LogsOptions)
				if o.ID != "dpl_1" || !o.Follow || o.Timeout != 5*time.Minute || o.Exporter.Format() != FormatYAML {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "logs --timeout without -f", args: []string{"logs", "dpl_1", "--timeout", "5m"}, usageErr: true},
		{
			name: "validate --offline",
			args: []string{"validate", "--offline", "-f", "d.yml"},
			check: func(t *testing.T, got any) {
				o := got.(*ValidateOptions)
				if o.File != "d.yml" || !o.Offline {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "status",
			args: []string{"status", "dpl_1"},
			check: func(t *testing.T, got any) {
				if o := got.(*StatusOptions); o.ID != "dpl_1" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "cancel",
			args: []string{"cancel", "dpl_1"},
			check: func(t *testing.T, got any) {
				if o := got.(*CancelOptions); o.ID != "dpl_1" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "activity",
			args: []string{"activity", "-o", "json"},
			check: func(t *testing.T, got any) {
				if o := got.(*ActivityOptions); o.Exporter.Format() != FormatJSON {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "activity with an argument", args: []string{"activity", "prod"}, usageErr: true},
		{
			name: "completion",
			args: []string{"completion", "fish"},
			check: func(t *testing.T, got any) {
				if o := got.(*CompletionOptions); o.Shell != "fish" || o.Root == nil {
					t.Errorf("got %+v", o)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got any
			f := NewFactory(Invocation{})
			root := &cobra.Command{Use: "manent", SilenceErrors: true, SilenceUsage: true}
			root.SetOut(io.Discard)
			root.PersistentFlags().AddFlagSet(f.GlobalFlags())
			root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
			root.AddCommand(
				NewCmdDeploy(f, func(o *DeployOptions) error { got = o; return nil }),
				NewCmdList(f, func(o *ListOptions) error { got = o; return nil }),
				NewCmdWait(f, func(o *WaitOptions) error { got = o; return nil }),
				NewCmdLogs(f, func(o *LogsOptions) error { got = o; return nil }),
				NewCmdValidate(f, func(o *ValidateOptions) error { got = o; return nil }),
				NewCmdStatus(f, func(o *StatusOptions) error { got = o; return nil }),
				NewCmdCancel(f, func(o *CancelOptions) error { got = o; return nil }),
				NewCmdCompletion(f, func(o *CompletionOptions) error { got = o; return nil }),
				NewCmdActivity(f, func(o *ActivityOptions) error { got = o; return nil }),
				NewCmdRollback(f, func(o *RollbackOptions) error { got = o; return nil }),
			)
			root.SetArgs(tt.args)
			err := root.Execute()
			if tt.usageErr {
				if got != nil {
					t.Fatalf("the command ran with %+v", got)
				}
				// Run turns cobra's own errors (required flags) into usage
				// errors; the commands' checks return them directly.
				var usage *UsageError
				if !errors.As(err, &usage) && !strings.Contains(fmt.Sprint(err), "required flag") {
					t.Fatalf("error %v, want a usage error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got)
		})
	}
}
