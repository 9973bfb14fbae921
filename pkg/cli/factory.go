package cli

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/manent-io/manent/pkg/api"
)

// DefaultPollInterval is how often commands that follow a deploy poll the
// server.
const DefaultPollInterval = 500 * time.Millisecond

// Factory hands every command its dependencies. Each is built lazily, on the
// first call, so commands that never talk to the server (validate --offline,
// schema, version, completion) never read the config or build a client.
type Factory struct {
	// IOStreams is where commands read and write.
	IOStreams *IOStreams
	// Config resolves the configuration from the global flags, the
	// environment and the config file (see loadConfig); cached.
	Config func() (*Config, error)
	// Client returns the API client for the configured server; cached.
	Client func() (*api.Client, error)
	// Exporter returns the -o json|yaml exporter, nil for table output.
	Exporter func() *Exporter
	// Now returns the current time (durations of running deploys).
	Now func() time.Time
	// PollInterval is how often deploys and logs are polled when followed.
	PollInterval time.Duration
	// FollowGrace is how long a command following a deploy asks again a
	// server that stopped answering before it exits 4, unless
	// --follow-grace, MANENT_FOLLOW_GRACE or follow_grace: says otherwise
	// (see followGrace).
	FollowGrace time.Duration
	// StreamHTTP returns the HTTP client for event streams: the
	// invocation's transport with no overall timeout (a stream lasts as
	// long as the deploy).
	StreamHTTP func() *http.Client
	// WorkDir resolves relative paths given on the command line.
	WorkDir string
	// Getenv reads the environment of this invocation.
	Getenv func(string) string
	// ClientFor returns a client for a server and token that are not (yet)
	// the configured ones (`manent login` checks a token with it).
	ClientFor func(server, token string, timeout time.Duration) *api.Client
	// Environ lists the environment of this invocation for a sibling
	// binary (see sibling.go); nil passes the variables manent reads.
	Environ func() []string

	flags  *pflag.FlagSet
	format Format
	jq     jqFlag
}

// NewFactory builds the factory for one invocation. The global flags it
// defines are added to the root command by NewCmdRoot; Config reads them
// after cobra has parsed the command line.
func NewFactory(inv Invocation) *Factory {
	inv = inv.withDefaults()
	f := &Factory{
		IOStreams:    NewIOStreams(inv.Stdin, inv.Stdout, inv.Stderr, inv.Getenv),
		Now:          inv.Now,
		PollInterval: inv.PollInterval,
		FollowGrace:  inv.FollowGrace,
		WorkDir:      inv.Dir,
		Getenv:       inv.Getenv,
		Environ:      inv.Environ,
		format:       FormatTable,
	}

	fs := pflag.NewFlagSet("global", pflag.ContinueOnError)
	fs.String("server", "", "manent-server base URL, http(s)://host[:port][/prefix], without "+APIPath+", a query, a fragment or a user:password (env MANENT_SERVER; default "+DefaultServer+")")
	fs.String("token", "", "bearer token (env MANENT_TOKEN)")
	fs.String("config", "", "CLI config file (env MANENT_CONFIG; default $XDG_CONFIG_HOME/manent/config.yaml)")
	fs.String("context", "", "named context of the config file to use (env MANENT_CONTEXT; see 'manent context')")
	f.jq.format = &f.format
	fs.VarP(formatValue{f: &f.format, jq: &f.jq}, "output", "o", "output format: table, json or yaml")
	fs.Var(&f.jq, "jq", "filter the JSON output with a jq expression (implies -o json); strings print raw")
	fs.Duration("request-timeout", DefaultRequestTimeout, "bound on each HTTP request to the server, 0 for none (env MANENT_REQUEST_TIMEOUT)")
	fs.Duration("follow-grace", DefaultFollowGrace, "how long deploy --wait, rollback --wait, wait, logs -f and activity --watch ask again a server that stopped answering (a restart, a failover) before exit 4; at least 1s (env MANENT_FOLLOW_GRACE)")
	f.flags = fs

	f.Config = sync.OnceValues(func() (*Config, error) {
		cfg, err := loadConfig(configSource{flags: f.flags, getenv: f.Getenv, dir: f.WorkDir})
		if cfg != nil {
			for _, w := range cfg.Warnings {
				fmt.Fprintf(f.IOStreams.ErrOut, "warning: %s\n", w)
			}
		}
		return cfg, err
	})
	f.ClientFor = func(server, token string, timeout time.Duration) *api.Client {
		return api.NewClientWith(server, token, inv.HTTPClient, clientOptions(&Config{RequestTimeout: timeout}))
	}
	f.Client = sync.OnceValues(func() (*api.Client, error) {
		cfg, err := f.Config()
		if err != nil {
			return nil, err
		}
		return api.NewClientWith(cfg.Server, cfg.Token, inv.HTTPClient, clientOptions(cfg)), nil
	})
	f.Exporter = func() *Exporter {
		if f.jq.code != nil {
			return newJQExporter(f.jq.code)
		}
		return NewExporter(f.format)
	}
	f.StreamHTTP = func() *http.Client {
		// A stream lasts as long as the deploy, but its first answer is
		// bounded by the request timeout like any other request, and a
		// stream silent for longer than StreamIdle (the server sends a
		// heartbeat every 15 s) is dropped and resumed.
		var base http.RoundTripper
		if inv.HTTPClient != nil && inv.HTTPClient.Transport != nil {
			base = inv.HTTPClient.Transport
		} else {
			tr := http.DefaultTransport.(*http.Transport).Clone()
			if cfg, err := f.Config(); err == nil && cfg.RequestTimeout > 0 {
				tr.ResponseHeaderTimeout = cfg.RequestTimeout
			}
			base = tr
		}
		return &http.Client{Transport: &idleTransport{base: base, idle: inv.StreamIdle}}
	}
	return f
}

