package builtin_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/plugins/local"
	"github.com/manent-io/manent/plugins/script"
)

// Every deploy.yml of the documentation (a yaml block of docs/*.md or
// README.md with apiVersion: manent/v1) passes the descriptor's checks,
// and its target and script steps their plugin's, as a configured server
// checks them: docs/descriptor.md's `target: {plugin: local}` was refused
// by any server with a configuration (the local plugin needs with.dir
// there; only local trial mode gives one), and the one test of a
// documented descriptor, the README's minimal one, ran on a trial server.
// A block that is a fragment (no top-level apiVersion and application) is
// not checked.
func TestDocumentedDescriptorsPassTheirPlugins(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	block := regexp.MustCompile("(?ms)^```ya?ml\n(.*?)^```")
	whole, app := regexp.MustCompile(`(?m)^apiVersion: manent/v1`), regexp.MustCompile(`(?m)^application:`)
	targets := map[string]interface{ Validate(map[string]any) error }{
		"local":  local.New(local.Options{}), // any absolute dir: plugins.local.root is the server's
		"script": script.New(script.Options{}),
	}
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range block.FindAllSubmatchIndex(data, -1) {
			text := data[m[2]:m[3]]
			if !whole.Match(text) || !app.Match(text) {
				continue // a fragment, or another file holding one
			}
			line := 1 + strings.Count(string(data[:m[2]]), "\n")
			checked++
			d, err := descriptor.Parse(text)
			if err != nil {
				t.Errorf("%s (line %d): %v", filepath.Base(f), line, err)
				continue
			}
			if d.Target != nil {
				if p, ok := targets[d.Target.Plugin]; ok {
					if err := p.Validate(d.Target.With); err != nil {
						t.Errorf("%s (line %d): target %s: %v", filepath.Base(f), line, d.Target.Plugin, err)
					}
				}
			}
			for _, s := range d.Steps {
				if s.Plugin == "script" {
					if err := targets["script"].Validate(s.With); err != nil {
						t.Errorf("%s (line %d): step %s: %v", filepath.Base(f), line, s.Name, err)
					}
				}
			}
		}
	}
	t.Logf("%d documented descriptors checked", checked)
	if checked < 3 {
		t.Fatalf("only %d documented descriptors found: the extraction is broken", checked)
	}
}
