package governance

import (
	"errors"
	"fmt"
	"strings"
)

var errNoDescriptor = errors.New("governance: the input has no descriptor")

// LoadError lists every problem found in a rules file, a Rego policy or a
// table of cases, each with its line.
type LoadError struct {
	// File is the name the file was loaded under.
	File     string
	Problems []Problem
}

// Problem is one mistake in a file.
type Problem struct {
	// Line is 1-based; 0 when unknown.
	Line int
	// Column is 1-based, in characters; 0 when unknown (a YAML syntax
	// error has one).
	Column int
	// Path locates the value in the document, e.g. "freezes[1].recurring.to";
	// empty when unknown.
	Path    string
	Message string
}

// Error prints one problem per line as "<file>:<line>: <path>: <message>",
// after a header line when there are several.
func (e *LoadError) Error() string {
	lines := make([]string, 0, len(e.Problems)+1)
	if len(e.Problems) > 1 {
		lines = append(lines, fmt.Sprintf("%s: %d problems", e.File, len(e.Problems)))
	}
	for _, p := range e.Problems {
		lines = append(lines, e.format(p))
	}
	return strings.Join(lines, "\n")
}

func (e *LoadError) format(p Problem) string {
	var b strings.Builder
	b.WriteString(e.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, ":%d", p.Column)
		}
	}
	b.WriteString(": ")
	if p.Path != "" {
		b.WriteString(p.Path + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}
