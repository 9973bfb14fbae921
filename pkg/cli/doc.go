// Package cli is the manent command line: the root command and one file per
// verb (Options struct, NewCmdX(f, runF) constructor, xRun function), the
// Factory that hands commands their lazily built dependencies, the IOStreams
// every command writes through, the one -o json|yaml Exporter (which also
// applies --jq, through github.com/itchyny/gojq), and the one
// mapping from errors to exit codes (exitcode.go). Everything the server
// says is printed through one sanitiser (sanitize.go) and IOStreams guards
// stdout and stderr, so no control character from the server reaches the
// terminal (only `logs --raw` writes log text untouched).
//
// Main runs the CLI for the real process; Run runs it for an Invocation, so
// tests drive it in-process with their own arguments, streams and
// environment.
//
// The config file, its named contexts and `manent login` are in config.go,
// contextfile.go, context.go and login.go; trial.go finds the admin token
// a local trial server recorded (pkg/servercmd writes that record).
//
// `manent agent` and `manent policy test` are defined here (flags, checks,
// help) but run in the sibling binaries manent-agent and manent-policy
// (sibling.go; pkg/agentcmd, pkg/policycmd), so that manent links neither
// client-go nor OPA.
//
// It imports pkg/manent, pkg/api, descriptor, pkg/version, pkg/retry and
// pkg/stall (the event stream's reconnection and silence), pkg/clusterstate,
// pkg/reltime (the tables' relative times, shared with the web UI),
// pkg/suggest (a mistyped subcommand's "did you mean") and pkg/atomicfile
// (the config file) of this module.
package cli
