package node

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/auth"
	"github.com/manent-io/manent/pkg/envconfig"
)

// Config is manent-server.yaml (SPEC §8). Keys of §8.1 keep their meaning
// in every version.
type Config struct {
	Listen     string `mapstructure:"listen"`
	DataDir    string `mapstructure:"data_dir"`
	Database   string `mapstructure:"database"`
	ExecutorID string `mapstructure:"executor_id"`
	Workers    struct {
		Slots int `mapstructure:"slots"`
		// RetryBase is the first backoff between attempts of a step;
		// RetryMax the longest.
		RetryBase time.Duration `mapstructure:"retry_base"`
		RetryMax  time.Duration `mapstructure:"retry_max"`
		// QueuePoll is how often the deploy queue is polled.
		QueuePoll time.Duration `mapstructure:"queue_poll"`
		// MaxRecoveryAttempts bounds how often a crashed deploy is resumed
		// before it ends MAX_RECOVERY_ATTEMPTS_EXCEEDED.
		MaxRecoveryAttempts int `mapstructure:"max_recovery_attempts"`
		// SchedulerPoll is how often recurring schedules are reconciled.
		SchedulerPoll time.Duration `mapstructure:"scheduler_poll"`
		// Heartbeat is how often this worker records that it is alive;
		// DeadAfter how long a silent worker stays alive for the others
		// before one of them takes its deploys over (SPEC §11.3).
		Heartbeat time.Duration `mapstructure:"heartbeat"`
		DeadAfter time.Duration `mapstructure:"dead_after"`
		// ForgetAfter is how long a worker taken over stays in the
		// workers list before the leader forgets it (0: a week).
		ForgetAfter time.Duration `mapstructure:"forget_after"`
	} `mapstructure:"workers"`
	Pipeline struct {
		Steps []string `mapstructure:"steps"`
	} `mapstructure:"pipeline"`
	Artifacts struct {
		Sources  []string `mapstructure:"sources"`
		MaxBytes int64    `mapstructure:"max_bytes"`
		// IdleTimeout fails a download that receives nothing for this
		// long, Timeout one that is not complete after it (0: the
		// defaults of pkg/artifact, 1m and 30m).
		IdleTimeout time.Duration `mapstructure:"idle_timeout"`
		Timeout     time.Duration `mapstructure:"timeout"`
	} `mapstructure:"artifacts"`
	Auth struct {
		Tokens []auth.TokenConfig `mapstructure:"tokens"`
		OIDC   *auth.OIDCConfig   `mapstructure:"oidc"`
	} `mapstructure:"auth"`
	RBAC      []auth.RBACRule `mapstructure:"rbac"`
	Callbacks struct {
		Allow     []string `mapstructure:"allow"`
		SecretEnv string   `mapstructure:"secret_env"`
	} `mapstructure:"callbacks"`
	// Chat maps chat channels to Slack-compatible incoming-webhook URLs.
	Chat    map[string]string `mapstructure:"chat"`
	Plugins struct {
		// Path lists the directories searched for manent-plugin-<name>.
		Path []string `mapstructure:"path"`
		// HTTPAllow lists the URL patterns the http plugin may call.
		HTTPAllow []string `mapstructure:"http_allow"`
		// PassEnv names the server's environment variables that the
		// commands of script and external plugins also get (SPEC §11.1).
		PassEnv []string `mapstructure:"pass_env"`
		// ValidateTimeout bounds an external plugin's validate action,
		// run while a submission waits (default
		// external.ValidateTimeout, at most MaxValidateTimeout).
		ValidateTimeout time.Duration `mapstructure:"validate_timeout"`
		// Steps lists the plugins custom steps may use (SPEC §11.1; none
		// by default). Local trial mode allows every plugin.
		Steps []string `mapstructure:"steps"`
		Local struct {
			// Root is the directory the local target may write under
			// (default, and always in local trial mode: <data_dir>/targets).
			Root string `mapstructure:"root"`
			// MaxZipEntries bounds a zip artifact's entries (default
			// local.DefaultMaxZipEntries): archive/zip holds a zip's whole
			// directory in memory while the release is unpacked.
			MaxZipEntries int `mapstructure:"max_zip_entries"`
		} `mapstructure:"local"`
		Kubernetes struct {
			// Kubeconfigs lists the kubeconfig files a kubernetes target
			// may name in with.kubeconfig (none by default; any in local
			// trial mode): each a path (any environment) or a mapping
			// {path, environments} keeping the file to the environments
			// named (ParseKubeconfigs).
			Kubeconfigs []any `mapstructure:"kubeconfigs"`
		} `mapstructure:"kubernetes"`
	} `mapstructure:"plugins"`
	// Secrets is the policy of the descriptors' secrets: FilesUnder lists
	// the directories a file: secret must be under (none: anywhere); Env
	// the variables an env: secret may name, exact or PREFIX_* (unset:
	// those of plugins.pass_env; any in local trial mode). The server's
	// own variables (MANENT_*, callbacks.secret_env, itsm.token_env) are
	// refused as env: secrets whatever it says.
	Secrets struct {
		FilesUnder []string `mapstructure:"files_under"`
		Env        []string `mapstructure:"env"`
	} `mapstructure:"secrets"`
	// Health is the policy of the descriptors' health checks (SPEC §11.1):
	// Allow has the syntax of callbacks.allow; empty means every http and
	// https URL on a public address (any address in local trial mode).
	Health struct {
		Allow []string `mapstructure:"allow"`
	} `mapstructure:"health"`
	// TrustedProxies are the reverse proxies (CIDR ranges or addresses)
	// whose X-Forwarded-For names the client of the per-address limits.
	TrustedProxies []string `mapstructure:"trusted_proxies"`
	Limits         struct {
		SubmissionsPerMinute int `mapstructure:"submissions_per_minute"`
		// StreamsPerIdentity and Streams bound the event streams open at
		// once, per identity and in all (0: the server's defaults).
		StreamsPerIdentity int `mapstructure:"streams_per_identity"`
		Streams            int `mapstructure:"streams"`
		// RefusalsPerMinute bounds each identity's audited refusals of
		// approve, reject, cancel and agent reports (0: the server's
		// default).
		RefusalsPerMinute int `mapstructure:"refusals_per_minute"`
		// SignInsPerMinute bounds each client address's refused sign-ins
		// of the web UI's token form (0: the UI's default).
		SignInsPerMinute int `mapstructure:"sign_ins_per_minute"`
		// BearerFailuresPerMinute bounds each client address's refused
		// bearer tokens on the API (0: the server's default).
		BearerFailuresPerMinute int `mapstructure:"bearer_failures_per_minute"`
		// Connections bounds the connections the server holds open at
		// once (pkg/servercmd).
		Connections int `mapstructure:"connections"`
	} `mapstructure:"limits"`
	Schedules struct {
		// MinInterval is the shortest time between two ticks of a
		// recurring schedule: one that fires more often is refused (0: 1m).
		MinInterval time.Duration `mapstructure:"min_interval"`
		// MaxPerEnvironment is the most recurring schedules one
		// application/environment may have (0: 25).
		MaxPerEnvironment int `mapstructure:"max_per_environment"`
	} `mapstructure:"schedules"`
	ITSM struct {
		URL      string        `mapstructure:"url"`
		TokenEnv string        `mapstructure:"token_env"`
		Poll     time.Duration `mapstructure:"poll"`
		// GiveUpAfter is how long an ITSM may fail to answer the polls of
		// a waiting deploy before it ends ERROR, and how long a failed
		// close is tried again (0: 24h).
		GiveUpAfter time.Duration `mapstructure:"give_up_after"`
	} `mapstructure:"itsm"`
	Governance struct {
		Rules string `mapstructure:"rules"`
		Rego  string `mapstructure:"rego"`
	} `mapstructure:"governance"`
	Environments     envconfig.Settings `mapstructure:"environments"`
	DescriptorPolicy *envconfig.Policy  `mapstructure:"descriptor_policy"`
	LogLevel         string             `mapstructure:"log_level"`
	// ShutdownDelay is how long a server told to stop (SIGTERM) goes on
	// serving while /readyz answers 503 "shutting down", so that load
	// balancers stop sending it requests before it refuses them (0: stop
	// at once).
	ShutdownDelay time.Duration `mapstructure:"shutdown_delay"`
	// Retention bounds the history kept (docs/operations.md): the DBOS
	// rows of final deploys after Workflows (default 168h), manent's log
	// lines after Logs and whole deploys after Deploys (default: keep).
	Retention struct {
		Workflows time.Duration `mapstructure:"workflows"`
		Logs      time.Duration `mapstructure:"logs"`
		Deploys   time.Duration `mapstructure:"deploys"`
		Every     time.Duration `mapstructure:"every"`
	} `mapstructure:"retention"`

	// Web configures the web UI (docs/web.md).
	Web struct {
		// PathPrefix is the path a reverse proxy mounts the UI under and
		// strips before it passes requests on ("/manent"; "": the root of
		// the host): the UI writes its links, redirects and cookies under
		// it (web.Config.PathPrefix).
		PathPrefix string `mapstructure:"path_prefix"`
	} `mapstructure:"web"`

	// Trial is set when no configuration file was given (SPEC §8.1): local
	// trial mode.
	Trial bool `mapstructure:"-"`
}

