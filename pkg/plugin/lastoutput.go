package plugin

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The last lines a failed command printed, carried into its step's error
// (OutputError) so that `status`, `deploy --wait`, callbacks and the web
// page say why it failed without `logs`.
const (
	// LastOutputLines is the most lines an error carries.
	LastOutputLines = 3
	// LastOutputLineBytes is the most bytes of one line an error shows.
	LastOutputLineBytes = 200
	// LastOutputBytes bounds the lines shown together.
	LastOutputBytes = 400
	// keptLineBytes is the most bytes of a line kept for the error before it
	// is masked: more than shown, so that a secret that starts before the
	// bound of what is shown is still whole when it is masked.
	keptLineBytes = 4 << 10
)

// OutputLine is one line a command printed, as it printed it (only cut).
type OutputLine struct {
	Text string
	// Cut: the line went on past Text.
	Cut bool
}

// lastLines keeps the last meaningful lines written (WithOutput's lines).
type lastLines struct {
	lines []OutputLine
	// open: a piece of the line still being written was judged already
	// (a line longer than LineWriter forwards at once).
	open bool
}

// add keeps line (a whole line, or the start of one when more follows) if
// it means something.
func (t *lastLines) add(line []byte, more bool) {
	if t.open {
		// A later piece of a line whose start was judged already: never
		// kept, as a secret may begin before it (the log, too, shows only
		// a line's start).
		t.open = more
		return
	}
	t.open = more
	if !meaningful(line) {
		return
	}
	l := OutputLine{Text: string(line), Cut: more}
	if len(line) > keptLineBytes {
		l = OutputLine{Text: string(line[:keptLineBytes]), Cut: true}
	}
	t.lines = append(t.lines, l)
	if len(t.lines) > LastOutputLines {
		t.lines = append(t.lines[:0], t.lines[len(t.lines)-LastOutputLines:]...)
	}
}

// meaningful: a line with a letter or a digit once its terminal escape
// sequences are taken out (not blank, not a rule of dashes).
func meaningful(line []byte) bool {
	s := stripEscapes(string(line))
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// OutputError is a command's failure with the last meaningful lines it
// printed. Its message is the failure's alone: the lines hold what the
// command printed unmasked, and are shown only through LastOutput, which
// masks them as the step's log is masked.
type OutputError struct {
	Err   error
	Lines []OutputLine
	// What names the lines in the message ("": "last output").
	What string
}

func (e *OutputError) Error() string { return e.Err.Error() }
func (e *OutputError) Unwrap() error { return e.Err }

// WithOutput returns err with the lines (nil or no lines: err as it is).
func WithOutput(err error, lines []OutputLine) error {
	if err == nil || len(lines) == 0 {
		return err
	}
	return &OutputError{Err: err, Lines: lines}
}

// LastOutput returns err's message followed by the last lines its command
// printed (an OutputError in its chain), masked by m (nil: nothing to
// mask) as the step's log is, terminal escape sequences taken out, control
// characters escaped and each line clipped: `script sh exited with status
// 1; last output: psql: error: …`. An error without lines returns "", false.
func LastOutput(m *Masker, err error) (string, bool) {
	var oe *OutputError
	if !errors.As(err, &oe) || len(oe.Lines) == 0 {
		return "", false
	}
	var shown []string
	total := 0
	for i := len(oe.Lines) - 1; i >= 0; i-- {
		s := showLine(m, oe.Lines[i])
		if s == "" {
			continue
		}
		if len(shown) > 0 && total+len(s) > LastOutputBytes {
			break
		}
		shown = append(shown, s)
		total += len(s)
	}
	if len(shown) == 0 {
		return "", false
	}
	for i, j := 0, len(shown)-1; i < j; i, j = i+1, j-1 {
		shown[i], shown[j] = shown[j], shown[i]
	}
	what := oe.What
	if what == "" {
		what = "last output"
	}
	return fmt.Sprintf("%s; %s: %s", err.Error(), what, strings.Join(shown, " | ")), true
}

// WithResponse returns err with the start of an HTTP response's body (the
// first bytes read of it; truncated: more followed) as its lines, named
// "response": `…: got 503, want 200; response: database is down`. m masks
// the lines first (the credentials of the URL asked, which the step's
// masker does not know).
func WithResponse(err error, m *Masker, body []byte, truncated bool) error {
	if err == nil || len(body) == 0 {
		return err
	}
	lw := NewLineWriter(nil)
	if i := strings.LastIndexByte(string(body), '\n'); truncated && i >= 0 {
		body = body[:i] // whole lines only
		truncated = false
	}
	_, _ = lw.Write(body)
	lw.Flush()
	lines := lw.LastLines()
	for i := range lines {
		lines[i].Cut = lines[i].Cut || (truncated && i == len(lines)-1)
		if lines[i].Cut {
			lines[i].Text = m.MaskCut(lines[i].Text)
		} else {
			lines[i].Text = m.Mask(lines[i].Text)
		}
	}
	if len(lines) == 0 {
		return err
	}
	return &OutputError{Err: err, Lines: lines, What: "response"}
}

// showLine is one line as an error shows it: masked (before and after its
// escape sequences are taken out, so that none hides a secret), of a line
// rewritten with carriage returns the last text, its control characters
// escaped, clipped to LastOutputLineBytes.
func showLine(m *Masker, l OutputLine) string {
	mask := m.Mask
	if l.Cut {
		mask = m.MaskCut
	}
	s := mask(stripEscapes(mask(strings.ToValidUTF8(l.Text, "\uFFFD"))))
	if i := strings.LastIndexByte(s, '\r'); i >= 0 && meaningful([]byte(s[i+1:])) {
		// A line a progress meter rewrote: what a terminal shows of it.
		s = s[i+1:]
	}
	s = strings.TrimSpace(escapeControls(s))
	if len(s) > LastOutputLineBytes || l.Cut {
		cut := s[:min(len(s), LastOutputLineBytes)]
		for len(cut) > 0 {
			if r, n := utf8.DecodeLastRuneInString(cut); r != utf8.RuneError || n != 1 {
				break
			}
			cut = cut[:len(cut)-1]
		}
		s = cut + "…"
	}
	return s
}

// stripEscapes takes out terminal escape sequences (colours: ESC [ … m)
// and carriage-return overwrites are left to escapeControls.
func stripEscapes(s string) string {
	if !strings.Contains(s, "\x1b") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != 0x1b {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '[' {
			// CSI: parameters and intermediates, then one final byte.
			j := i + 2
			for j < len(s) && s[j] >= 0x20 && s[j] <= 0x3f {
				j++
			}
			if j < len(s) && s[j] >= 0x40 && s[j] <= 0x7e {
				i = j
				continue
			}
		}
		b.WriteByte(s[i]) // escaped by escapeControls
	}
	return b.String()
}

// escapeControls writes every control character as an escape (\t, \x1b,
// \u0085), so that an error stays one line and shows what was printed.
func escapeControls(s string) string {
	if strings.IndexFunc(s, unicode.IsControl) < 0 {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\n':
			b.WriteString(`\n`)
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
