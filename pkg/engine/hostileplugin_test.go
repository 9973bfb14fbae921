package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/engine"
	"github.com/manent-io/manent/pkg/enginetest"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/node"
)

// A plugin's error is text the database must be able to hold: an external
// plugin answering an error with a NUL character or invalid UTF-8 (which
// PostgreSQL refuses in a text column), or 4 MiB of it, fails its step
// with that error, kept readable and bounded — on PostgreSQL the step's end
// could not be recorded, and the deploy said "step \"evil\" failed: failed".
func TestHostilePluginErrorIsKept(t *testing.T) {
	t.Parallel()
	enginetest.Databases(t, func(t *testing.T, dbURL string) {
		bin := t.TempDir()
		script := `#!/bin/sh
req=$(cat)
case "$req" in *'"action":"validate"'*) echo '{"ok": true}'; exit 0;; esac
case "$MANENT_STEP" in
evil) printf '{"ok": false, "permanent": true, "error": "bad\\u0000thing \\u001b[2J \377\376 end"}\n';;
long) printf '{"ok": false, "permanent": true, "error": "'; head -c 3000000 /dev/zero | tr '\0' e; printf '"}\n';;
esac
`
		if err := os.WriteFile(filepath.Join(bin, "manent-plugin-hostile"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		f := newFixture(t, dbURL, 1, func(c *node.Config) { c.Plugins.Path = []string{bin} })
		url, _ := f.artifact("app-1", "x")
		for _, name := range []string{"evil", "long"} {
			id := f.submit(descriptorYAML("billing", "staging-"+name, "1", url, "", `steps:
  - {name: `+name+`, after: deploy, plugin: hostile}
`))
			rec := f.wait(id, time.Minute)
			s := step(t, rec, name)
			for what, text := range map[string]string{"step error": s.Error, "deploy error": rec.Error} {
				if !utf8.ValidString(text) || strings.ContainsRune(text, 0) || len(text) > engine.MaxStepError+200 {
					t.Fatalf("%s: %s %.300q (%d bytes): want valid UTF-8 without NUL, at most %d bytes", name, what, text, len(text), engine.MaxStepError)
				}
			}
			if rec.State != manent.StateError || s.State != manent.StepError {
				t.Fatalf("%s: deploy %s, step %s (%q), want both ERROR", name, rec.State, s.State, s.Error)
			}
			want := map[string]string{
				"evil": "plugin hostile: run: bad\\x00thing \x1b[2J \uFFFD\uFFFD end",
				"long": "plugin hostile: run: eeee",
			}[name]
			if !strings.HasPrefix(s.Error, want) || !strings.Contains(rec.Error, want) {
				t.Fatalf("%s: step error %.200q, deploy error %.200q: want them to start with %q", name, s.Error, rec.Error, want)
			}
			if name == "long" && !strings.HasSuffix(s.Error, "… [error cut: 3000021 bytes, at most 8192 kept]") {
				t.Fatalf("long: step error ends %q", s.Error[max(0, len(s.Error)-80):])
			}
		}
	})
}
