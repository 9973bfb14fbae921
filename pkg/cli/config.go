package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// DefaultServer is the server the CLI talks to when nothing else is
// configured: a local trial `manent-server serve` (SPEC §8.1).
const DefaultServer = "http://127.0.0.1:8080"

// Config is the CLI's resolved configuration.
type Config struct {
	// Server is the base URL of manent-server.
	Server string
	// Token is the bearer token, "" for none.
	Token string
	// File is the config file that was read, "" when none was.
	File string
	// TokenFile is the admin token file the token came from, "" when the
	// token came from a flag, the environment or the config file.
	TokenFile string
	// TokenSource says where Token came from (errors name it; never the
	// token itself).
	TokenSource TokenSource
	// RequestTimeout bounds each HTTP request (--request-timeout,
	// MANENT_REQUEST_TIMEOUT, request_timeout:); 0 means no bound.
	RequestTimeout time.Duration
	// FollowGrace is how long a command following a deploy asks again a
	// server that stopped answering before it exits 4 (--follow-grace,
	// MANENT_FOLLOW_GRACE, follow_grace:); 0 when none of them is set.
	FollowGrace time.Duration
	// Context is the named context in use (--context, MANENT_CONTEXT or
	// current_context:), "" for none.
	Context string
	// Warnings are printed on stderr once the configuration is read (a
	// token-bearing config file readable by others).
	Warnings []string
}

// DefaultRequestTimeout is the default of --request-timeout.
const DefaultRequestTimeout = 30 * time.Second

// configSource is what loadConfig reads: the parsed global flags, the
// environment and the working directory (relative paths resolve against it).
type configSource struct {
	flags  *pflag.FlagSet
	getenv func(string) string
	dir    string
}

