package egress_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// clientAllowed are the files that may build an HTTP client of their own:
// they talk to a manent server the user chose (the CLI and the Go API
// client) or are test helpers, never to a URL from a descriptor.
var clientAllowed = map[string]bool{
	"pkg/api/client.go":        true, // the Go client of the manent API
	"pkg/cli/factory.go":       true, // the CLI's transport to its server
	"pkg/kubetest/kubetest.go": true, // test helper: the local kube-apiserver
	"pkg/enginetest/relay.go":  true, // test helper: relays to a test server on loopback
}

// TestNoOutboundBypass scans the module's non-test Go files: outside
// pkg/egress, nothing may use http.DefaultClient, http.DefaultTransport,
// the package-level http.Get/Head/Post/PostForm, or build an http.Client
// or http.Transport (except the files of clientAllowed), so every outbound
// request goes through a policy.
func TestNoOutboundBypass(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	scanned := 0
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// third_party holds DBOS (its own outbound requests are its
			// business); tools/ holds other modules.
			if rel == "pkg/egress" || rel == "third_party" || rel == "tools" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		scanned++
		httpName := ""
		for _, imp := range f.Imports {
			if imp.Path.Value == `"net/http"` {
				httpName = "http"
				if imp.Name != nil {
					httpName = imp.Name.Name
				}
			}
		}
		if httpName == "" {
			return nil
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); !ok || id.Name != httpName {
				return true
			}
			switch sel.Sel.Name {
			case "DefaultTransport":
				// A client of the user's own server may start from the
				// default transport's settings (a clone, not the shared one).
				if !clientAllowed[rel] {
					t.Errorf("%s uses http.%s: send through a pkg/egress client", rel, sel.Sel.Name)
				}
			case "DefaultClient", "Get", "Head", "Post", "PostForm":
				t.Errorf("%s uses http.%s: send through a pkg/egress client", rel, sel.Sel.Name)
			case "Client", "Transport":
				if !clientAllowed[rel] {
					if _, isType := n.(*ast.SelectorExpr); isType && builds(f, sel) {
						t.Errorf("%s builds an http.%s: use egress.New", rel, sel.Sel.Name)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if scanned < 50 {
		t.Fatalf("scanned %d files: is the module root right?", scanned)
	}
}

// builds reports whether sel is the type of a composite literal in f
// (http.Client{…}, &http.Client{…}).
func builds(f *ast.File, sel *ast.SelectorExpr) bool {
	found := false
	ast.Inspect(f, func(n ast.Node) bool {
		if cl, ok := n.(*ast.CompositeLit); ok && cl.Type == sel {
			found = true
		}
		return !found
	})
	return found
}
