package envconfig

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/manent-io/manent/pkg/regularfile"
)

// Files reads environment configuration from a directory:
//
//	<Dir>/<environment>.yaml                 the environment
//	<Dir>/<environment>/<application>.yaml   optional, one application's overrides
//
// (.yml is accepted too, but not both spellings of one file). The
// application file is deep-merged over the environment file: mappings
// merge key by key, any other value replaces; a target that names another
// plugin replaces the environment's target whole. When neither file exists
// the environment has no configuration: Get returns a nil *Config and no
// error.
//
// The Revision is the SHA-256, in hex, of the `sha256sum` listing of the
// files read, names relative to Dir, environment file first:
// `cd <Dir> && sha256sum prod.yaml prod/billing.yaml | sha256sum`.
//
// Files are read on every Get, so an edit applies to the next deploy.
type Files struct {
	Dir string
}

// Get reads the configuration of application in environment. YAML and
// content mistakes are reported as "<file>:<line>: <path>: <message>",
// every one of them.
func (f Files) Get(ctx context.Context, application, environment string) (*Config, Revision, error) {
	rev := Revision{Source: "files:" + f.Dir}
	if err := ctx.Err(); err != nil {
		return nil, rev, err
	}
	if err := checkNames(application, environment); err != nil {
		return nil, rev, err
	}
	var (
		docs    []*yamlDoc
		names   []string
		listing strings.Builder
	)
	for _, base := range []string{environment, environment + "/" + application} {
		name, data, err := f.read(base)
		if err != nil {
			return nil, rev, fmt.Errorf("environment configuration %s: %w", rev.Source, err)
		}
		if data == nil {
			continue
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&listing, "%s  %s\n", hex.EncodeToString(sum[:]), name)
		full := filepath.Join(f.Dir, filepath.FromSlash(name))
		doc, err := parseYAML(full, data)
		if err != nil {
			return nil, rev, fmt.Errorf("environment configuration %s: %w", rev.Source, err)
		}
		if ps := checkDocument(doc.value, true); len(ps) > 0 {
			return nil, rev, fmt.Errorf("environment configuration %s: %s", rev.Source,
				describe(ps, func(p problem) string { return fmt.Sprintf("%s:%d", full, doc.line(p.path)) }))
		}
		docs = append(docs, doc)
		names = append(names, full)
	}
	if len(docs) == 0 {
		return nil, rev, nil
	}
	sum := sha256.Sum256([]byte(listing.String()))
	rev.Revision = hex.EncodeToString(sum[:])

	merged := docs[0].value
	for _, d := range docs[1:] {
		merged = mergeDocuments(merged, d.value)
	}
	if ps := checkDocument(merged, false); len(ps) > 0 {
		return nil, rev, fmt.Errorf("environment configuration %s: %s", rev.Source, describe(ps, func(p problem) string {
			// Blame the file that sets most of the path; the later one on a tie.
			best, depth := len(docs)-1, -1
			for i, d := range docs {
				n := len(p.path)
				for n > 0 && !d.has(p.path[:n]) {
					n--
				}
				if n >= depth {
					best, depth = i, n
				}
			}
			return fmt.Sprintf("%s:%d", names[best], docs[best].line(p.path))
		}))
	}
	cfg, err := decode(merged)
	if err != nil {
		return nil, rev, fmt.Errorf("environment configuration %s: %w", rev.Source, err)
	}
	return cfg, rev, nil
}

// read returns the name (relative to Dir, slash-separated) and content of
// base.yaml or base.yml; nil data when neither exists.
func (f Files) read(base string) (string, []byte, error) {
	var found []string
	var data []byte
	for _, name := range []string{base + ".yaml", base + ".yml"} {
		b, err := readFile(filepath.Join(f.Dir, filepath.FromSlash(name)))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return name, nil, err
		}
		found = append(found, name)
		data = b
	}
	switch len(found) {
	case 0:
		return "", nil, nil
	case 1:
		return found[0], data, nil
	}
	return "", nil, fmt.Errorf("both %s and %s exist: keep one", found[0], found[1])
}

// readFile reads at most maxSize bytes of a regular file; the empty file
// reads as an empty, non-nil slice. It opens without waiting (a pipe
// opened for reading waits for a writer) and refuses what is no file.
func readFile(name string) ([]byte, error) {
	b, err := regularfile.Read(name, maxSize, regularfile.FollowLinks)
	var notRegular *regularfile.NotRegularError
	switch {
	case errors.As(err, &notRegular) && notRegular.Mode.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a YAML file", name)
	case errors.As(err, &notRegular):
		return nil, fmt.Errorf("%s is no regular file (%s), not a YAML file", name, notRegular.Mode)
	case errors.Is(err, regularfile.ErrTooLarge):
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxSize)
	}
	return b, err
}

// mergeDocuments deep-merges the generic document over into base (both
// checked); a target naming another plugin replaces base's target whole.
func mergeDocuments(base, over any) any {
	om, ok := over.(map[string]any)
	if !ok {
		return base
	}
	bm, ok := base.(map[string]any)
	if !ok {
		return clone(om)
	}
	out := mergeMaps(bm, om)
	ot, oOK := om["target"].(map[string]any)
	bt, bOK := bm["target"].(map[string]any)
	if oOK && bOK && ot["plugin"] != nil && !equal(ot["plugin"], bt["plugin"]) {
		out["target"] = clone(ot)
	}
	return out
}
