package web

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/manent-io/manent/pkg/manent"
)

func TestANSISpans(t *testing.T) {
	tests := []struct {
		in   string
		want []logSpan
	}{
		{"plain <b>", []logSpan{{"", "plain <b>"}}},
		{"\x1b[31mred\x1b[0m plain", []logSpan{{"ansi-fg-1", "red"}, {"", " plain"}}},
		{"\x1b[1;92mok\x1b[22m!\x1b[m", []logSpan{{"ansi-bold ansi-fg-10", "ok"}, {"ansi-fg-10", "!"}}},
		{"\x1b[44;4mx\x1b[39;49;24my", []logSpan{{"ansi-underline ansi-bg-4", "x"}, {"", "y"}}},
		// 256 colours and true colour are dropped, with their parameters.
		{"\x1b[38;5;196mx\x1b[48;2;1;2;3;1my", []logSpan{{"", "x"}, {"ansi-bold", "y"}}},
		// Other sequences vanish: cursor, clear, OSC title and hyperlink, charset.
		{"a\x1b[2J\x1b[1;1Hb\x1b]0;title\x07c\x1b]8;;https://evil.example/\x1b\\d\x1b]8;;\x1b\\\x1b(Be\x1bc", []logSpan{{"", "abcde"}}},
		// Cut sequences at the end of the line vanish too.
		{"x\x1b[31", []logSpan{{"", "x"}}},
		{"x\x1b]8;;https://evil", []logSpan{{"", "x"}}},
		{"x\x1b", []logSpan{{"", "x"}}},
		// A sequence that changes nothing makes no run.
		{"a\x1b[31m\x1b[0mb", []logSpan{{"", "ab"}}},
	}
	for _, tt := range tests {
		got := ansiSpans(tt.in)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ansiSpans(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// hostileANSI are lines of 1 MiB built against ansiSpans.
var hostileANSI = map[string]string{
	"colour changes": strings.Repeat("x\x1b[31my\x1b[0m", 1<<20/10),
	"parameters":     "\x1b[" + strings.Repeat("1;", 1<<19) + "31mz",
	"unterminated":   "\x1b]" + strings.Repeat("a", 1<<20),
}

// A hostile line — 1 MiB of colour changes, or one sequence of 1 MiB of
// parameters — makes at most maxSpans elements, and no escape character
// reaches the page. Its cost, linear in its length, is measured by
// BenchmarkANSISpansHostile (ns per byte), not timed here.
func TestANSISpansHostile(t *testing.T) {
	for name, line := range hostileANSI {
		spans := ansiSpans(line)
		if len(spans) > maxSpans {
			t.Errorf("%s: %d runs, at most %d", name, len(spans), maxSpans)
		}
		for _, s := range spans {
			if strings.ContainsRune(s.Text, 0x1b) {
				t.Fatalf("%s: an escape character is left in %q", name, s.Text[:min(len(s.Text), 40)])
			}
		}
	}
}

// The deploy page renders a line's colours as classes and its text as
// text: no escape character, no markup of the step's.
func TestDeployPageLogColours(t *testing.T) {
	pages, err := parsePages("")
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{pages: pages}
	d := manent.Deployment{ID: "dpl_X", Application: "billing", Environment: "prod", Version: "1", State: manent.StateSuccess}
	lines := []manent.LogLine{{Seq: 1, Step: "deploy", Text: "\x1b[1;31mfailed <img src=x>\x1b[0m done"}}
	p := &pageData{Title: "t", User: &manent.Identity{Subject: "token:bob"}, CSRF: "c", Data: deployView{D: d, Lines: lines}}
	rec := httptest.NewRecorder()
	h.render(rec, httptest.NewRequest(http.MethodGet, "/deployments/dpl_X", nil), "deployment", http.StatusOK, p)
	body := rec.Body.String()
	want := `<span class="ansi-bold ansi-fg-1">failed &lt;img src=x&gt;</span> done`
	if !strings.Contains(body, want) {
		t.Errorf("no %q in the page:\n%s", want, body)
	}
	if strings.Contains(body, "\x1b") || strings.Contains(body, "[1;31m") {
		t.Error("the escape sequence reaches the page")
	}
}

// BenchmarkANSISpansHostile prints what a hostile 1 MiB line costs
// (ns/byte stays flat as the line grows when the parse is linear).
func BenchmarkANSISpansHostile(b *testing.B) {
	for name, line := range hostileANSI {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				ansiSpans(line)
			}
		})
	}
}
