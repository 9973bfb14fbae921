// Package local is the `local` target plugin (SPEC §6): it unpacks the
// artifact into `<dir>/releases/<version>` and activates a release by
// switching the `<dir>/current` symlink atomically; rollback switches back.
// Every action is idempotent, and flushes what it changed to disk before it
// returns (a step recorded done survives a power loss). `dir` must be under
// the server's local root (plugins.local.root, SPEC §11.1), checked at
// submission and by the config step, and checked again for links before
// each action.
//
// It imports pkg/plugin and pkg/regularfile (the owner record's reading).
package local

import (
	"archive/tar"
	"archive/zip"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/regularfile"
)

// The bounds of an artifact's unpacking: MaxUnpacked the bytes of its
// files, MaxEntries its files, directories and links (an archive of a few
// KiB may hold either in millions).
const (
	MaxUnpacked = 2 << 30
	MaxEntries  = 1_000_000
)

// The bounds in force (tests lower them).
var (
	maxUnpacked int64 = MaxUnpacked
	maxEntries        = MaxEntries
	// A tar stream may be twice maxUnpacked and this once decompressed:
	// headers, padding and PAX records of up to maxEntries entries.
	streamSlack int64 = 64 << 20
	// How many directory entries the search for another environment's
	// directory below a target directory reads (see checkNested).
	nestedBudget = 10_000
)

// Options configure the local plugin.
type Options struct {
	// Root is the directory every target directory must be under
	// (plugins.local.root, SPEC §11.1); "" allows any directory.
	Root string
	// MaxZipEntries bounds a zip artifact's entries
	// (plugins.local.max_zip_entries); 0 is DefaultMaxZipEntries.
	MaxZipEntries int
	// Configured returns the directories the server's environment
	// configuration gives the local target, as they are now (nil, or a
	// nil result: none known). It is asked at admission, at the config
	// step and at the checkpoint, and must be cheap.
	Configured func() *Configured
}

// DefaultMaxZipEntries is the default of plugins.local.max_zip_entries
// (manent-server's too: pkg/servercmd reads it here): archive/zip reads a zip's whole directory
// into memory, about 330 bytes an entry besides its name
// (BenchmarkZipDirectoryMemory), so 100,000 entries take some 35-60 MiB of
// a worker; a large node_modules tree has about 50,000 files. A tar is
// read as a stream and keeps MaxEntries.
const DefaultMaxZipEntries = 100_000

// Plugin is the local target.
type Plugin struct {
	o Options
	// sync flushes a file or a directory to disk (nil: fsync).
	sync func(path string) error
}

// New returns the local plugin.
func New(o Options) *Plugin { return &Plugin{o: o} }

// Checkpoint is what `checkpoint:<step>` records: the live release.
type Checkpoint struct {
	Release string `json:"release"`
}

// Validate requires `dir`, an absolute path under the root, without `..`
// and not reaching outside the root through a symbolic link, and refuses
// any setting but `dir` and `keep_releases` (an integer of at least 2).
func (p *Plugin) Validate(with map[string]any) error {
	d, _, err := settings(with)
	if d == "" {
		return err
	}
	return errors.Join(err, p.checkDir(d))
}

// settings reads `with`: the target directory ("" when it is missing or
// not a string) and with.keep_releases, how many releases each deploy
// keeps under releases/ (0, the default: all of them, the live release and
// the one before it at least, for rollback).
func settings(with map[string]any) (dir string, keep int, err error) {
	s := plugin.ReadSettings(with, "dir", "keep_releases")
	if s.Require("dir") {
		s.String("dir", &dir)
	}
	s.Int("keep_releases", 2, &keep)
	if err := s.Err(); err != nil {
		return dir, keep, fmt.Errorf("local: %w", err)
	}
	return dir, keep, nil
}

// pruneReleases makes room for this deploy's release (name) under
// releases/ so that keep remain once it is unpacked: it removes the oldest
// (by the time they were unpacked) beyond the keep most recent. The live
// release — this deploy's rollback — and name always count as kept. A
// release leaves whole: it is renamed aside (releases/.pruned-…) and the
// rename flushed before its files are removed, so a prune killed midway
// leaves no partial release under a release's name, only a dot-name the
// next deploy removes.
func (p *Plugin) pruneReleases(dir string, keep int, live, name, id string, log io.Writer) error {
	releases := filepath.Join(dir, "releases")
	entries, err := os.ReadDir(releases)
	if err != nil {
		return nil
	}
	type release struct {
		name string
		at   int64
	}
	var all []release
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if info, err := e.Info(); err == nil {
			all = append(all, release{e.Name(), info.ModTime().UnixNano()})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at > all[j].at })
	kept := map[string]bool{name: true}
	if live != "" {
		kept[live] = true
	}
	for _, r := range all {
		if len(kept) >= keep {
			break
		}
		kept[r.name] = true
	}
	aside := map[string]string{}
	for _, r := range all {
		if kept[r.name] {
			continue
		}
		to := filepath.Join(releases, prunedPrefix+r.name+"-"+id)
		_ = os.RemoveAll(to)
		if err := os.Rename(filepath.Join(releases, r.name), to); err != nil {
			fmt.Fprintf(log, "could not remove releases/%s (keep_releases %d): %v\n", r.name, keep, err)
			continue
		}
		aside[r.name] = to
	}
	if len(aside) == 0 {
		return nil
	}
	if err := p.flushDirs(releases); err != nil {
		return err
	}
	for _, r := range all {
		to, ok := aside[r.name]
		if !ok {
			continue
		}
		if err := os.RemoveAll(to); err != nil {
			fmt.Fprintf(log, "could not remove releases/%s (keep_releases %d, moved aside to %s): %v\n", r.name, keep, filepath.Base(to), err)
			continue
		}
		fmt.Fprintf(log, "removed releases/%s (keep_releases %d)\n", r.name, keep)
	}
	return nil
}

// prunedPrefix marks a release keep_releases removes, moved aside first:
// releases/.pruned-<release>-<deploy id>.
const prunedPrefix = ".pruned-"

