package external_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/plugins/external"
)

// A plugin that exits 0 with an answer that is no response of the protocol
// — `null`, an object without `ok` (`{"status": "ok"}`: another protocol, a
// typo) — is a broken plugin: the step fails at once and says what is
// wrong, where it was read as "failed without saying why" and retried.
func TestMalformedAnswerIsABrokenPlugin(t *testing.T) {
	for _, tc := range []struct{ name, answer, want string }{
		{"null", `null`, `plugin h: deploy: stdout is not a JSON response: "null" is not a JSON object`},
		{"a list", `[{"ok": true}]`, `plugin h: deploy: stdout is not a JSON response: json: cannot unmarshal array`},
		{"no ok", `{"status": "ok"}`, `plugin h: deploy: the response has no "ok" field: a response of manent.plugin/v1 is {"ok": true, "output": {…}} or {"ok": false, "error": "…"}`},
		{"ok null", `{"ok": null, "output": {}}`, `plugin h: deploy: the response has no "ok" field`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeScript(t, t.TempDir(), "manent-plugin-h", "cat >/dev/null; echo '"+tc.answer+"'\n", 0o755)
			p := &external.Plugin{Name: "h", Path: path}
			_, err := p.Deploy(context.Background(), pctx(t.TempDir(), "1.0", io.Discard, nil))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !plugin.IsPermanent(err) {
				t.Fatalf("answer %s: %v (permanent %t), want a permanent error containing %q", tc.answer, err, plugin.IsPermanent(err), tc.want)
			}
		})
	}
	// The same answer from a plugin that exits non-zero: no response, retried.
	path := writeScript(t, t.TempDir(), "manent-plugin-h", "cat >/dev/null; echo '{\"status\": \"down\"}'; exit 2\n", 0o755)
	p := &external.Plugin{Name: "h", Path: path}
	_, err := p.Deploy(context.Background(), pctx(t.TempDir(), "1.0", io.Discard, nil))
	if err == nil || plugin.IsPermanent(err) || !strings.Contains(err.Error(), `deploy exited with status 2 without a response (the response has no "ok" field`) {
		t.Fatalf("exit 2 with an answer without ok: %v (permanent %t), want a retryable error saying so", err, plugin.IsPermanent(err))
	}
}
