package engine

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/manent-io/manent/pkg/plugin"
)

// A line longer than MaxLogLine is cut on a character boundary and says
// how long it was; the writer never holds more than MaxLogLine of a line,
// however much comes without a newline.
func TestLogLineCut(t *testing.T) {
	l := &logWriter{}
	// "é" is two bytes: the cut falls in the middle of one.
	long := "x" + strings.Repeat("é", MaxLogLine)
	for i := 0; i < 64; i++ { // 64 × 32 KiB, no newline
		if _, err := l.Write([]byte(long)); err != nil {
			t.Fatal(err)
		}
		if len(l.buf) > MaxLogLine {
			t.Fatalf("holding %d bytes of one line, want at most %d", len(l.buf), MaxLogLine)
		}
	}
	_, _ = l.Write([]byte("\nshort\n"))
	got := l.take()
	if len(got) != 2 {
		t.Fatalf("%d lines, want 2: %q", len(got), got)
	}
	text, suffix := got[0].Text, fmt.Sprintf(" … [line cut: %d bytes, at most %d kept]", 64*len(long), MaxLogLine)
	if !strings.HasSuffix(text, suffix) {
		t.Fatalf("cut line ends %q, want %q", text[max(0, len(text)-80):], suffix)
	}
	kept := strings.TrimSuffix(text, suffix)
	if !utf8.ValidString(kept) || len(kept) > MaxLogLine || len(kept) < MaxLogLine-utf8.UTFMax {
		t.Fatalf("kept %d bytes (valid UTF-8: %t), want just under %d", len(kept), utf8.ValidString(kept), MaxLogLine)
	}
	if got[1].Text != "short" {
		t.Fatalf("next line %q, want short", got[1].Text)
	}
}

// A secret is masked in a log line however the command wrote it: through
// the script plugin's line writer, in pieces, in a line cut at MaxLogLine
// across the secret (its start is the end of the part kept), and in a line
// longer than the line writer's 64 KiB pieces with the secret across two.
func TestLogLineMasksSecrets(t *testing.T) {
	const secret = "s3cret-0123456789abcdef"
	l := &logWriter{mask: plugin.NewMasker([]plugin.Secret{{Where: "with.env.TOKEN", Value: secret}})}
	lw := plugin.NewLineWriter(l)
	write := func(s string) {
		for len(s) > 0 { // in pieces of 7 bytes, as a pipe may deliver them
			n := min(7, len(s))
			_, _ = lw.Write([]byte(s[:n]))
			s = s[n:]
		}
	}
	write("token=" + secret + "\n")
	write(strings.Repeat("x", MaxLogLine-10) + secret + "\n")
	write(strings.Repeat("y", 64<<10-10) + secret + " tail\n")
	lw.Flush()
	got := l.take()
	if len(got) != 3 {
		t.Fatalf("%d lines, want 3: a long line is one line: %.200q", len(got), got)
	}
	for i, e := range got {
		if strings.Contains(e.Text, secret[:6]) || strings.Contains(e.Text, secret[len(secret)-6:]) {
			t.Errorf("line %d shows a part of the secret: %q", i, e.Text[max(0, len(e.Text)-200):])
		}
	}
	if got[0].Text != "token=***" {
		t.Errorf("line 0 = %q, want token=***", got[0].Text)
	}
	if !strings.HasPrefix(got[1].Text, strings.Repeat("x", MaxLogLine-10)+"*** … [line cut:") {
		t.Errorf("line 1 ends %q: the secret's start at the cut should be masked", got[1].Text[len(got[1].Text)-80:])
	}
}

