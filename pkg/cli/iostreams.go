package cli

import (
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/lipgloss"
	"github.com/mattn/go-isatty"
	"github.com/muesli/termenv"

	"github.com/manent-io/manent/pkg/clusterstate"
	"github.com/manent-io/manent/pkg/manent"
)

// IOStreams is the one place commands write to. It knows whether stdout and
// stderr are terminals and whether colour is wanted, so commands never look
// at the environment themselves: tables and colour on a TTY (unless NO_COLOR
// is set), plain aligned text without escape codes when piped; progress goes
// to ErrOut.
//
// Out and ErrOut never pass on a control character or escape sequence
// other than the CLI's own colours (see terminalWriter); RawOut is stdout
// as it is, for `manent logs --raw` only.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	RawOut io.Writer

	// errRaw is stderr as it is, for the status line of a waiting
	// command only (see statusLine), which sanitises its text itself.
	errRaw io.Writer

	stdoutTTY bool
	stderrTTY bool
	color     bool
	renderer  *lipgloss.Renderer
}

// NewIOStreams wraps the given streams. A stream is a terminal when it is an
// *os.File attached to one, or when MANENT_FORCE_TTY is set to a true value
// (tests use it to exercise terminal output). Colour needs a terminal stdout,
// NO_COLOR unset (or empty) and TERM other than "dumb".
func NewIOStreams(in io.Reader, out, errOut io.Writer, getenv func(string) string) *IOStreams {
	forced := isTrue(getenv("MANENT_FORCE_TTY"))
	s := &IOStreams{
		In:        in,
		Out:       out,
		ErrOut:    errOut,
		stdoutTTY: forced || isTerminal(out),
		stderrTTY: forced || isTerminal(errOut),
	}
	s.color = s.stdoutTTY && getenv("NO_COLOR") == "" && getenv("TERM") != "dumb"
	s.RawOut = out
	s.errRaw = errOut
	s.Out = &terminalWriter{w: out, allowSGR: s.color}
	s.ErrOut = &terminalWriter{w: errOut, allowSGR: s.color}

	// The renderer never probes the terminal: the profile and background are
	// fixed here, so rendering is deterministic and cannot block on a query.
	s.renderer = lipgloss.NewRenderer(out)
	s.renderer.SetHasDarkBackground(true)
	if s.color {
		s.renderer.SetColorProfile(termenv.ANSI)
	} else {
		s.renderer.SetColorProfile(termenv.Ascii)
	}
	return s
}

func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

func isTrue(v string) bool {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true
	}
	return false
}

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether stderr is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// ColorEnabled reports whether output may carry colour escape codes.
func (s *IOStreams) ColorEnabled() bool { return s.color }

// style returns a style bound to the streams' renderer: it renders colour
// only when colour is enabled.
func (s *IOStreams) style() lipgloss.Style { return s.renderer.NewStyle() }

// Bold renders text in bold on a colour terminal. Like Faint and State, it
// sanitises text first: styles are the CLI's, never the server's.
func (s *IOStreams) Bold(text string) string {
	text = safeText(text)
	if !s.color {
		return text
	}
	return s.style().Bold(true).Render(text)
}

// Faint renders secondary text dimmed on a colour terminal.
func (s *IOStreams) Faint(text string) string {
	text = safeText(text)
	if !s.color {
		return text
	}
	return s.style().Faint(true).Render(text)
}

// State renders a deploy or step state in the colour of its outcome.
func (s *IOStreams) State(state string) string {
	state = safeText(state)
	if !s.color || state == "" {
		return state
	}
	return s.style().Foreground(stateColor(state)).Render(state)
}

// stateColor is green for success, red for failures, yellow for the other
// final states, cyan for running and blue for waiting. A workload's state
// (clusterstate) is coloured alike: CURRENT green, FAILED red, DRIFTED
// yellow (a warning: changed outside manent), DEPLOYING cyan.
func stateColor(state string) lipgloss.Color {
	switch state {
	case string(manent.StateSuccess), clusterstate.StateCurrent:
		return lipgloss.Color("2")
	case string(manent.StateError), string(manent.StateMaxRecoveryAttemptsExceeded), string(manent.StateDependencyFailed),
		clusterstate.StateFailed:
		return lipgloss.Color("1")
	case string(manent.StateCancelled), string(manent.StateRejected), string(manent.StateExpired), string(manent.StepSkipped),
		clusterstate.StateDrifted:
		return lipgloss.Color("3")
	case string(manent.StatePending), string(manent.StepRunning), clusterstate.StateDeploying:
		return lipgloss.Color("6")
	}
	return lipgloss.Color("4")
}