// loadConfig resolves server and token with the precedence flag > env >
// file > default, using a viper instance of its own. The file is --config,
// else $MANENT_CONFIG, else $XDG_CONFIG_HOME/manent/config.yaml (falling back
// to ~/.config/manent/config.yaml); only a file named explicitly must exist.
//
// Environment values are merged over the file's before flags are bound, so
// viper applies the whole precedence and the environment is read through
// getenv, never os.Getenv (tests run the CLI in-process with their own).
//
// A named context (--context, else $MANENT_CONTEXT, else current_context:
// in the file) replaces the file's top-level server and token with its own;
// flags and the environment still beat it, key by key. See context.go.
//
// With no token and the default local server, the token comes from
// $MANENT_DATA_DIR/admin.token or ./manent-data/admin.token (SPEC §8.1);
// with no token and a loopback server, from the admin token file that
// server recorded when it started in local trial mode (see trial.go).
func loadConfig(src configSource) (*Config, error) {
	v := viper.New()
	v.SetConfigType("yaml")
	v.SetDefault("server", DefaultServer)
	v.SetDefault("request_timeout", DefaultRequestTimeout.String())

	cfg := &Config{}
	path, explicit := configPath(src)
	file := &cliFile{Path: path, Contexts: map[string]*contextEntry{}}
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
				return nil, usageErrorf("config file %s: %v", path, err)
			}
			cfg.File = path
			if err := file.parse(data); err != nil {
				return nil, err
			}
			file.Exists = true
			if st, err := os.Stat(path); err == nil {
				file.Mode = st.Mode().Perm()
			}
			if w := file.looseModeWarning(); w != "" {
				cfg.Warnings = append(cfg.Warnings, w)
			}
		case errors.Is(err, fs.ErrNotExist) && !explicit:
			// No config file: that is fine.
		default:
			return nil, usageErrorf("read config file: %v", err)
		}
	}

	if err := mergeContext(v, cfg, file, src); err != nil {
		return nil, err
	}

	env := map[string]any{}
	for key, name := range map[string]string{"server": "MANENT_SERVER", "token": "MANENT_TOKEN", "request_timeout": "MANENT_REQUEST_TIMEOUT", "follow_grace": "MANENT_FOLLOW_GRACE"} {
		if val := src.getenv(name); val != "" {
			env[key] = val
		}
	}
	if err := v.MergeConfigMap(env); err != nil {
		return nil, usageErrorf("read environment: %v", err)
	}
	for key, flag := range map[string]string{"server": "server", "token": "token", "request_timeout": "request-timeout", "follow_grace": "follow-grace"} {
		if fl := src.flags.Lookup(flag); fl != nil && (key != "follow_grace" || fl.Changed) {
			if err := v.BindPFlag(key, fl); err != nil {
				return nil, usageErrorf("bind --%s: %v", key, err)
			}
		}
	}

	server, err := normalizeServer(v.GetString("server"))
	if err != nil {
		return nil, err
	}
	cfg.Server = server
	cfg.Token = strings.TrimSpace(v.GetString("token"))
	if strings.ContainsFunc(cfg.Token, unicode.IsControl) {
		// It could not go into an Authorization header: say so (exit 2)
		// rather than report the server unreachable. The token is not shown.
		return nil, &UsageError{
			Err:  errors.New("the token contains a control character (a line break?)"),
			Hint: "hint: check --token, MANENT_TOKEN, or token: in the config file or its context",
		}
	}
	rt := strings.TrimSpace(v.GetString("request_timeout"))
	d, err := time.ParseDuration(rt)
	if err != nil || d < 0 {
		return nil, &UsageError{
			Err:  fmt.Errorf("invalid request timeout %q: want a duration such as 30s or 2m (0 for none)", rt),
			Hint: "hint: set it with --request-timeout, MANENT_REQUEST_TIMEOUT or request_timeout: in the config file",
		}
	}
	cfg.RequestTimeout = d
	if fg := strings.TrimSpace(v.GetString("follow_grace")); fg != "" {
		d, err := time.ParseDuration(fg)
		if err != nil || d < time.Second {
			return nil, &UsageError{
				Err:  fmt.Errorf("invalid follow grace %q: want a duration of at least 1s, such as 30s or 5m", fg),
				Hint: "hint: set how long a followed deploy's server may stay away with --follow-grace, MANENT_FOLLOW_GRACE or follow_grace: in the config file",
			}
		}
		cfg.FollowGrace = d
	}

	switch {
	case cfg.Token == "":
	case tokenFlagGiven(src):
		cfg.TokenSource = tokenFromFlag()
	case strings.TrimSpace(src.getenv("MANENT_TOKEN")) != "":
		cfg.TokenSource = tokenFromEnv()
	case cfg.Context != "":
		// Set by mergeContext: the context's token or token file.
	case cfg.File != "":
		cfg.TokenSource = tokenFromConfigFile(cfg.File)
	}

	if cfg.Token == "" {
		// $MANENT_DATA_DIR (named by the user), then the token file the
		// trial server on that address recorded, then ./manent-data.
		var files []string
		if dir := src.getenv("MANENT_DATA_DIR"); dir != "" && isDefaultServer(cfg.Server) {
			files = append(files, filepath.Join(absPath(src.dir, dir), "admin.token"))
		}
		if file := trialTokenFile(src, cfg.Server); file != "" {
			files = append(files, file)
		}
		if isDefaultServer(cfg.Server) {
			files = append(files, absPath(src.dir, filepath.Join("manent-data", "admin.token")))
		}
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				continue
			}
			if tok := strings.TrimSpace(string(data)); tok != "" {
				cfg.Token, cfg.TokenFile = tok, file
				cfg.TokenSource = tokenFromTrialFile(file)
				break
			}
		}
	}
	return cfg, nil
}

// tokenFlagGiven says whether --token was given with a value.
func tokenFlagGiven(src configSource) bool {
	fl := src.flags.Lookup("token")
	return fl != nil && fl.Changed && strings.TrimSpace(fl.Value.String()) != ""
}

// configPath returns the config file to read and whether it was named
// explicitly (--config or $MANENT_CONFIG).
func configPath(src configSource) (string, bool) {
	if fl := src.flags.Lookup("config"); fl != nil && fl.Changed && fl.Value.String() != "" {
		return absPath(src.dir, fl.Value.String()), true
	}
	if p := src.getenv("MANENT_CONFIG"); p != "" {
		return absPath(src.dir, p), true
	}
	if xdg := src.getenv("XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		return filepath.Join(xdg, "manent", "config.yaml"), false
	}
	if home := src.getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "manent", "config.yaml"), false
	}
	return "", false
}