func (p *Plugin) checkDir(d string) error {
	if !filepath.IsAbs(d) {
		return fmt.Errorf("local: %w", plugin.Settingf("dir", "target.with.dir must be an absolute path, got %q", d))
	}
	if p.o.Root == "" {
		return nil
	}
	for _, el := range strings.Split(filepath.ToSlash(d), "/") {
		if el == ".." {
			return fmt.Errorf("local: %w", plugin.Settingf("dir", "target.with.dir %q must not contain \"..\"", d))
		}
	}
	root, err := resolve(p.o.Root)
	if err != nil {
		return fmt.Errorf("local: plugins.local.root: %w", err)
	}
	real, err := resolve(d)
	if err != nil {
		return fmt.Errorf("local: %w", &plugin.SettingError{Path: "dir", Err: fmt.Errorf("target.with.dir %q: %w", d, err)})
	}
	if !under(real, root) {
		if real != filepath.Clean(d) {
			return fmt.Errorf("local: %w", plugin.Settingf("dir", "target.with.dir %q leads to %s, outside this server's local root %s (plugins.local.root)", d, real, p.o.Root))
		}
		return fmt.Errorf("local: %w", plugin.Settingf("dir", "target.with.dir %q is outside this server's local root %s (plugins.local.root)", d, p.o.Root))
	}
	return nil
}

// resolve returns path with every symbolic link of its existing part
// followed (what is not created yet cannot be a link).
func resolve(path string) (string, error) {
	path = filepath.Clean(path)
	var rest []string
	for {
		real, err := filepath.EvalSymlinks(path)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !os.IsNotExist(err) {
			return "", err
		}
		parent := filepath.Dir(path)
		if parent == path {
			return "", err
		}
		rest = append([]string{filepath.Base(path)}, rest...)
		path = parent
	}
}

