package envconfig

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/manent-io/manent/descriptor"
)

// Given is a target an environment configuration gives: Environment's
// file gives it every application of the environment (Application ""),
// an application's file that application alone (merged over the
// environment's file, as Get merges them).
type Given struct {
	Environment string
	Application string
	Target      descriptor.Target
	// File is the file that gives it, relative to the provider's
	// directory ("prod.yaml", "prod/billing.yaml").
	File string
}

// Lister is implemented by a provider that can list every target its
// configuration gives (Files). The http provider answers for one
// environment at a time and cannot.
type Lister interface {
	// List reads every target given. A file that cannot be read or
	// parsed gives nothing (its own environment's deploys are refused
	// on it); what a file that parses sets is listed even when the file
	// has other mistakes.
	List() ([]Given, error)
	// Stamp changes when a file is added to, removed from or renamed
	// into the configuration's top directory: a new environment.
	Stamp() string
}

// Listing is every target an environment configuration gives, read at
// one time. It is not changed once made: a newer reading is a new one.
type Listing struct {
	Given []Given
	stamp string
	at    time.Time
}

// ListEvery is how old a Listing may be before Listed reads the
// configuration again: a file edited in place (not a new environment,
// which is seen at once) counts within it.
const ListEvery = 5 * time.Second

// List reads every file of the directory: <env>.yaml, and
// <env>/<app>.yaml merged over it. Names that are no environment or
// application name are left out, as Get never reads them.
func (f Files) List() ([]Given, error) {
	entries, err := os.ReadDir(f.Dir)
	if err != nil {
		return nil, err
	}
	var out []Given
	envs := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			if namePattern.MatchString(name) {
				envs[name] = true
			}
			continue
		}
		if base, ok := yamlBase(name); ok && namePattern.MatchString(base) {
			envs[base] = true
		}
	}
	for env := range envs {
		envDoc, envFile := f.listed(env)
		if t, ok := targetOf(envDoc); ok {
			out = append(out, Given{Environment: env, Target: t, File: envFile})
		}
		apps, err := os.ReadDir(filepath.Join(f.Dir, env))
		if err != nil {
			continue
		}
		for _, a := range apps {
			base, ok := yamlBase(a.Name())
			if a.IsDir() || !ok || !namePattern.MatchString(base) {
				continue
			}
			appDoc, appFile := f.listed(env + "/" + base)
			if appDoc == nil || appFile != env+"/"+a.Name() {
				continue // both spellings: listed once, by the .yaml
			}
			merged := appDoc
			if envDoc != nil {
				merged = mergeDocuments(envDoc, appDoc)
			}
			if t, ok := targetOf(merged); ok {
				out = append(out, Given{Environment: env, Application: base, Target: t, File: appFile})
			}
		}
	}
	return out, nil
}

// listed reads base.yaml (or else base.yml) as a generic document (nil
// when there is none, or it cannot be read or parsed), and names the file.
func (f Files) listed(base string) (any, string) {
	for _, name := range []string{base + ".yaml", base + ".yml"} {
		full := filepath.Join(f.Dir, filepath.FromSlash(name))
		data, err := readFile(full)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, ""
		}
		doc, err := parseYAML(full, data)
		if err != nil {
			return nil, ""
		}
		return doc.value, name
	}
	return nil, ""
}

// Stamp is the modification time of the directory.
func (f Files) Stamp() string {
	st, err := os.Stat(f.Dir)
	if err != nil {
		return ""
	}
	return st.ModTime().String()
}

// yamlBase is name without its .yaml or .yml.
func yamlBase(name string) (string, bool) {
	for _, ext := range []string{".yaml", ".yml"} {
		if b, ok := strings.CutSuffix(name, ext); ok {
			return b, true
		}
	}
	return "", false
}

// targetOf is the target a generic document gives, when its plugin is a
// string.
func targetOf(doc any) (descriptor.Target, bool) {
	m, _ := doc.(map[string]any)
	t, _ := m["target"].(map[string]any)
	p, _ := t["plugin"].(string)
	if p == "" {
		return descriptor.Target{}, false
	}
	with, _ := t["with"].(map[string]any)
	return descriptor.Target{Plugin: p, With: with}, true
}

// listings is the Listing of a Defaults and how it is kept fresh.
type listings struct {
	mu   sync.Mutex
	last *Listing
	now  func() time.Time
}

// Listed returns every target the environment configuration gives, or
// nil when its provider cannot list them (http, none). The reading is
// kept: it is read again when it is ListEvery old, or at once when a file
// was added to or removed from the directory (Stamp), one reading at a
// time; a reading that fails keeps the last one. So a submission costs a
// stat of the directory, not a reading of every file.
func (d *Defaults) Listed() *Listing {
	l, ok := d.Provider.(Lister)
	if !ok {
		return nil
	}
	d.list.mu.Lock()
	defer d.list.mu.Unlock()
	now := time.Now
	if d.list.now != nil {
		now = d.list.now
	}
	stamp, last := l.Stamp(), d.list.last
	if last != nil && last.stamp == stamp && now().Sub(last.at) < ListEvery {
		return last
	}
	given, err := l.List()
	if err != nil && last != nil {
		return last
	}
	d.list.last = &Listing{Given: given, stamp: stamp, at: now()}
	return d.list.last
}