// absPath resolves p against dir unless it is absolute.
func absPath(dir, p string) string {
	if filepath.IsAbs(p) || dir == "" {
		return p
	}
	return filepath.Join(dir, p)
}

// APIPath is where manent-server serves its API under the base URL; the
// client adds it to every request.
const APIPath = "/api/v1"

// normalizeServer accepts "host:port" as "http://host:port", requires an
// http(s) URL with a host and drops trailing slashes. A trailing /api/v1
// (the API's address copied from the docs or a browser) is dropped too: the
// client adds it, and no server is mounted under it. A URL that goes further
// into the API (an endpoint pasted whole) is refused with a hint. A path
// before /api/v1 is kept: a server behind a proxy under a prefix.
func normalizeServer(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		s = DefaultServer
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", &UsageError{
			Err:  fmt.Errorf("invalid server address %q: want http(s)://host[:port]", redactUserinfo(s)),
			Hint: "hint: set it with --server, MANENT_SERVER or server: in the config file",
		}
	}
	if p := u.Port(); p != "" {
		// url.Parse takes any digits; a port no server listens on is a
		// mistyped address, not an unreachable server (exit 4).
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", &UsageError{
				Err:  fmt.Errorf("invalid server address %q: port %s is not a TCP port (1 to 65535)", redactUserinfo(s), p),
				Hint: "hint: set it with --server, MANENT_SERVER or server: in the config file",
			}
		}
	}
	// What to pass instead: the address without what is refused below.
	bare := strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/")
	// What is quoted: a query may hold a token (?token=…) and the
	// userinfo a password; errors end up in CI logs.
	bareUser := *u
	bareUser.RawQuery, bareUser.ForceQuery, bareUser.Fragment, bareUser.RawFragment = "", false, "", ""
	shown := bareUser.Redacted()
	if u.RawQuery != "" || u.ForceQuery {
		shown += "?…"
	}
	if strings.Contains(s, "#") {
		shown += "#…"
	}
	if u.User != nil {
		// The client authenticates with a bearer token; a user and
		// password here would be sent as Basic credentials when no token
		// is, and printed in every error that names the server.
		return "", &UsageError{
			Err:  fmt.Errorf("invalid server address %q: a base URL has no user or password: manent authenticates with a token", shown),
			Hint: "hint: pass " + bare + ", and the token with --token, MANENT_TOKEN or 'manent login'",
		}
	}
	if u.RawQuery != "" || u.ForceQuery || strings.Contains(s, "#") {
		// The client appends /api/v1/… to the base: it would land in the
		// query or the fragment, and every request would go to the base.
		return "", &UsageError{
			Err:  fmt.Errorf("invalid server address %q: a base URL has no query (?…) or fragment (#…): the CLI adds /api/v1/… after it", shown),
			Hint: "hint: pass " + bare,
		}
	}
	s = strings.TrimRight(s, "/")
	if strings.Contains(u.Path+"/", APIPath+"/") {
		trimmed, ok := strings.CutSuffix(s, APIPath)
		if !ok || strings.Contains(strings.TrimRight(trimmed, "/")+"/", APIPath+"/") {
			return "", &UsageError{
				Err:  fmt.Errorf("invalid server address %q: want http(s)://host[:port]", s),
				Hint: "hint: --server is the server's base URL (http://host:port), without " + APIPath,
			}
		}
		s = strings.TrimRight(trimmed, "/")
	}
	return s, nil
}

// redactUserinfo returns the address s with the password of its userinfo
// (scheme://user:password@host…) replaced by "xxxxx", as url.URL.Redacted
// does, for an address that may not parse. The userinfo ends at the last
// "@" before the first "/" after the scheme.
func redactUserinfo(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	authority, path, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return s
	}
	user, _, hasPassword := strings.Cut(authority[:at], ":")
	if !hasPassword {
		return s
	}
	out := scheme + "://" + user + ":xxxxx" + authority[at:]
	if len(authority) < len(rest) {
		out += "/" + path
	}
	return out
}

// isDefaultServer reports whether server is the local trial server.
func isDefaultServer(server string) bool {
	switch strings.TrimRight(server, "/") {
	case DefaultServer, "http://localhost:8080":
		return true
	}
	return false
}
