package cli

import (
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// TrialRecordName is the file, in the user's config directory
// ($XDG_CONFIG_HOME/manent, else ~/.config/manent), where `manent-server
// serve` in local trial mode records, for each loopback address it listens
// on, the admin token file of its data directory (pkg/servercmd writes it,
// mode 0600):
//
//	servers:
//	  http://127.0.0.1:8080: {token_file: /home/me/src/manent/manent-data/admin.token, data_dir: …}
//
// With no token configured, the CLI talking to a loopback server reads the
// token file recorded for that address, from any working directory. Only
// the path is recorded: the token stays in the data directory (mode 0600).
const TrialRecordName = "trial-servers.yaml"

// trialRecord is the content of TrialRecordName.
type trialRecord struct {
	Servers map[string]struct {
		TokenFile string `yaml:"token_file"`
	} `yaml:"servers"`
}

// userConfigDir is $XDG_CONFIG_HOME when absolute, else $HOME/.config, ""
// when neither is set.
func userConfigDir(getenv func(string) string) string {
	if xdg := getenv("XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		return xdg
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config")
	}
	return ""
}

// trialTokenFile returns the admin token file recorded for server by a
// local trial server, "" when there is none. Only loopback servers are
// looked up, and a record file that others may write is ignored.
func trialTokenFile(src configSource, server string) string {
	keys := loopbackKeys(server)
	dir := userConfigDir(src.getenv)
	if len(keys) == 0 || dir == "" {
		return ""
	}
	p := filepath.Join(dir, "manent", TrialRecordName)
	st, err := os.Stat(p)
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o022 != 0 {
		return ""
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return ""
	}
	var rec trialRecord
	if yaml.Unmarshal(data, &rec) != nil {
		return ""
	}
	for _, k := range keys {
		if s, ok := rec.Servers[k]; ok && filepath.IsAbs(s.TokenFile) {
			return s.TokenFile
		}
	}
	return ""
}

// loopbackKeys returns the record keys under which a loopback http server
// may be recorded (localhost is 127.0.0.1), none for any other server.
func loopbackKeys(server string) []string {
	u, err := url.Parse(server)
	if err != nil || u.Scheme != "http" || u.Port() == "" || u.Path != "" && u.Path != "/" {
		return nil
	}
	host := u.Hostname()
	switch {
	case strings.EqualFold(host, "localhost"):
		return []string{"http://127.0.0.1:" + u.Port(), "http://[::1]:" + u.Port()}
	case net.ParseIP(host) != nil && net.ParseIP(host).IsLoopback():
		return []string{"http://" + net.JoinHostPort(host, u.Port())}
	}
	return nil
}