// Kubeconfig is one entry of plugins.kubernetes.kubeconfigs.
type Kubeconfig struct {
	Path string
	// Environments are the environment names or path.Match patterns that
	// may name the file; none: every environment.
	Environments []string
}

// KubeconfigProblem is what is wrong with entry Index of
// plugins.kubernetes.kubeconfigs.
type KubeconfigProblem struct {
	Index   int
	Message string
}

// ParseKubeconfigs reads plugins.kubernetes.kubeconfigs: each entry a path,
// or a mapping {path, environments} whose environments are names or
// path.Match patterns ("prod-*"). Entries with problems are left out.
func (c *Config) ParseKubeconfigs() ([]Kubeconfig, []KubeconfigProblem) {
	var out []Kubeconfig
	var problems []KubeconfigProblem
	bad := func(i int, format string, args ...any) {
		problems = append(problems, KubeconfigProblem{Index: i, Message: fmt.Sprintf(format, args...)})
	}
	for i, e := range c.Plugins.Kubernetes.Kubeconfigs {
		switch v := e.(type) {
		case string:
			if strings.TrimSpace(v) == "" {
				bad(i, "must not be empty: the path of a kubeconfig file")
				continue
			}
			out = append(out, Kubeconfig{Path: v})
		case map[string]any:
			k, ok := kubeconfigEntry(v, func(format string, args ...any) { bad(i, format, args...) })
			if ok {
				out = append(out, k)
			}
		default:
			bad(i, "must be a path or a mapping {path: /etc/manent/kube/prod.yaml, environments: [prod]}")
		}
	}
	return out, problems
}

