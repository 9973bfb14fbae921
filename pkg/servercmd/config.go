package servercmd

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/viper"

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
		// RetryBase is the first backoff between attempts of a step.
		RetryBase time.Duration `mapstructure:"retry_base"`
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

	// trial is set when no configuration file was given (SPEC §8.1).
	trial bool
}

// loadConfig reads the configuration file (if any), MANENT_* environment
// variables and flags, in increasing precedence.
func loadConfig(path string, flags map[string]string) (*Config, error) {
	v := viper.New()
	v.SetDefault("listen", "127.0.0.1:8080")
	v.SetDefault("data_dir", "./manent-data")
	v.SetDefault("executor_id", "worker-1")
	v.SetDefault("workers.slots", 4)
	v.SetDefault("workers.retry_base", "1s")
	v.SetDefault("workers.queue_poll", "100ms")
	v.SetDefault("workers.max_recovery_attempts", 10)
	v.SetDefault("workers.scheduler_poll", "10s")
	v.SetDefault("artifacts.max_bytes", int64(1<<30))
	v.SetDefault("limits.submissions_per_minute", 120)
	v.SetDefault("log_level", "info")
	v.SetEnvPrefix("MANENT")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	trial := true
	if path != "" {
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read config %s: %w", path, err)
		}
		trial = false
	}
	for k, val := range flags {
		if val != "" {
			v.Set(k, val)
		}
	}
	var c Config
	if err := v.Unmarshal(&c); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	c.trial = trial
	if c.Database == "" {
		c.Database = "sqlite:" + filepath.Join(c.DataDir, "manent.db")
	}
	if c.Workers.Slots < 1 {
		return nil, fmt.Errorf("config: workers.slots must be at least 1")
	}
	return &c, nil
}

// bootstrapToken returns the admin token of local trial mode:
// MANENT_BOOTSTRAP_TOKEN, else the one in <data-dir>/admin.token, else a new
// one written there (mode 0600). printed says whether it is new.
func bootstrapToken(dataDir string) (token string, created bool, err error) {
	if t := os.Getenv("MANENT_BOOTSTRAP_TOKEN"); t != "" {
		return t, false, nil
	}
	p := filepath.Join(dataDir, "admin.token")
	if b, err := os.ReadFile(p); err == nil {
		if t := strings.TrimSpace(string(b)); t != "" {
			return t, false, nil
		}
	}
	var raw [24]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", false, err
	}
	token = "mnt_" + hex.EncodeToString(raw[:])
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return "", false, err
	}
	if err := os.WriteFile(p, []byte(token+"\n"), 0o600); err != nil {
		return "", false, fmt.Errorf("write %s: %w", p, err)
	}
	return token, true, nil
}
