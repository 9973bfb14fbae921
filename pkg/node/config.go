package node

import (
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
	} `mapstructure:"workers"`
	Pipeline struct {
		Steps []string `mapstructure:"steps"`
	} `mapstructure:"pipeline"`
	Artifacts struct {
		Sources  []string `mapstructure:"sources"`
		MaxBytes int64    `mapstructure:"max_bytes"`
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
	} `mapstructure:"plugins"`
	// Health is the policy of the descriptors' health checks (SPEC §11.1):
	// Allow has the syntax of callbacks.allow; empty means every http and
	// https URL on a public address (any address in local trial mode).
	Health struct {
		Allow []string `mapstructure:"allow"`
	} `mapstructure:"health"`
	Limits struct {
		SubmissionsPerMinute int `mapstructure:"submissions_per_minute"`
	} `mapstructure:"limits"`
	ITSM struct {
		URL      string        `mapstructure:"url"`
		TokenEnv string        `mapstructure:"token_env"`
		Poll     time.Duration `mapstructure:"poll"`
	} `mapstructure:"itsm"`
	Governance struct {
		Rules string `mapstructure:"rules"`
		Rego  string `mapstructure:"rego"`
	} `mapstructure:"governance"`
	Environments     envconfig.Settings `mapstructure:"environments"`
	DescriptorPolicy *envconfig.Policy  `mapstructure:"descriptor_policy"`
	LogLevel         string             `mapstructure:"log_level"`

	// Trial is set when no configuration file was given (SPEC §8.1): local
	// trial mode.
	Trial bool `mapstructure:"-"`
}
