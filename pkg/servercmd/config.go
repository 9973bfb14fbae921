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
	"github.com/spf13/viper"
)

// loadConfig reads the configuration file (if any), MANENT_* environment
// variables and flags, in increasing precedence.
func loadConfig(path string, flags map[string]string) (*node.Config, error) {
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
	v.SetDefault("artifacts.max_bytes", int64(1<<30))
	v.SetDefault("limits.submissions_per_minute", 120)
	v.SetDefault("limits.streams_per_identity", server.DefaultStreamsPerIdentity)
	v.SetDefault("limits.streams", server.DefaultStreams)
	v.SetDefault("limits.connections", DefaultConnections)
	v.SetDefault("schedules.min_interval", "1m")
	v.SetDefault("log_level", "info")
	v.SetDefault("retention.workflows", "168h")
	v.SetDefault("retention.every", "10m")
	v.SetEnvPrefix("MANENT")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	v.AutomaticEnv()
	// Keys without a default are read from the environment only when bound:
	// MANENT_DATABASE keeps a DSN with its password out of the process list.
	if err := v.BindEnv("database"); err != nil {
		return nil, err
	}
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
	var c node.Config
	// Exact: a key manent does not know (a typo such as "rback:" or
	// "pass_evn:") is an error, not a setting silently left out.
	if err := v.UnmarshalExact(&c); err != nil {
		return nil, fmt.Errorf("config: %s", decodeErrorText(err))
	}
	c.Trial = trial
	if err := resolvePaths(&c, v, path, flags); err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	if c.Workers.Slots < 1 {
		return nil, fmt.Errorf("config: workers.slots must be at least 1")
	}
	if c.Limits.Connections < 1 {
		return nil, fmt.Errorf("config: limits.connections must be at least 1 (default %d)", DefaultConnections)
	}
	if c.Limits.StreamsPerIdentity < 1 || c.Limits.Streams < 1 {
		return nil, fmt.Errorf("config: limits.streams_per_identity and limits.streams must be at least 1 (defaults %d and %d)",
			server.DefaultStreamsPerIdentity, server.DefaultStreams)
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