// under says whether path is root or inside it (both cleaned, absolute).
func under(path, root string) bool {
	rel, err := filepath.Rel(root, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// dirOf is the target directory of pc. A directory under the root is
// checked again at the time of the action, so that a link made since the
// submission does not lead out of it. (One outside this worker's root was
// admitted by a worker with another root — a deploy taken over from a dead
// worker — whose admission and config step checked it.)
func (p *Plugin) dirOf(pc plugin.Context) (string, error) {
	d, _ := pc.With["dir"].(string)
	if d == "" {
		return "", plugin.Permanent(fmt.Errorf("local: target.with.dir is not set"))
	}
	if p.o.Root == "" || !filepath.IsAbs(d) || under(filepath.Clean(d), filepath.Clean(p.o.Root)) {
		if err := p.checkDir(d); err != nil {
			return "", plugin.Permanent(err)
		}
	}
	if err := checkOwner(d, pc); err != nil {
		return "", err
	}
	return d, nil
}

// OwnerFile, in a target directory, records the application and the
// environment that deploy there: two environments given one directory
// would overwrite each other's releases and `current`, and a deploy of
// one could remove what the other is unpacking.
const OwnerFile = ".manent-owner"

type owner struct {
	Application string `json:"application"`
	Environment string `json:"environment"`
}

// CheckOwner refuses (plugin.OwnerCheck) a target directory that another
// application or environment owns, at with.dir: with.dir itself, or the
// directory of one of the rollout targets under it.
func (p *Plugin) CheckOwner(application, environment string, with map[string]any, targets []string) error {
	d, _ := with["dir"].(string)
	if d == "" || !filepath.IsAbs(d) {
		return nil // Validate says so
	}
	pc := plugin.Context{Application: application, Environment: environment}
	where := ""
	err := checkOwner(d, pc)
	for _, t := range targets {
		if err != nil {
			break
		}
		td := filepath.Join(d, ReleaseName(t))
		where = fmt.Sprintf("rollout target %s deploys into %s: ", t, td)
		err = checkOwner(td, pc)
	}
	if err == nil {
		where = ""
		err = p.checkNested(d, pc)
	}
	for _, t := range targets {
		if err != nil {
			break
		}
		td := filepath.Join(d, ReleaseName(t))
		where = fmt.Sprintf("rollout target %s deploys into %s: ", t, td)
		err = p.checkNested(td, pc)
	}
	var perm *plugin.PermanentError
	if errors.As(err, &perm) {
		return fmt.Errorf("local: %w", plugin.Settingf("dir", "%s%s", where, strings.TrimPrefix(perm.Err.Error(), "local: ")))
	}
	return err
}

// checkOwner refuses, for good, an action in a directory another
// application or environment owns. A context without an application and
// an environment (a plugin called outside a deploy) owns nothing.
func checkOwner(dir string, pc plugin.Context) error {
	if pc.Application == "" && pc.Environment == "" {
		return nil
	}
	o, ok, err := ownerOf(dir)
	if err != nil || !ok {
		return err
	}
	if o.Application != pc.Application || o.Environment != pc.Environment {
		file := filepath.Join(dir, OwnerFile)
		return plugin.Permanent(fmt.Errorf("local: target.with.dir %s is the directory of application %q environment %q (recorded in %s): give application %q environment %q a directory of its own, since two environments deploying into one overwrite each other's releases and current; if %s/%s no longer deploys there, remove the file", dir, o.Application, o.Environment, file, pc.Application, pc.Environment, o.Application, o.Environment))
	}
	return nil
}

// ownerOf reads the owner recorded in dir; ok is false when there is no
// record, or the empty one a claim of an earlier manent left when it was
// killed between creating and writing it (the next deploy's claim
// replaces it). Only a regular file is read, and only its first KiBs: a
// pipe or a huge file put there must not hold the reader.
func ownerOf(dir string) (o owner, ok bool, err error) {
	file := filepath.Join(dir, OwnerFile)
	// Read without following a link or waiting for a writer, and checked
	// again once open: what was swapped in after the first look is
	// refused too.
	b, err := regularfile.Read(file, ownerMax, regularfile.NoFollow)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return o, false, nil
	}
	bad := plugin.Permanent(fmt.Errorf("local: %s is not a record of the application and environment that own %s: remove it and deploy again", file, dir))
	var notRegular *regularfile.NotRegularError
	if errors.As(err, &notRegular) || errors.Is(err, regularfile.ErrTooLarge) {
		return o, false, bad
	}
	if err != nil {
		return o, false, fmt.Errorf("local: %w", err)
	}
	if len(b) == 0 {
		return o, false, nil
	}
	if json.Unmarshal(b, &o) != nil || o.Application == "" {
		return o, false, bad
	}
	return o, true, nil
}

// ownerMax bounds the owner record: manent writes a few dozen bytes.
const ownerMax = 4096

// checkNested refuses, for good, a target directory inside the directory
// of another application or environment (its releases/, its current) or
// holding one: a deploy there would prune, clean up or overwrite the
// other's releases. Above dir it looks at every parent up to the local
// root (or /); below it, two levels down (<dir>/<x> and <dir>/<x>/<y>,
// which covers <dir>/releases/<release>, where a deploy removes), reading
// at most nestedBudget entries without following links. A directory
// holding more is refused unless it is pc's already (its own releases):
// so with.dir "/" never walks the disk, and cannot hide another's
// directory among more entries than are read. Before the disk, it looks
// at the directories the environment configuration gives other
// environments (Configured), equal, above or below at any depth.
func (p *Plugin) checkNested(dir string, pc plugin.Context) error {
	if pc.Application == "" && pc.Environment == "" {
		return nil
	}
	if err := p.configured().check(dir, pc); err != nil {
		return err
	}
	dir = filepath.Clean(dir)
	other := func(o owner) bool { return o.Application != pc.Application || o.Environment != pc.Environment }
	refuse := func(where, rel string, o owner) error {
		return plugin.Permanent(fmt.Errorf("local: target.with.dir %s %s %s, the directory of application %q environment %q (recorded in %s): a deploy there would remove or overwrite its releases; give application %q environment %q a directory of its own beside it, neither inside nor around another's", dir, rel, where, o.Application, o.Environment, filepath.Join(where, OwnerFile), pc.Application, pc.Environment))
	}
	stop := ""
	if p.o.Root != "" {
		stop = filepath.Clean(p.o.Root)
	}
	for d := dir; d != stop && filepath.Dir(d) != d; {
		d = filepath.Dir(d)
		o, ok, err := ownerOf(d)
		if err != nil {
			return err
		}
		if ok && other(o) {
			return refuse(d, "is inside", o)
		}
	}
	level, read := []string{dir}, 0
	for depth := 1; depth <= 2; depth++ {
		var next []string
		for _, d := range level {
			f, err := os.Open(d)
			if err != nil {
				continue // not made yet, or not readable: nothing of ours is there
			}
			for {
				entries, err := f.ReadDir(256)
				for _, e := range entries {
					if read++; read > nestedBudget {
						f.Close()
						if o, ok, _ := ownerOf(dir); ok && !other(o) {
							return nil
						}
						return plugin.Permanent(fmt.Errorf("local: target.with.dir %s holds more than %d entries two levels down: manent cannot check that no other environment's directory is inside it; give application %q environment %q a new directory of its own", dir, nestedBudget, pc.Application, pc.Environment))
					}
					if !e.IsDir() {
						continue
					}
					sub := filepath.Join(d, e.Name())
					o, ok, err := ownerOf(sub)
					if err != nil {
						f.Close()
						return err
					}
					if ok && other(o) {
						f.Close()
						return refuse(sub, "holds", o)
					}
					next = append(next, sub)
				}
				if err != nil {
					break
				}
			}
			f.Close()
		}
		level = next
	}
	return nil
}

// claim records pc's application and environment as the owner of dir
// (which exists) unless one is recorded; of two first deploys racing, one
// makes the record and the other is refused by checkOwner. The record
// appears whole or not at all: it is written and flushed under a
// temporary name, then linked to its name (a link, unlike a rename, fails
// when the name exists), so a claim killed midway leaves at most a
// temporary file, which the next claim removes, never an empty record.
func (p *Plugin) claim(dir string, pc plugin.Context) error {
	if pc.Application == "" && pc.Environment == "" {
		return nil
	}
	file := filepath.Join(dir, OwnerFile)
	st, err := os.Lstat(file)
	switch {
	case err == nil && st.Mode().IsRegular() && st.Size() == 0:
		// The empty record a claim of an earlier manent (which created the
		// file, then wrote it) left when it was killed in between.
		if err := dropEmptyRecord(dir, file); err != nil {
			return err
		}
	case err == nil:
		if err := checkOwner(dir, pc); err != nil {
			return err
		}
		removeClaimTemps(dir)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("local: %w", err)
	}
	// The configuration may have given the directory to another
	// environment since the checkpoint.
	if err := p.configured().check(dir, pc); err != nil {
		return err
	}
	b, _ := json.Marshal(owner{pc.Application, pc.Environment})
	tmp, err := os.CreateTemp(dir, OwnerFile+claimTemp+"*")
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	name := tmp.Name()
	defer os.Remove(name)
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Chmod(0o644)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = p.flush(name)
	}
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if err := os.Link(name, file); err != nil {
		// Another claim made the record first (or, having made it,
		// removed this claim's temporary file as a leftover).
		if _, serr := os.Lstat(file); serr == nil {
			return checkOwner(dir, pc)
		}
		return fmt.Errorf("local: record the owner of %s: %w", dir, err)
	}
	if err := p.flushDirs(dir); err != nil {
		return err
	}
	removeClaimTemps(dir)
	return nil
}

// claimTemp marks the temporary file of a claim: <dir>/.manent-owner.claim-…
const claimTemp = ".claim-"

// removeClaimTemps removes the temporary files of claims killed before
// they linked or removed them. Only once the record exists: a claim whose
// file is removed under it finds the record when its link fails.
func removeClaimTemps(dir string) {
	left, _ := filepath.Glob(filepath.Join(dir, OwnerFile+claimTemp+"*"))
	for _, f := range left {
		_ = os.Remove(f)
	}
}

// dropEmptyRecord moves an empty record out of the way. It moves it
// aside first and puts it back should it no longer be empty: a claim
// racing this one may have replaced it with its own record meanwhile.
func dropEmptyRecord(dir, file string) error {
	aside, err := os.CreateTemp(dir, OwnerFile+claimTemp+"empty-*")
	if err != nil {
		return fmt.Errorf("local: %w", err)
	}
	aside.Close()
	if err := os.Rename(file, aside.Name()); err != nil {
		os.Remove(aside.Name())
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("local: %w", err)
	}
	if st, err := os.Stat(aside.Name()); err == nil && st.Size() > 0 {
		_ = os.Link(aside.Name(), file)
	}
	_ = os.Remove(aside.Name())
	return nil
}