// clientOptions are the API client's request settings for cfg.
func clientOptions(cfg *Config) api.Options {
	o := api.Options{RequestTimeout: cfg.RequestTimeout}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = -1 // --request-timeout 0: no bound
	}
	return o
}

// followGrace is the follow grace of this invocation: --follow-grace,
// MANENT_FOLLOW_GRACE or follow_grace: when set, else FollowGrace. A
// configuration that cannot be read gives FollowGrace: the command's first
// request reports that error.
func (f *Factory) followGrace() time.Duration {
	if cfg, err := f.Config(); err == nil && cfg.FollowGrace > 0 {
		return cfg.FollowGrace
	}
	return f.FollowGrace
}

// GlobalFlags returns the flags every command takes: --server, --token,
// --config, --context, -o/--output, --jq, --request-timeout and
// --follow-grace.
func (f *Factory) GlobalFlags() *pflag.FlagSet { return f.flags }

// MaxInput bounds a file read by ReadInput: far above what any input is
// (a descriptor is at most 1 MiB), so that `-f /dev/zero` or an endless
// pipe is refused instead of read until the CLI runs out of memory.
const MaxInput = 16 << 20

// ReadInput reads a file named on the command line ("-" is stdin) and returns
// its content and the name to show in messages. Any failure is a usage error.
func (f *Factory) ReadInput(name string) ([]byte, string, error) {
	if name == "" {
		return nil, "", usageErrorf("no file given")
	}
	var (
		data []byte
		err  error
	)
	if name == "-" {
		data, err = io.ReadAll(io.LimitReader(f.IOStreams.In, MaxInput+1))
		name = "<stdin>"
	} else {
		var fh *os.File
		if fh, err = os.Open(absPath(f.WorkDir, name)); err == nil {
			data, err = io.ReadAll(io.LimitReader(fh, MaxInput+1))
			fh.Close()
		}
	}
	if err != nil {
		return nil, name, &UsageError{Err: fmt.Errorf("read %s: %w", name, unwrapPathError(err))}
	}
	if len(data) > MaxInput {
		return nil, name, &UsageError{Err: fmt.Errorf("read %s: larger than %d MiB, not an input of manent", name, MaxInput>>20)}
	}
	return data, name, nil
}

// unwrapPathError drops the absolute path that *fs.PathError adds, since the
// caller names the file as the user typed it.
func unwrapPathError(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// Invocation is everything one run of the CLI takes from its process. Main
// fills it from the real process; tests fill it to run the CLI in-process.
type Invocation struct {
	// Args are the command-line arguments without the program name.
	Args []string
	// Stdin, Stdout and Stderr default to empty input and discarded output.
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Getenv reads the environment; nil means an empty environment.
	Getenv func(string) string
	// Environ lists the whole environment, passed to a sibling binary
	// (manent-agent, manent-policy); nil passes only the variables manent
	// and its siblings read, taken from Getenv.
	Environ func() []string
	// Dir is the working directory relative paths resolve against; "" means
	// the process's.
	Dir string
	// HTTPClient talks to the server; nil uses the api package's default.
	HTTPClient *http.Client
	// PollInterval overrides DefaultPollInterval when positive.
	PollInterval time.Duration
	// StreamIdle overrides DefaultStreamIdle when positive.
	StreamIdle time.Duration
	// FollowGrace overrides DefaultFollowGrace when positive.
	FollowGrace time.Duration
	// Now overrides time.Now.
	Now func() time.Time
}

func (inv Invocation) withDefaults() Invocation {
	if inv.Stdin == nil {
		inv.Stdin = strings.NewReader("")
	}
	if inv.Stdout == nil {
		inv.Stdout = io.Discard
	}
	if inv.Stderr == nil {
		inv.Stderr = io.Discard
	}
	if inv.Getenv == nil {
		inv.Getenv = func(string) string { return "" }
	}
	if inv.PollInterval <= 0 {
		inv.PollInterval = DefaultPollInterval
	}
	if inv.StreamIdle <= 0 {
		inv.StreamIdle = DefaultStreamIdle
	}
	if inv.FollowGrace <= 0 {
		inv.FollowGrace = DefaultFollowGrace
	}
	if inv.Now == nil {
		inv.Now = time.Now
	}
	return inv
}
