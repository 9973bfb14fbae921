package architecture_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/manent-io/manent"

// layers puts every package of the module in a layer: a package imports
// only packages of lower layers (docs/architecture.md draws them). A new
// package goes here, in the lowest layer its imports allow.
var layers = map[string]int{
	// The core: types every adapter shares, and leaves.
	"pkg/manent": 0, "pkg/budget": 0, "pkg/retry": 0, "pkg/stall": 0, "pkg/atomicfile": 0, "pkg/regularfile": 0, "pkg/yamlvalue": 0, "pkg/reltime": 0, "pkg/cronspec": 0, "pkg/version": 0, "pkg/suggest": 0,
	"pkg/plugin": 1, "pkg/urlpolicy": 1, "pkg/clusterstate": 1, "descriptor": 1,
	// Adapters to the outside: database, outbound HTTP, wire types, policy.
	"pkg/egress": 2, "pkg/api": 2, "pkg/store": 2, "pkg/governance": 2, "pkg/enginetest": 2,
	"pkg/envconfig": 3, "pkg/artifact": 3, "pkg/itsm": 3, "pkg/notify": 3, "pkg/auth": 3,
	"pkg/agent": 3, "pkg/kubetest": 3,
	// The plan, the plugins, admission, the engine.
	"pkg/plan": 4, "pkg/web": 4, "pkg/itsm/reference": 4, "plugins/local": 4, "plugins/script": 4,
	"plugins/http": 4, "plugins/external": 4, "plugins/clusterready": 4, "plugins/example-external": 4,
	"pkg/admit": 5, "plugins/kubernetes": 5,
	"pkg/engine": 6,
	// HTTP, the composition root, the binaries.
	"pkg/server":      7,
	"pkg/node":        8,
	"plugins/builtin": 9, "pkg/servercmd": 9, "pkg/cli": 9,
	"pkg/agentcmd": 10, "pkg/policycmd": 10, "cmd/manent-agent": 11, "cmd/manent-policy": 11,
	"pkg/servertest": 10, "cmd/manent": 10, "cmd/manent-server": 10, "scripts/itsm-server": 10,
	"pkg/architecture": 0, "deploy": 0, // test-only packages
	"pkg/childproc":   0, // test support: children that die with the test binary
	"scripts/rawdbos": 0, // DBOS alone, no package of the module
}

type pkg struct {
	dir     string   // relative to the module root
	imports []string // packages of this module, relative, sorted
	doc     string   // the package documentation
}

// load reads every package of the module (non-test files only).
func load(t *testing.T) []pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	byDir := map[string]*pkg{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "third_party" || name == "node_modules" || name == "bin") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // another module (tools/k8stest)
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		rel = filepath.ToSlash(rel)
		p := byDir[rel]
		if p == nil {
			p = &pkg{dir: rel}
			byDir[rel] = p
		}
		if f.Doc != nil {
			p.doc += f.Doc.Text()
		}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if rest, ok := strings.CutPrefix(path, module+"/"); ok && !slices.Contains(p.imports, rest) {
				p.imports = append(p.imports, rest)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []pkg
	for _, p := range byDir {
		sort.Strings(p.imports)
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].dir < out[j].dir })
	if len(out) < 20 {
		t.Fatalf("found %d packages: is the module root ../..?", len(out))
	}
	return out
}

// Each package imports only packages of lower layers.
func TestLayers(t *testing.T) {
	for _, p := range load(t) {
		l, ok := layers[p.dir]
		if !ok {
			t.Errorf("%s: not in the layers table of pkg/architecture: add it in the lowest layer its imports allow", p.dir)
			continue
		}
		for _, im := range p.imports {
			li, ok := layers[im]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which is not in the layers table", p.dir, im)
			case li >= l:
				t.Errorf("%s (layer %d) imports %s (layer %d): a package imports only lower layers", p.dir, l, im, li)
			}
		}
	}
}

var (
	importsSentence = regexp.MustCompile(`\b(?:It|The package) imports\b[^;]*?(?:[.;]\s|[.;]$)`)
	packageName     = regexp.MustCompile(`\b(?:pkg|plugins|cmd|scripts)/[a-z0-9][a-z0-9/-]*[a-z0-9]|\bdescriptor\b`)
	importsNothing  = regexp.MustCompile(`nothing of (?:this module|manent)|no package of this module`)
)

// Each package's documentation has a sentence "It imports …" that names
// exactly the packages of this module it imports ("It imports nothing of
// this module." when there are none).
func TestDocsNameImports(t *testing.T) {
	for _, p := range load(t) {
		doc := strings.Join(strings.Fields(p.doc), " ")
		s := importsSentence.FindString(doc + " ")
		if s == "" {
			t.Errorf("%s: its package documentation has no sentence \"It imports …\" naming the packages of this module it imports (%s)", p.dir, list(p.imports))
			continue
		}
		var named []string
		if !importsNothing.MatchString(s) {
			for _, n := range packageName.FindAllString(s, -1) {
				if !slices.Contains(named, n) {
					named = append(named, n)
				}
			}
		}
		sort.Strings(named)
		if !slices.Equal(named, p.imports) {
			t.Errorf("%s: its documentation says %q\n\tit names:   %s\n\tit imports: %s", p.dir, s, list(named), list(p.imports))
		}
	}
}

func list(s []string) string {
	if len(s) == 0 {
		return "nothing of this module"
	}
	return strings.Join(s, ", ")
}