// perTarget runs fn once per rollout target, each in <dir>/<target> (or
// once in <dir> without targets), and merges the results by target.
func (p *Plugin) perTarget(pc plugin.Context, fn func(pc plugin.Context) (plugin.Result, error)) (plugin.Result, error) {
	if len(pc.Targets) == 0 {
		return fn(pc)
	}
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	out := plugin.Result{}
	for _, t := range pc.Targets {
		sub := pc
		sub.With = map[string]any{"dir": filepath.Join(dir, ReleaseName(t))}
		if k, ok := pc.With["keep_releases"]; ok {
			sub.With["keep_releases"] = k
		}
		sub.Targets = nil
		res, err := fn(sub)
		if err != nil {
			return out, fmt.Errorf("target %s: %w", t, err)
		}
		out[t] = res
	}
	return out, nil
}

// CheckTargets refuses rollout targets that would share a directory: each
// target deploys into <dir>/<ReleaseName(target)>, so "eu/1" and "eu_1"
// would overwrite each other's releases (plugin.TargetCheck).
func (p *Plugin) CheckTargets(targets []string) error {
	seen := map[string]string{}
	for _, t := range targets {
		name := ReleaseName(t)
		if first, ok := seen[name]; ok && first != t {
			return fmt.Errorf("rollout targets %q and %q would share the directory %s (a target's characters other than letters, digits, '.', '-' and '_' become '_'): rename one", first, t, name)
		}
		seen[name] = t
	}
	return nil
}

// ReleaseName turns a free-text version into a safe directory name.
func ReleaseName(version string) string {
	var b strings.Builder
	for _, r := range version {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || s == "." || s == ".." {
		s = "_" + s
	}
	return s
}

// Live reports the release `current` points at ("" when none), per
// rollout target when the action has targets.
func (p *Plugin) Live(_ context.Context, pc plugin.Context) (json.RawMessage, error) {
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	if len(pc.Targets) == 0 {
		if err := p.checkNested(dir, pc); err != nil {
			return nil, err
		}
		rel, err := live(dir)
		if err != nil {
			return nil, err
		}
		return json.Marshal(Checkpoint{Release: rel})
	}
	// Each target's directory is checked at the checkpoint, before the
	// first wave deploys, not when its own wave reaches it.
	for _, t := range pc.Targets {
		if err := checkOwner(filepath.Join(dir, ReleaseName(t)), pc); err != nil {
			return nil, fmt.Errorf("rollout target %s: %w", t, err)
		}
	}
	if err := p.checkNested(dir, pc); err != nil {
		return nil, err
	}
	byTarget := map[string]Checkpoint{}
	for _, t := range pc.Targets {
		td := filepath.Join(dir, ReleaseName(t))
		if err := p.checkNested(td, pc); err != nil {
			return nil, fmt.Errorf("rollout target %s: %w", t, err)
		}
		rel, err := live(td)
		if err != nil {
			return nil, err
		}
		byTarget[t] = Checkpoint{Release: rel}
	}
	return json.Marshal(byTarget)
}

// perTargetCheckpoint runs fn on each target (perTarget) with that
// target's part of a per-target checkpoint (checkpointFor).
func (p *Plugin) perTargetCheckpoint(pc plugin.Context, checkpoint json.RawMessage, fn func(pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error)) (plugin.Result, error) {
	i := 0
	return p.perTarget(pc, func(one plugin.Context) (plugin.Result, error) {
		cp := checkpoint
		if len(pc.Targets) > 0 {
			cp = checkpointFor(checkpoint, pc, pc.Targets[i])
			i++
		}
		return fn(one, cp)
	})
}

// checkpointFor picks a target's checkpoint out of a per-target one.
func checkpointFor(raw json.RawMessage, pc plugin.Context, target string) json.RawMessage {
	if len(pc.Targets) == 0 {
		return raw
	}
	var byTarget map[string]json.RawMessage
	if json.Unmarshal(raw, &byTarget) != nil {
		return nil
	}
	return byTarget[target]
}

func live(dir string) (string, error) {
	target, err := os.Readlink(filepath.Join(dir, "current"))
	if os.IsNotExist(err) {
		return "", nil
	}
	if err != nil {
		cur := filepath.Join(dir, "current")
		if st, serr := os.Lstat(cur); serr == nil && st.Mode()&fs.ModeSymlink == 0 {
			kind := "file"
			if st.IsDir() {
				kind = "directory"
			}
			return "", plugin.Permanent(fmt.Errorf("local: %s is a %s, not the link to the live release manent switches: move it away (into releases/ to keep it as a release) and deploy again", cur, kind))
		}
		return "", fmt.Errorf("local: read current: %w", err)
	}
	return filepath.Base(target), nil
}

// Deploy unpacks the artifact into releases/<version>, replacing a partial
// earlier attempt. When releases/<version> is the live release (the same
// version deployed again, or another version with the same directory name),
// it unpacks into releases/<version>@<deploy id> instead: the live files
// stay untouched until activation switches `current`, so a failure or a
// cancel before it leaves the running release exactly as it was.
func (p *Plugin) Deploy(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	if len(pc.Targets) > 0 {
		// The directory holding the targets' is owned too.
		dir, err := p.dirOf(pc)
		if err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
		if err := p.claim(dir, pc); err != nil {
			return nil, err
		}
	}
	return p.perTarget(pc, func(pc plugin.Context) (plugin.Result, error) { return p.deployOne(ctx, pc) })
}

// stagedName is the directory of a release unpacked while a release of the
// same name was live: ReleaseName never yields "@", so it cannot collide.
func stagedName(pc plugin.Context) string {
	return ReleaseName(pc.Version) + "@" + ReleaseName(pc.DeployID)
}

// releaseOf is the directory name this deploy's release has under
// releases/: its staged name when it was unpacked beside a live release of
// the same name, its plain name otherwise.
func releaseOf(dir string, pc plugin.Context) string {
	if st, err := os.Stat(filepath.Join(dir, "releases", stagedName(pc))); err == nil && st.IsDir() {
		return stagedName(pc)
	}
	return ReleaseName(pc.Version)
}

// removeLeftovers removes the temporary directories (.tmp-…, .old-…) of
// deploys other than id that were killed while they unpacked a release or
// swapped it in, and never ran again, and the releases keep_releases moved
// aside (.pruned-…) that a deploy killed midway did not remove.
func removeLeftovers(releases, id string, log io.Writer) {
	entries, err := os.ReadDir(releases)
	if err != nil {
		return
	}
	for _, e := range entries {
		n := e.Name()
		// A pruned release is nobody's, this deploy's own (a retry of a
		// prune killed midway) included.
		pruned := strings.HasPrefix(n, prunedPrefix)
		if !pruned && (!strings.HasPrefix(n, ".tmp-") && !strings.HasPrefix(n, ".old-") || strings.HasSuffix(n, "-"+id)) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(releases, n)); err != nil {
			fmt.Fprintf(log, "could not remove releases/%s, left by a deploy that stopped: %v\n", n, err)
			continue
		}
		if pruned {
			fmt.Fprintf(log, "removed releases/%s, left by a deploy that stopped while removing it (keep_releases)\n", n)
			continue
		}
		fmt.Fprintf(log, "removed releases/%s, left by a deploy that stopped while unpacking\n", n)
	}
}

