package servercmd

import (
	"fmt"
	"net"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/atomicfile"
)

// trialRecordName is the file, in the user's config directory
// ($XDG_CONFIG_HOME/manent, else ~/.config/manent), where a local trial
// server records, for the loopback address it listens on, the admin token
// file of its data directory, so that the CLI finds the token from any
// working directory (pkg/cli reads it: cli.TrialRecordName). Only the path
// is recorded; the token stays in <data-dir>/admin.token (mode 0600).
const trialRecordName = "trial-servers.yaml"

type trialEntry struct {
	TokenFile string `yaml:"token_file"`
	DataDir   string `yaml:"data_dir"`
}

type trialRecord struct {
	Servers map[string]trialEntry `yaml:"servers"`
}

// userConfigDir is $XDG_CONFIG_HOME when absolute, else $HOME/.config (the
// CLI resolves it the same way), "" when neither is set.
func userConfigDir() string {
	if xdg := os.Getenv("XDG_CONFIG_HOME"); xdg != "" && filepath.IsAbs(xdg) {
		return xdg
	}
	if home := os.Getenv("HOME"); home != "" {
		return filepath.Join(home, ".config")
	}
	return ""
}

// recordTrialServer records, for a trial server listening on the loopback
// address addr, where its admin token file is. It does nothing for any other
// address and returns the record file's path when it wrote it. The record
// keeps other addresses' entries; the file is written atomically, mode 0600,
// in a directory created with mode 0700.
func recordTrialServer(addr net.Addr, dataDir string) (string, error) {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || !tcp.IP.IsLoopback() {
		return "", nil
	}
	dir := userConfigDir()
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "manent", trialRecordName)
	var rec trialRecord
	if data, err := os.ReadFile(p); err == nil {
		_ = yaml.Unmarshal(data, &rec) // a broken record is rewritten
	}
	if rec.Servers == nil {
		rec.Servers = map[string]trialEntry{}
	}
	rec.Servers["http://"+tcp.String()] = trialEntry{TokenFile: filepath.Join(abs, "admin.token"), DataDir: abs}
	data, err := yaml.Marshal(rec)
	if err != nil {
		return "", err
	}
	data = append([]byte("# Written by 'manent-server serve' in local trial mode: the admin token file\n# of the trial server on each loopback address (the CLI reads it).\n"), data...)
	if err := atomicfile.Write(p, data, 0o600); err != nil {
		return "", fmt.Errorf("record the trial server in %s: %w", p, err)
	}
	return p, nil
}
