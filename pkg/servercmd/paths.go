package servercmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/viper"

	"github.com/manent-io/manent/pkg/node"
)

// resolvePaths makes every path-valued key of c absolute (docs/operations.md
// "Paths"): one written in the configuration file is read from the file's
// directory — under systemd the working directory is /, and a relative
// governance.rules was looked for there — and one from a flag, the
// environment or a default from the working directory, as a shell means it.
// Messages then name the path tried.
//
// A relative data_dir or sqlite database of the file used to be read from
// the working directory. When the new reading finds no database where the
// old one does, the server must not start on a new, empty one beside the
// file: that is a configuration error naming both.
func resolvePaths(c *node.Config, v *viper.Viper, path string, flags map[string]string) error {
	wd, err := os.Getwd()
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	fileDir := wd
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return err
		}
		fileDir = filepath.Dir(abs)
	}
	// fromFile says whether key's value is the configuration file's: not
	// overridden by a flag or a MANENT_* variable.
	fromFile := func(key string) bool {
		if path == "" || flags[key] != "" || os.Getenv(envName(key)) != "" {
			return false
		}
		return v.InConfig(key)
	}
	baseOf := func(key string) string {
		if fromFile(key) {
			return fileDir
		}
		return wd
	}
	abs := func(base, p string) string {
		if p == "" || filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(base, p)
	}
	one := func(key string, p *string) { *p = abs(baseOf(key), *p) }
	list := func(key string, ps []string) {
		base := baseOf(key)
		for i := range ps {
			ps[i] = abs(base, ps[i])
		}
	}

	oldDataDir := abs(wd, c.DataDir) // the reading before this rule
	one("data_dir", &c.DataDir)
	one("governance.rules", &c.Governance.Rules)
	one("governance.rego", &c.Governance.Rego)
	one("environments.dir", &c.Environments.Dir)
	one("plugins.local.root", &c.Plugins.Local.Root)
	list("plugins.path", c.Plugins.Path)
	// Each entry is a path or a mapping {path, environments}.
	for i, e := range c.Plugins.Kubernetes.Kubeconfigs {
		switch v := e.(type) {
		case string:
			c.Plugins.Kubernetes.Kubeconfigs[i] = abs(baseOf("plugins.kubernetes.kubeconfigs"), v)
		case map[string]any:
			for k, p := range v {
				if s, ok := p.(string); ok && strings.EqualFold(k, "path") {
					v[k] = abs(baseOf("plugins.kubernetes.kubeconfigs"), s)
				}
			}
		}
	}
	list("secrets.files_under", c.Secrets.FilesUnder)

	// moved is the key whose database the new reading moves, and the
	// value that keeps it where it was.
	var oldDB, newDB, moved, keep string
	switch {
	case c.Database == "":
		c.Database = "sqlite:" + filepath.Join(c.DataDir, "manent.db")
		if fromFile("data_dir") {
			oldDB, newDB = filepath.Join(oldDataDir, "manent.db"), filepath.Join(c.DataDir, "manent.db")
			moved, keep = "data_dir", oldDataDir
		}
	case strings.HasPrefix(c.Database, "sqlite:"):
		rest := strings.TrimPrefix(strings.TrimPrefix(c.Database, "sqlite:"), "//")
		p, query, hasQuery := strings.Cut(rest, "?")
		if p == "" || filepath.IsAbs(p) {
			break
		}
		c.Database = "sqlite:" + abs(baseOf("database"), p)
		if hasQuery {
			c.Database += "?" + query
		}
		if fromFile("database") {
			oldDB, newDB = abs(wd, p), abs(fileDir, p)
			moved, keep = "database", "sqlite:"+oldDB
		}
	}
	if oldDB != "" && oldDB != newDB && !exists(newDB) && exists(oldDB) {
		return fmt.Errorf("%s in %s is relative: it is now read from the file's directory, where there is no database (%s), while the working directory has one at %s. Write the absolute path to keep it: %s: %s",
			moved, path, newDB, oldDB, moved, keep)
	}
	return nil
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}