// pruneStaged removes the copies earlier deploys of the same version
// unpacked beside a live release (releases/<version>@<id>) that are no
// longer live: neither `current` nor the checkpoint of this deploy (which
// is the live release) can lead back to them.
func pruneStaged(releases, version, cur, keep string) {
	matches, _ := filepath.Glob(filepath.Join(releases, version+"@*"))
	for _, m := range matches {
		if b := filepath.Base(m); b != cur && b != keep {
			_ = os.RemoveAll(m)
		}
	}
}

func (p *Plugin) deployOne(ctx context.Context, pc plugin.Context) (plugin.Result, error) {
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	if pc.Artifact == "" {
		return nil, plugin.Permanent(fmt.Errorf("local: no artifact was downloaded"))
	}
	releases := filepath.Join(dir, "releases")
	if err := os.MkdirAll(releases, 0o755); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := p.claim(dir, pc); err != nil {
		return nil, err
	}
	// This deploy is the only one in dir now (one per environment at a
	// time, and dir is the environment's): what another left is unused.
	removeLeftovers(releases, pc.DeployID, pc.Log)
	name := ReleaseName(pc.Version)
	cur, err := live(dir)
	if err != nil {
		return nil, err
	}
	if name == cur || stagedName(pc) == cur {
		name = stagedName(pc)
	}
	pruneStaged(releases, ReleaseName(pc.Version), cur, name)
	_, keep, err := settings(pc.With)
	if err != nil {
		return nil, plugin.Permanent(err)
	}
	if keep > 0 {
		if err := p.pruneReleases(dir, keep, cur, name, pc.DeployID, pc.Log); err != nil {
			return nil, err
		}
	}
	final := filepath.Join(releases, name)
	tmp := filepath.Join(releases, ".tmp-"+name+"-"+pc.DeployID)
	_ = os.RemoveAll(tmp)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	files, err := unpack(ctx, pc.Artifact, tmp, cmp.Or(p.o.MaxZipEntries, DefaultMaxZipEntries))
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	// On disk before it takes the release's name: a power loss after the
	// step is recorded done must not leave an empty or partial release
	// that activation then points at.
	if err := p.flushTree(tmp); err != nil {
		_ = os.RemoveAll(tmp)
		return nil, err
	}
	if name == cur {
		// Only a retry after this deploy's own activation can get here
		// (its staged release is live): the files are already in place.
		_ = os.RemoveAll(tmp)
		fmt.Fprintf(pc.Log, "releases/%s is live already\n", name)
		return plugin.Result{"release": name, "path": final, "files": files}, nil
	}
	// Swap in the new tree: an earlier, not live release of the same name
	// (a failed attempt, an older deploy kept for rollback) moves aside first.
	old := filepath.Join(releases, ".old-"+name+"-"+pc.DeployID)
	_ = os.RemoveAll(old)
	if _, err := os.Lstat(final); err == nil {
		if err := os.Rename(final, old); err != nil {
			return nil, fmt.Errorf("local: %w", err)
		}
	}
	if err := os.Rename(tmp, final); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	_ = os.RemoveAll(old)
	// The rename, and releases/ itself when this deploy made it.
	if err := p.flushDirs(releases, dir); err != nil {
		return nil, err
	}
	if name != ReleaseName(pc.Version) {
		fmt.Fprintf(pc.Log, "releases/%s is live: unpacked %d files beside it into %s\n", ReleaseName(pc.Version), files, final)
	} else {
		fmt.Fprintf(pc.Log, "unpacked %d files into %s\n", files, final)
	}
	return plugin.Result{"release": name, "path": final, "files": files}, nil
}

// Activate switches `current` to the release atomically.
func (p *Plugin) Activate(_ context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.perTarget(pc, p.activateOne)
}

func (p *Plugin) activateOne(pc plugin.Context) (plugin.Result, error) {
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	name := releaseOf(dir, pc)
	if _, err := os.Stat(filepath.Join(dir, "releases", name)); err != nil {
		return nil, plugin.Permanent(fmt.Errorf("local: release %s is not deployed", name))
	}
	if err := p.switchCurrent(dir, name); err != nil {
		return nil, err
	}
	fmt.Fprintf(pc.Log, "current -> releases/%s\n", name)
	return plugin.Result{"current": name}, nil
}

// Health checks the deployed release: post-test runs before activation, so
// it is releases/<version> that must be in place, not `current`.
func (p *Plugin) Health(_ context.Context, pc plugin.Context) (plugin.Result, error) {
	return p.perTarget(pc, p.healthOne)
}

func (p *Plugin) healthOne(pc plugin.Context) (plugin.Result, error) {
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	name := releaseOf(dir, pc)
	st, err := os.Stat(filepath.Join(dir, "releases", name))
	if err != nil || !st.IsDir() {
		return nil, fmt.Errorf("local: release %s is not deployed", name)
	}
	return plugin.Result{"release": name}, nil
}

// RollbackActivation points `current` back at the checkpointed release (or
// removes it when nothing was live before).
func (p *Plugin) RollbackActivation(_ context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	return p.perTargetCheckpoint(pc, checkpoint, p.rollbackActivationOne)
}

