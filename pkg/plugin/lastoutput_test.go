package plugin_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
)

// A failed command's error ends with the last meaningful lines it printed:
// blank lines and rules skipped, colours taken out, control characters
// escaped, each line clipped, and every secret masked as the log masks it —
// also one that a colour code splits, and one past the bound of what is shown.
func TestLastOutput(t *testing.T) {
	const secret = "hunter2-s3cret-77"
	m := plugin.NewMasker([]plugin.Secret{{Where: "steps.migrate.with.env.DB_PASSWORD", Value: secret}})
	base := errors.New("script sh exited with status 1")

	run := func(t *testing.T, writes ...string) string {
		t.Helper()
		lw := plugin.NewLineWriter(nil)
		for _, w := range writes {
			_, _ = lw.Write([]byte(w))
		}
		lw.Flush()
		err := fmt.Errorf("wrapped: %w", plugin.WithOutput(base, lw.LastLines()))
		if err.Error() != "wrapped: "+base.Error() {
			t.Errorf("the error's own message shows the output: %q", err.Error())
		}
		got, ok := plugin.LastOutput(m, err)
		if !ok {
			t.Fatal("LastOutput found no lines")
		}
		if strings.Contains(got, secret) || strings.Contains(got, secret[:8]) {
			t.Errorf("the error shows the secret: %q", got)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			t.Errorf("the error holds a control character: %q", got)
		}
		return got
	}

	t.Run("last lines", func(t *testing.T) {
		got := run(t, "applying 1 of 2\napplying 2 of 2\n\n"+
			"psql: error: password authentication failed (password="+secret+")\n"+
			"\x1b[31mhint:\x1b[0m check\tDB_PASSWORD\n   \n-----\n")
		want := "wrapped: script sh exited with status 1; last output: applying 2 of 2 | " +
			"psql: error: password authentication failed (password=***) | hint: check\\tDB_PASSWORD"
		if got != want {
			t.Errorf("got  %q\nwant %q", got, want)
		}
	})
	t.Run("a progress meter", func(t *testing.T) {
		got := run(t, "  0%\r 45%\r100%\rcurl: (22) The requested URL returned error: 403\n")
		if got != "wrapped: script sh exited with status 1; last output: curl: (22) The requested URL returned error: 403" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("a colour code inside the secret", func(t *testing.T) {
		got := run(t, "token="+secret[:5]+"\x1b[1m"+secret[5:]+"\n")
		if got != "wrapped: script sh exited with status 1; last output: token=***" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("a long line is clipped after masking", func(t *testing.T) {
		got := run(t, strings.Repeat("x", plugin.LastOutputLineBytes-3)+secret+" and more\n")
		if !strings.HasSuffix(got, strings.Repeat("x", plugin.LastOutputLineBytes-3)+"***…") {
			t.Errorf("got %q", got)
		}
	})
	t.Run("a line in pieces is judged by its start", func(t *testing.T) {
		// Only the start of a line longer than a piece is kept: its later
		// pieces may begin inside a secret.
		got := run(t, "the cause\n"+strings.Repeat(" ", 70<<10), secret[6:]+" tail\n")
		if got != "wrapped: script sh exited with status 1; last output: the cause" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("at most the last lines", func(t *testing.T) {
		var b strings.Builder
		for i := range 10 {
			fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("w", 150))
		}
		got := run(t, b.String())
		if strings.Contains(got, "line 6") || !strings.Contains(got, "line 8") || !strings.Contains(got, "line 9") {
			t.Errorf("got %q", got)
		}
		if n := len(got) - len("wrapped: script sh exited with status 1; last output: "); n > plugin.LastOutputBytes+10 {
			t.Errorf("the lines take %d bytes, more than %d", n, plugin.LastOutputBytes)
		}
	})

	lw := plugin.NewLineWriter(nil)
	_, _ = lw.Write([]byte("\n  \n====\n"))
	lw.Flush()
	if got, ok := plugin.LastOutput(m, plugin.WithOutput(base, lw.LastLines())); ok {
		t.Errorf("nothing meaningful was printed, yet the error says %q", got)
	}
	if _, ok := plugin.LastOutput(m, base); ok {
		t.Error("an error without output has lines")
	}
}
