package servercmd

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/manent-io/manent/pkg/node"
	"github.com/manent-io/manent/pkg/server"
	"github.com/manent-io/manent/pkg/web"
	"github.com/manent-io/manent/plugins/external"
	"github.com/manent-io/manent/plugins/local"
	"github.com/spf13/viper"
	"gopkg.in/yaml.v3"
)

// envName is the MANENT_* variable of a key ("workers.slots":
// MANENT_WORKERS_SLOTS).
func envName(key string) string {
	return "MANENT_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// loadConfig reads the configuration file (if any), MANENT_* environment
// variables and flags, in increasing precedence.
func loadConfig(path string, flags map[string]string) (*node.Config, error) {
	c, _, err := loadConfigFrom(path, flags, nil)
	return c, err
}

// setupCheck asks loadConfigFrom to check also what the server builds from
// other files and its plugins (checkSetup), as serve does: an admin task
// reading the audit log is not refused for a governance file.
type setupCheck struct {
	plugins node.Registrar // the built-in plugins, as serve is given them
	// built is what the check built, for node.Open to use
	// (node.Options.Setup): each file read once, what was checked runs.
	built *node.Setup
}

// loadConfigFrom is loadConfig, and what set a key: from(key) is its flag
// ("--listen"), its variable ("MANENT_LISTEN"), its place in the file
// ("listen at /etc/manent/manent-server.yaml:1:9"), or "" for its default.
//
// With setup, the configuration is also checked as node.Open would build
// it (checkSetup), every mistake placed with the others.
func loadConfigFrom(path string, flags map[string]string, setup *setupCheck) (*node.Config, func(key string) string, error) {
	v := viper.New()
	v.SetDefault("listen", "127.0.0.1:8080")
	v.SetDefault("data_dir", "./manent-data")
	v.SetDefault("executor_id", "worker-1")
	v.SetDefault("workers.slots", 4)
	v.SetDefault("workers.retry_base", "1s")
	v.SetDefault("workers.retry_max", "1m")
	v.SetDefault("workers.queue_poll", "100ms")
	v.SetDefault("workers.max_recovery_attempts", 10)
	v.SetDefault("workers.scheduler_poll", "10s")
	v.SetDefault("workers.heartbeat", "5s")
	v.SetDefault("workers.dead_after", "30s")
	v.SetDefault("workers.forget_after", "168h")
	v.SetDefault("artifacts.max_bytes", int64(1<<30))
	v.SetDefault("plugins.local.max_zip_entries", local.DefaultMaxZipEntries)
	v.SetDefault("plugins.validate_timeout", external.ValidateTimeout.String())
	v.SetDefault("limits.submissions_per_minute", 120)
	v.SetDefault("limits.streams_per_identity", server.DefaultStreamsPerIdentity)
	v.SetDefault("limits.streams", server.DefaultStreams)
	v.SetDefault("limits.refusals_per_minute", server.DefaultRefusalsPerMinute)
	v.SetDefault("limits.sign_ins_per_minute", web.DefaultSignInsPerMinute)
	v.SetDefault("limits.bearer_failures_per_minute", server.DefaultBearerFailuresPerMinute)
	v.SetDefault("limits.connections", DefaultConnections)
	v.SetDefault("schedules.min_interval", "1m")
	v.SetDefault("log_level", "info")
	v.SetDefault("shutdown_delay", "0s")
	v.SetDefault("web.path_prefix", "") // read from MANENT_WEB_PATH_PREFIX too
	v.SetDefault("retention.workflows", "168h")
	v.SetDefault("retention.every", "10m")
	v.SetEnvPrefix("MANENT")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	// Keys without a default are read from the environment only when bound:
	// MANENT_DATABASE keeps a DSN with its password out of the process list.
	if err := v.BindEnv("database"); err != nil {
		return nil, nil, err
	}
	trial := true
	problems := &configProblems{file: path}
	var at map[string]*yaml.Node
	if path != "" {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("read config: %w", err)
		}
		// Checked first, for what viper's decoding says without a place
		// (or not at all): unknown keys, values of the wrong kind.
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			at = checkConfigYAML(path, data, problems)
		}
		if at == nil && problems.err() != nil {
			return nil, nil, problems // not YAML
		}
		v.SetConfigFile(path)
		if err := v.ReadInConfig(); err != nil {
			return nil, nil, fmt.Errorf("read config %s: %w", path, err)
		}
		trial = false
	}
	for k, val := range flags {
		if val != "" {
			v.Set(k, val)
		}
	}
	checkConfigEnv(v.AllKeys(), func(key string) error { return v.BindEnv(key) }, v.Set, problems)
	var c node.Config
	// Exact: a key manent does not know (a typo such as "rback:" or
	// "pass_evn:") is an error, not a setting silently left out. The file
	// was checked above; what fails here came from MANENT_* variables.
	// With problems in the file, the values that decode are checked
	// too, so that every mistake is reported at once.
	if err := v.UnmarshalExact(&c); err != nil && problems.err() == nil {
		return nil, nil, fmt.Errorf("config: %s", decodeErrorText(err))
	}
	c.Trial = trial
	// Each value is placed where it came from: a flag, a MANENT_*
	// variable, the file (file:line:column), or a default.
	src := func(key string) (*yaml.Node, string) {
		if flags[key] != "" {
			return nil, "--" + strings.ReplaceAll(key, "_", "-")
		}
		if env := envName(key); os.Getenv(env) != "" {
			return nil, env
		}
		return at[key], key
	}
	checkValues(&c, src, problems)
	if err := resolvePaths(&c, v, path, flags); err != nil {
		if problems.err() != nil {
			return nil, nil, problems
		}
		return nil, nil, fmt.Errorf("config: %w", err)
	}
	if setup != nil {
		setup.built = checkSetup(&c, setup.plugins, src, problems)
	}
	if err := problems.err(); err != nil {
		return nil, nil, err
	}
	from := func(key string) string {
		n, name := src(key)
		switch {
		case n != nil && n.Line > 0:
			return fmt.Sprintf("%s at %s:%d:%d", name, path, n.Line, n.Column)
		case n == nil && name == key:
			return "" // its default
		}
		return name
	}
	return &c, from, nil
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

// decodeErrorText makes mapstructure's multi-line decoding error one line
// that names keys as the file does: "unknown keys: rback; 'plugins' has
// unknown keys: pass_evn".
func decodeErrorText(err error) string {
	msg := strings.Replace(err.Error(), "decoding failed due to the following error(s):", "", 1)
	msg = strings.ReplaceAll(msg, "'node.Config' has invalid keys", "unknown keys")
	msg = strings.ReplaceAll(msg, "has invalid keys", "has unknown keys")
	var parts []string
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			parts = append(parts, line)
		}
	}
	return strings.Join(parts, "; ")
}

// DefaultConnections is limits.connections' default: the default of
// limits.streams and room for the rest.
const DefaultConnections = server.DefaultStreams + 1000