func (p *Plugin) rollbackActivationOne(pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if len(checkpoint) > 0 {
		if err := json.Unmarshal(checkpoint, &cp); err != nil {
			return nil, plugin.Permanent(fmt.Errorf("local: bad checkpoint: %w", err))
		}
	}
	if cp.Release == "" {
		if err := os.Remove(filepath.Join(dir, "current")); err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("local: %w", err)
		}
		if err := p.flushDirs(dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(pc.Log, "current removed: nothing was live before\n")
		return plugin.Result{"current": ""}, nil
	}
	if st, err := os.Stat(filepath.Join(dir, "releases", cp.Release)); err != nil || !st.IsDir() {
		// Pointing current at nothing would be no rollback: say so.
		return nil, plugin.Permanent(fmt.Errorf("local: cannot roll back to releases/%s: it is no longer there (removed outside manent?); current still points where it did", cp.Release))
	}
	if err := p.switchCurrent(dir, cp.Release); err != nil {
		return nil, err
	}
	fmt.Fprintf(pc.Log, "current -> releases/%s (rolled back)\n", cp.Release)
	return plugin.Result{"current": cp.Release}, nil
}

// RollbackDeploy removes the release this deploy unpacked, unless it is the
// checkpointed (previously live) one or is live now.
func (p *Plugin) RollbackDeploy(_ context.Context, pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	return p.perTargetCheckpoint(pc, checkpoint, p.rollbackDeployOne)
}

func (p *Plugin) rollbackDeployOne(pc plugin.Context, checkpoint json.RawMessage) (plugin.Result, error) {
	dir, err := p.dirOf(pc)
	if err != nil {
		return nil, err
	}
	var cp Checkpoint
	if len(checkpoint) > 0 {
		_ = json.Unmarshal(checkpoint, &cp)
	}
	name := releaseOf(dir, pc)
	cur, _ := live(dir)
	if name == cp.Release || name == cur {
		return plugin.Result{"removed": ""}, nil
	}
	if err := os.RemoveAll(filepath.Join(dir, "releases", name)); err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	if err := p.flushDirs(filepath.Join(dir, "releases")); err != nil {
		return nil, err
	}
	fmt.Fprintf(pc.Log, "removed releases/%s\n", name)
	return plugin.Result{"removed": name}, nil
}

// switchCurrent points `current` at releases/name with one rename of a new
// link over it, flushing dir before (the new link and the release) and
// after (the rename): once the step is recorded done, a power loss leaves
// `current` where the step put it.
func (p *Plugin) switchCurrent(dir, name string) error {
	tmp := filepath.Join(dir, ".current-tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Join("releases", name), tmp); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	if err := p.flushDirs(filepath.Join(dir, "releases", name), filepath.Join(dir, "releases"), dir); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "current")); err != nil {
		return fmt.Errorf("local: switch current: %w", err)
	}
	return p.flushDirs(dir)
}

// flush writes a file or a directory (its entries) through to disk.
func (p *Plugin) flush(path string) error {
	if p.sync != nil {
		return p.sync(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	err = f.Sync()
	if err != nil && errors.Is(err, syscall.EINVAL) {
		// A file system that cannot flush a directory (some network and
		// FUSE ones) has nothing more to give.
		if st, serr := f.Stat(); serr == nil && st.IsDir() {
			return nil
		}
	}
	return err
}

// flushDirs flushes each directory (a no-op on Windows, where a directory
// cannot be flushed).
func (p *Plugin) flushDirs(dirs ...string) error {
	if runtime.GOOS == "windows" && p.sync == nil {
		return nil
	}
	for _, d := range dirs {
		if err := p.flush(d); err != nil {
			return fmt.Errorf("local: fsync: %w", err)
		}
	}
	return nil
}

// flushTree flushes every file and directory under root, root included.
func (p *Plugin) flushTree(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return p.flushDirs(path)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if err := p.flush(path); err != nil {
			return fmt.Errorf("local: fsync: %w", err)
		}
		return nil
	})
}

// unpack extracts a .tar.gz/.tgz/.tar/.zip artifact into dst, or copies any
// other file there as is. It returns the number of files written. An
// archive that cannot make a release (see extractor) fails for good,
// naming the entry; what it writes stays under dst whatever the archive
// says.
func unpack(ctx context.Context, src, dst string, maxZip int) (int, error) {
	x, err := openExtractor(ctx, dst)
	if err != nil {
		return 0, err
	}
	x.maxZip = maxZip
	defer x.root.Close()
	lower := strings.ToLower(src)
	switch {
	case strings.HasSuffix(lower, ".tar.gz"), strings.HasSuffix(lower, ".tgz"):
		f, err := os.Open(src)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		gz, err := gzip.NewReader(f)
		if err != nil {
			return 0, plugin.Permanent(fmt.Errorf("local: artifact is not gzip: %w", err))
		}
		return x.untar(gz)
	case strings.HasSuffix(lower, ".tar"):
		f, err := os.Open(src)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return x.untar(f)
	case strings.HasSuffix(lower, ".zip"):
		return x.unzip(src)
	}
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return 0, err
	}
	name := filepath.Base(src)
	if _, err := x.place(name); err != nil {
		return 0, err
	}
	return 1, x.file(name, name, in, st.Size(), 0o644)
}

// An extractor writes an archive's entries into a fresh directory through
// an os.Root, so that nothing is written outside it, and refuses for good
// what cannot make a release: a name that is absolute or has "..", a file
// named ".", two entries of different kinds at one path, an entry under a
// file or a link, a link leading out of the release, hard links, devices
// and pipes, more than maxUnpacked bytes or maxEntries entries.
type extractor struct {
	ctx     context.Context
	root    *os.Root
	entries int
	bytes   int64
	// maxZip bounds a zip's entries (plugins.local.max_zip_entries).
	maxZip int
}

func openExtractor(ctx context.Context, dst string) (*extractor, error) {
	root, err := os.OpenRoot(dst)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return &extractor{ctx: ctx, root: root}, nil
}

// refuse is the permanent failure of an entry.
func refuse(name, why string, args ...any) error {
	return plugin.Permanent(fmt.Errorf("local: artifact entry %q %s", name, fmt.Sprintf(why, args...)))
}

