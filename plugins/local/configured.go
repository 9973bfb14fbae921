package local

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/manent-io/manent/pkg/plugin"
)

// ConfiguredDir is a directory the server's environment configuration
// gives the local target: Environment's (every application of it when
// Application is "").
type ConfiguredDir struct {
	Dir         string
	Application string
	Environment string
	// File names where the configuration gives it ("prod.yaml").
	File string
}

// Configured indexes the directories the environment configuration
// gives, so that a target directory is compared with all of them at the
// cost of a look-up per parent and a binary search, whatever their
// number: no disk is walked. It is not changed once made.
type Configured struct {
	by     map[string][]ConfiguredDir
	sorted []string
}

// NewConfigured indexes dirs by their clean path, and by the path their
// symbolic links lead to where it differs. A dir that is not absolute is
// left out (Validate refuses it).
func NewConfigured(dirs []ConfiguredDir) *Configured {
	c := &Configured{by: map[string][]ConfiguredDir{}}
	add := func(key string, d ConfiguredDir) {
		if _, ok := c.by[key]; !ok {
			c.sorted = append(c.sorted, key)
		}
		c.by[key] = append(c.by[key], d)
	}
	for _, d := range dirs {
		if !filepath.IsAbs(d.Dir) {
			continue
		}
		clean := filepath.Clean(d.Dir)
		add(clean, d)
		if real, err := resolve(clean); err == nil && real != clean {
			add(real, d)
		}
	}
	sort.Strings(c.sorted)
	return c
}

// gives says whether d is given to pc's application and environment.
func (d ConfiguredDir) gives(pc plugin.Context) bool {
	return d.Environment == pc.Environment && (d.Application == "" || d.Application == pc.Application)
}

func (d ConfiguredDir) whose() string {
	if d.Application == "" {
		return fmt.Sprintf("environment %q (every application; %s)", d.Environment, d.File)
	}
	return fmt.Sprintf("application %q environment %q (%s)", d.Application, d.Environment, d.File)
}

// check refuses, for good, a target directory the environment
// configuration gives another environment, or one inside or holding such
// a directory at any depth: that environment's first deploy would find it
// claimed, or its releases pruned and overwritten. A directory given to
// pc's environment too (the operator gave it to both) is no conflict.
func (c *Configured) check(dir string, pc plugin.Context) error {
	if c == nil || (pc.Application == "" && pc.Environment == "") {
		return nil
	}
	forms := []string{filepath.Clean(dir)}
	if real, err := resolve(forms[0]); err == nil && real != forms[0] {
		forms = append(forms, real)
	}
	refuse := func(where string, d ConfiguredDir) error {
		return plugin.Permanent(fmt.Errorf("local: target.with.dir %s %s the directory the environment configuration gives %s: a deploy of application %q environment %q there would claim it before that environment deploys, or remove its releases; deploy into a directory of its own beside it (the one its environment configuration gives, or ask the operators for one)", dir, where, d.whose(), pc.Application, pc.Environment))
	}
	for _, form := range forms {
		if ds := c.by[form]; len(ds) > 0 && !anyGives(ds, pc) {
			return refuse("is", ds[0])
		}
		for d := form; filepath.Dir(d) != d; {
			d = filepath.Dir(d)
			for _, g := range c.by[d] {
				if !g.gives(pc) {
					return refuse("is inside "+d+",", g)
				}
			}
		}
		prefix := form + string(filepath.Separator)
		if form == string(filepath.Separator) {
			prefix = form
		}
		for i := sort.SearchStrings(c.sorted, prefix); i < len(c.sorted) && strings.HasPrefix(c.sorted[i], prefix); i++ {
			for _, g := range c.by[c.sorted[i]] {
				if !g.gives(pc) {
					return refuse("holds "+c.sorted[i]+",", g)
				}
			}
		}
	}
	return nil
}

func anyGives(ds []ConfiguredDir, pc plugin.Context) bool {
	for _, d := range ds {
		if d.gives(pc) {
			return true
		}
	}
	return false
}

// configured is the index of the directories the environment
// configuration gives, nil when none is known.
func (p *Plugin) configured() *Configured {
	if p.o.Configured == nil {
		return nil
	}
	return p.o.Configured()
}
