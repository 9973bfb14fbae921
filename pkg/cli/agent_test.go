package cli

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

// TestAgentAndClustersOptions: what `manent agent` and `manent clusters
// status` command lines parse into, and which are refused as usage errors
// before anything runs.
func TestAgentAndClustersOptions(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		check    func(t *testing.T, got any)
		usageErr bool
	}{
		{
			name: "agent defaults",
			args: []string{"agent", "--cluster", "prod-eu-1"},
			check: func(t *testing.T, got any) {
				o := got.(*AgentOptions)
				if o.Cluster != "prod-eu-1" || o.Interval != 5*time.Second || o.Namespace != "" || o.Kubeconfig != "" ||
					o.LogFormat != "json" || o.LogLevel != "info" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "agent every flag",
			args: []string{"agent", "--cluster", "c1", "--interval", "10s", "--namespace", "shop", "--kubeconfig", "/k",
				"--log-format", "text", "--log-level", "debug"},
			check: func(t *testing.T, got any) {
				o := got.(*AgentOptions)
				if o.Interval != 10*time.Second || o.Namespace != "shop" || o.Kubeconfig != "/k" || o.LogFormat != "text" || o.LogLevel != "debug" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{
			name: "agent cluster from the environment",
			args: []string{"agent"},
			env:  map[string]string{"MANENT_CLUSTER": "staging"},
			check: func(t *testing.T, got any) {
				if o := got.(*AgentOptions); o.Cluster != "staging" {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "agent without cluster", args: []string{"agent"}, usageErr: true},
		{name: "agent bad cluster", args: []string{"agent", "--cluster", "Prod EU"}, usageErr: true},
		{name: "agent interval too short", args: []string{"agent", "--cluster", "c1", "--interval", "100ms"}, usageErr: true},
		{name: "agent bad log format", args: []string{"agent", "--cluster", "c1", "--log-format", "xml"}, usageErr: true},
		{name: "agent bad log level", args: []string{"agent", "--cluster", "c1", "--log-level", "loud"}, usageErr: true},
		{name: "agent argument", args: []string{"agent", "--cluster", "c1", "extra"}, usageErr: true},
		{
			name: "clusters status -o json",
			args: []string{"clusters", "status", "prod-eu-1", "-o", "json"},
			check: func(t *testing.T, got any) {
				o := got.(*ClustersStatusOptions)
				if o.Cluster != "prod-eu-1" || o.Exporter.Format() != FormatJSON {
					t.Errorf("got %+v", o)
				}
			},
		},
		{name: "clusters status without a cluster", args: []string{"clusters", "status"}, usageErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got any
			f := NewFactory(Invocation{Getenv: func(k string) string { return tt.env[k] }})
			root := &cobra.Command{Use: "manent", SilenceErrors: true, SilenceUsage: true}
			root.SetOut(io.Discard)
			root.PersistentFlags().AddFlagSet(f.GlobalFlags())
			root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &UsageError{Err: err} })
			root.AddCommand(
				NewCmdAgent(f, func(o *AgentOptions) error { got = o; return nil }),
				NewCmdClusters(f, func(o *ClustersStatusOptions) error { got = o; return nil }),
			)
			root.SetArgs(tt.args)
			err := root.Execute()
			if tt.usageErr {
				if got != nil {
					t.Fatalf("the command ran with %+v", got)
				}
				var usage *UsageError
				if !errors.As(err, &usage) {
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