// place checks an entry's name and where it goes, and returns its path
// relative to the release ("." for the release itself, a "./" entry).
func (x *extractor) place(name string) (string, error) {
	if err := x.ctx.Err(); err != nil {
		return "", err
	}
	x.entries++
	if x.entries > maxEntries {
		return "", plugin.Permanent(fmt.Errorf("local: the artifact has more than %d entries (files, directories and links), the most a release may hold", maxEntries))
	}
	if name == "" {
		return "", refuse(name, "has no name")
	}
	if strings.HasPrefix(name, "/") || filepath.IsAbs(name) || filepath.VolumeName(name) != "" {
		return "", refuse(name, "is an absolute path: an entry's name must be relative to the release")
	}
	for _, el := range strings.Split(name, "/") {
		if el == ".." {
			return "", refuse(name, "has \"..\" in its path: an entry's name must stay inside the release")
		}
	}
	clean := path.Clean(name)
	// Each directory on the way must be a directory the archive made, not
	// a file nor a link (writing through a link could lead anywhere).
	parts := strings.Split(clean, "/")
	for i := 1; i < len(parts); i++ {
		pre := strings.Join(parts[:i], "/")
		st, err := x.root.Lstat(pre)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return "", x.fail(name, err)
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			return "", refuse(name, "is under %q, a link in the artifact: an entry must be at its real path, not through a link", pre)
		}
		if !st.IsDir() {
			return "", refuse(name, "is under %q, but the artifact has a file there, not a directory", pre)
		}
	}
	return clean, nil
}

// existing is the kind of what the archive already put at rel ("" for
// nothing).
func (x *extractor) existing(rel string) (string, error) {
	st, err := x.root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil
	case err != nil:
		return "", err
	case st.Mode()&fs.ModeSymlink != 0:
		return "link", nil
	case st.IsDir():
		return "directory", nil
	}
	return "file", nil
}

// fail turns an error of the file system at an entry into the step's
// error: a full disk or an I/O error may pass, so they are retried; what
// the archive itself asks for that cannot be done fails for good. Either
// names the entry, not the temporary directory.
func (x *extractor) fail(name string, err error) error {
	if cerr := x.ctx.Err(); cerr != nil {
		return cerr
	}
	msg := err.Error()
	var pe *fs.PathError
	if errors.As(err, &pe) {
		msg = pe.Err.Error()
	}
	e := fmt.Errorf("local: artifact entry %q could not be written: %s", name, msg)
	for _, transient := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EIO, syscall.EROFS, syscall.EMFILE, syscall.ENFILE, syscall.EINTR, syscall.EAGAIN, syscall.ENOMEM} {
		if errors.Is(err, transient) {
			return e
		}
	}
	return plugin.Permanent(e)
}

func (x *extractor) dir(name, rel string) error {
	if rel == "." {
		return nil
	}
	switch kind, err := x.existing(rel); {
	case err != nil:
		return x.fail(name, err)
	case kind == "file" || kind == "link":
		return refuse(name, "is a directory, but the artifact has a %s at that path too", kind)
	}
	if err := x.root.MkdirAll(rel, 0o755); err != nil {
		return x.fail(name, err)
	}
	return nil
}

// file writes size bytes of r at rel; a second file at one path replaces
// the first, as tar does.
func (x *extractor) file(name, rel string, r io.Reader, size int64, mode os.FileMode) error {
	if rel == "." {
		return refuse(name, "is a file named \".\": that is the release directory itself")
	}
	switch kind, err := x.existing(rel); {
	case err != nil:
		return x.fail(name, err)
	case kind == "directory" || kind == "link":
		return refuse(name, "is a file, but the artifact has a %s at that path too", kind)
	}
	x.bytes += size
	if size < 0 || x.bytes > maxUnpacked {
		return refuse(name, "takes the artifact past %d bytes unpacked, the most a release may hold", maxUnpacked)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := x.root.MkdirAll(dir, 0o755); err != nil {
			return x.fail(name, err)
		}
	}
	f, err := x.root.OpenFile(rel, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return x.fail(name, err)
	}
	src := &source{ctx: x.ctx, r: io.LimitReader(r, size)}
	_, err = io.Copy(f, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case src.err != nil && x.ctx.Err() != nil:
		return x.ctx.Err()
	case src.err != nil:
		return plugin.Permanent(fmt.Errorf("local: read artifact entry %q: %w", name, src.err))
	case err != nil:
		return x.fail(name, err)
	}
	return nil
}

// link makes rel a symbolic link to target, which must lead to a place
// inside the release: relative, its ".." first only, and no more of them
// than rel is deep (a ".." after a name could climb out through a link).
func (x *extractor) link(name, rel, target string) error {
	if rel == "." {
		return refuse(name, "is a link named \".\": that is the release directory itself")
	}
	out := func() error {
		return refuse(name, "is a link to %q, which leads out of the release: a link must stay inside it (relative, with \"..\" only at its start)", target)
	}
	if target == "" {
		return refuse(name, "is a link to nothing")
	}
	if strings.HasPrefix(target, "/") || filepath.IsAbs(target) || filepath.VolumeName(target) != "" {
		return out()
	}
	up, named := 0, false
	for _, el := range strings.Split(target, "/") {
		switch el {
		case "..":
			if named {
				return out()
			}
			up++
		case ".", "":
		default:
			named = true
		}
	}
	if up > strings.Count(rel, "/") {
		return out()
	}
	switch kind, err := x.existing(rel); {
	case err != nil:
		return x.fail(name, err)
	case kind != "":
		return refuse(name, "is a link, but the artifact has a %s at that path too", kind)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := x.root.MkdirAll(dir, 0o755); err != nil {
			return x.fail(name, err)
		}
	}
	if err := x.root.Symlink(target, rel); err != nil {
		return x.fail(name, err)
	}
	return nil
}

// source reads an entry's bytes, stopping when the deploy is cancelled,
// and keeps the error of the archive apart from the disk's.
type source struct {
	ctx context.Context
	r   io.Reader
	err error
}

func (s *source) Read(p []byte) (int, error) {
	if err := s.ctx.Err(); err != nil {
		s.err = err
		return 0, err
	}
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		s.err = err
	}
	return n, err
}

// counted fails once more than max bytes were read through it: the
// decompressed tar stream, whose headers and skipped data the file bound
// does not see.
type counted struct {
	r   io.Reader
	n   int64
	max int64
}

func (c *counted) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.max {
		return n, fmt.Errorf("the archive is more than %d bytes once decompressed", c.max)
	}
	return n, err
}