func kubeconfigEntry(m map[string]any, bad func(format string, args ...any)) (Kubeconfig, bool) {
	var k Kubeconfig
	ok := true
	for key, v := range m {
		switch strings.ToLower(key) {
		case "path":
			p, isText := v.(string)
			if !isText || strings.TrimSpace(p) == "" {
				bad("path must be the path of a kubeconfig file")
				ok = false
			}
			k.Path = p
		case "environments":
			list, isList := v.([]any)
			if !isList || len(list) == 0 {
				bad("environments must list the environments (names or patterns such as prod-*) that may use the file; leave it out for every environment")
				ok = false
				continue
			}
			for _, item := range list {
				env, isText := item.(string)
				if _, err := path.Match(env, ""); !isText || env == "" || err != nil {
					bad("environments: %v is not an environment name or pattern (e.g. prod, prod-*)", item)
					ok = false
					continue
				}
				k.Environments = append(k.Environments, env)
			}
		default:
			bad("unknown key %q (known: path, environments)", key)
			ok = false
		}
	}
	if k.Path == "" && ok {
		bad("path must be the path of a kubeconfig file")
		ok = false
	}
	return k, ok
}

// Kubeconfigs is the kubernetes target's allowed kubeconfig files
// (SPEC §11.1): plugins.kubernetes.kubeconfigs, none when unset, nil (any)
// in local trial mode.
func (c *Config) Kubeconfigs() []Kubeconfig {
	if c.Trial {
		return nil
	}
	ks, _ := c.ParseKubeconfigs()
	if ks == nil {
		ks = []Kubeconfig{}
	}
	return ks
}

// LocalRoot is the absolute directory the local target writes under
// (SPEC §11.1): plugins.local.root, or <data_dir>/targets by default and
// always in local trial mode.
func (c *Config) LocalRoot() (string, error) {
	root := c.Plugins.Local.Root
	if c.Trial || root == "" {
		root = filepath.Join(c.DataDir, "targets")
	}
	return filepath.Abs(root)
}