// An attempt keeps MaxStepLogLines lines, says at once that it stopped
// keeping, and at its end how much it left out.
func TestStepLogLimit(t *testing.T) {
	l := &logWriter{budget: &logBudget{}}
	const extra = 1234
	var b strings.Builder
	for i := 0; i < MaxStepLogLines+extra; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if _, err := l.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	got := l.take()
	if len(got) != MaxStepLogLines+2 {
		t.Fatalf("%d lines kept, want %d and two notices", len(got), MaxStepLogLines)
	}
	if last := got[MaxStepLogLines-1].Text; last != fmt.Sprintf("line %d", MaxStepLogLines-1) {
		t.Fatalf("last kept line %q", last)
	}
	notice := got[MaxStepLogLines].Text
	if !strings.Contains(notice, "this step's log limit (20000 lines or 4 MiB per attempt) is reached") {
		t.Fatalf("notice %q", notice)
	}
	dropped := 0
	for i := MaxStepLogLines; i < MaxStepLogLines+extra; i++ {
		dropped += len(fmt.Sprintf("line %d\n", i))
	}
	want := fmt.Sprintf("… %d more lines (%d bytes) of output not kept: this step's log limit", extra, dropped)
	if end := got[len(got)-1].Text; !strings.HasPrefix(end, want) {
		t.Fatalf("last line %q, want it to start %q", end, want)
	}
}

// The steps of one deploy share MaxDeployLogBytes: once it is spent, the
// next attempt keeps nothing and says why.
func TestDeployLogLimit(t *testing.T) {
	budget := &logBudget{}
	line := strings.Repeat("y", MaxLogLine-1) + "\n"
	perAttempt := strings.Repeat(line, MaxStepLogBytes/MaxLogLine) // just under the attempt's limit
	kept := 0
	for i := 0; i < MaxDeployLogBytes/MaxStepLogBytes+2; i++ {
		l := &logWriter{budget: budget}
		_, _ = l.Write([]byte(perAttempt))
		for _, e := range l.take() {
			if !strings.HasPrefix(e.Text, "[") && !strings.HasPrefix(e.Text, "…") {
				kept += len(e.Text)
			}
		}
	}
	if kept > MaxDeployLogBytes || kept < MaxDeployLogBytes-MaxStepLogBytes {
		t.Fatalf("kept %d bytes over the attempts, want at most %d and close to it", kept, MaxDeployLogBytes)
	}
	l := &logWriter{budget: budget}
	_, _ = l.Write([]byte(line))
	got := l.take()
	if len(got) != 2 || !strings.Contains(got[0].Text, "this deploy's log limit (64 MiB) is reached") {
		t.Fatalf("after the budget: %q", got)
	}
}

// The custom steps of one execution keep MaxDeployOutput of output
// together: past it, each output is replaced by a note of its size.
func TestDeployOutputLimit(t *testing.T) {
	r := &run{}
	blob := plugin.Result{"blob": strings.Repeat("z", MaxStepOutput-100)}
	kept := 0
	for i := 0; i < MaxDeployOutput/MaxStepOutput+1; i++ {
		l := &logWriter{}
		out := r.boundOutput(blob, l)
		if raw, ok := out.(json.RawMessage); ok && strings.HasPrefix(string(raw), `{"blob":`) {
			kept++
			continue
		}
		lines := l.take()
		if len(lines) != 1 || !strings.Contains(lines[0].Text, "the custom steps' outputs of this deploy would pass 16777216 bytes") {
			t.Fatalf("output %d replaced by %v, log %q", i, out, lines)
		}
	}
	if kept != MaxDeployOutput/MaxStepOutput {
		t.Fatalf("%d outputs kept, want %d", kept, MaxDeployOutput/MaxStepOutput)
	}
}

// A worker that may no longer write (fenced or cut off: a paused worker
// resumed after its deploys were taken over) drops what its step's
// command still writes instead of adding it to the new attempt's log. (The
// writer has no store: writing would panic.)
func TestLogOfAFencedWorkerIsDropped(t *testing.T) {
	l := &logWriter{budget: &logBudget{}, live: true, mayWrite: func() bool { return false }}
	if _, err := l.Write([]byte("Terminated\n")); err != nil {
		t.Fatal(err)
	}
	if len(l.pending) != 0 {
		t.Fatalf("pending %v, want the lines dropped", l.pending)
	}
}