func (x *extractor) untar(r io.Reader) (int, error) {
	tr := tar.NewReader(&counted{r: r, max: 2*maxUnpacked + streamSlack})
	n := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			if cerr := x.ctx.Err(); cerr != nil {
				return n, cerr
			}
			return n, plugin.Permanent(fmt.Errorf("local: read artifact: %w", err))
		}
		if h.Typeflag == tar.TypeXGlobalHeader {
			continue // git archive's commit id: no entry
		}
		rel, err := x.place(h.Name)
		if err != nil {
			return n, err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			err = x.dir(h.Name, rel)
		case tar.TypeReg, tar.TypeGNUSparse:
			if err = x.file(h.Name, rel, tr, h.Size, os.FileMode(h.Mode)&0o755|0o600); err == nil {
				n++
			}
		case tar.TypeSymlink:
			err = x.link(h.Name, rel, h.Linkname)
		case tar.TypeLink:
			err = refuse(h.Name, "is a hard link to %q: a release holds files, directories and links; archive the file itself (tar --hard-dereference)", h.Linkname)
		case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
			err = refuse(h.Name, "is a device or a pipe: a release holds files, directories and links")
		default:
			err = refuse(h.Name, "has the tar type %q, which a release cannot hold (files, directories and links)", string(h.Typeflag))
		}
		if err != nil {
			return n, err
		}
	}
}

func (x *extractor) unzip(src string) (int, error) {
	if n, size, err := zipDirectory(src); err == nil {
		switch {
		case n > uint64(maxEntries):
			return 0, plugin.Permanent(fmt.Errorf("local: the artifact is a zip of %d entries (files, directories and links), more than the %d a release may hold", n, maxEntries))
		case n > uint64(x.maxZip):
			return 0, plugin.Permanent(fmt.Errorf("local: the artifact is a zip of %d entries (files, directories and links), more than the %d this server allows (plugins.local.max_zip_entries): a zip's whole directory is held in memory while it is unpacked; ship a .tar.gz, which is unpacked as it is read (up to %d entries), or ask the operators to raise the key", n, x.maxZip, maxEntries))
		case size > uint64(x.maxZip)*zipRecordBudget:
			return 0, plugin.Permanent(fmt.Errorf("local: the artifact is a zip whose directory takes %d bytes, more than the %d KiB an entry this server allows for up to %d entries (plugins.local.max_zip_entries): a zip's whole directory is held in memory while it is unpacked; its names, extra fields or comments are too long (ship a .tar.gz)", size, zipRecordBudget>>10, x.maxZip))
		}
	}
	zr, err := zip.OpenReader(src)
	if err != nil {
		return 0, plugin.Permanent(fmt.Errorf("local: artifact is not a zip: %w", err))
	}
	defer zr.Close()
	n := 0
	for _, f := range zr.File {
		rel, err := x.place(f.Name)
		if err != nil {
			return n, err
		}
		mode := f.Mode()
		switch {
		case mode.IsDir():
			err = x.dir(f.Name, rel)
		case mode&fs.ModeSymlink != 0:
			err = x.zipLink(f, rel)
		case mode.IsRegular():
			if f.UncompressedSize64 > uint64(maxUnpacked) {
				return n, refuse(f.Name, "takes the artifact past %d bytes unpacked, the most a release may hold", maxUnpacked)
			}
			var rc io.ReadCloser
			if rc, err = f.Open(); err != nil {
				return n, plugin.Permanent(fmt.Errorf("local: read artifact entry %q: %w", f.Name, err))
			}
			err = x.file(f.Name, rel, rc, int64(f.UncompressedSize64), mode&0o755|0o600)
			rc.Close()
			if err == nil {
				n++
			}
		default:
			err = refuse(f.Name, "is a device, a pipe or a socket (mode %s): a release holds files, directories and links", mode)
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// zipLink makes a zip's link entry, whose content is its target.
func (x *extractor) zipLink(f *zip.File, rel string) error {
	rc, err := f.Open()
	if err != nil {
		return plugin.Permanent(fmt.Errorf("local: read artifact entry %q: %w", f.Name, err))
	}
	defer rc.Close()
	target, err := io.ReadAll(io.LimitReader(rc, 4097))
	if err != nil {
		return plugin.Permanent(fmt.Errorf("local: read artifact entry %q: %w", f.Name, err))
	}
	if len(target) > 4096 {
		return refuse(f.Name, "is a link whose target is longer than 4096 bytes")
	}
	return x.link(f.Name, rel, string(target))
}

// zipRecordBudget is the bytes of a zip's directory allowed per entry of
// plugins.local.max_zip_entries: a record is 46 bytes and a name, often
// under 200 bytes even in a node_modules tree.
const zipRecordBudget = 1 << 10

// zipDirectory reads the number of entries and the size of the directory
// a zip's end record announces: archive/zip reads its whole directory into
// memory before the first entry, which for millions of entries (or long
// names) takes GiBs. An end record it cannot find is left to archive/zip
// to refuse.
func zipDirectory(src string) (entries, size uint64, err error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	const endLen, locatorLen = 22, 20
	tail := min(st.Size(), endLen+0xffff)
	buf := make([]byte, tail)
	if _, err := f.ReadAt(buf, st.Size()-tail); err != nil {
		return 0, 0, err
	}
	le := binary.LittleEndian
	for i := len(buf) - endLen; i >= 0; i-- {
		if le.Uint32(buf[i:]) != 0x06054b50 || i+endLen+int(le.Uint16(buf[i+20:])) != len(buf) {
			continue
		}
		n, size := uint64(le.Uint16(buf[i+10:])), uint64(le.Uint32(buf[i+12:]))
		if n != 0xffff && size != 0xffffffff && le.Uint32(buf[i+16:]) != 0xffffffff {
			return n, size, nil
		}
		// Zip64: the locator before the end record gives the offset of
		// the zip64 end record, which holds the count on 8 bytes.
		at := st.Size() - tail + int64(i) - locatorLen
		if at < 0 {
			return 0, 0, errors.New("no zip64 locator")
		}
		loc := make([]byte, locatorLen)
		if _, err := f.ReadAt(loc, at); err != nil || le.Uint32(loc) != 0x07064b50 {
			return 0, 0, errors.New("no zip64 locator")
		}
		end64 := make([]byte, 48)
		if _, err := f.ReadAt(end64, int64(le.Uint64(loc[8:]))); err != nil || le.Uint32(end64) != 0x06064b50 {
			return 0, 0, errors.New("no zip64 end record")
		}
		return le.Uint64(end64[32:]), le.Uint64(end64[40:]), nil
	}
	return 0, 0, errors.New("no end record")
}
