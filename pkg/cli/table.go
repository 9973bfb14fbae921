package cli

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/lipgloss/table"
)

// Table collects rows and prints them through the IOStreams: a lipgloss
// table (bold header, coloured state cells) on a terminal, columns aligned
// with spaces and no escape codes when piped. Empty cells print as "-".
type Table struct {
	io        *IOStreams
	headers   []string
	rows      [][]string
	stateCols map[int]bool
}

// NewTable starts a table with the given column headers.
func (s *IOStreams) NewTable(headers ...string) *Table {
	return &Table{io: s, headers: headers, stateCols: map[int]bool{}}
}

// StateColumn marks column i as holding states, coloured by outcome.
func (t *Table) StateColumn(i int) *Table {
	t.stateCols[i] = true
	return t
}

// AddRow appends one row; missing cells are empty.
func (t *Table) AddRow(cells ...string) {
	row := make([]string, len(t.headers))
	for i := range row {
		if i < len(cells) {
			row[i] = cell(cells[i])
		}
		if row[i] == "" {
			row[i] = "-"
		}
	}
	t.rows = append(t.rows, row)
}

// Len returns the number of rows.
func (t *Table) Len() int { return len(t.rows) }

// Render writes the table to the streams' stdout.
func (t *Table) Render() error { return t.RenderTo(t.io.Out) }

// RenderTo writes the table to w.
func (t *Table) RenderTo(w io.Writer) error {
	if !t.io.IsStdoutTTY() {
		return writeAligned(w, append([][]string{t.headers}, t.rows...))
	}
	last := len(t.headers) - 1
	tbl := table.New().
		Border(lipgloss.NormalBorder()).
		BorderStyle(t.io.style().Faint(t.io.ColorEnabled())).
		BorderTop(false).BorderBottom(false).BorderLeft(false).BorderRight(false).
		BorderColumn(false).BorderHeader(true).
		Headers(t.headers...).
		Rows(t.rows...).
		StyleFunc(func(row, col int) lipgloss.Style {
			base := t.io.style()
			if col < last {
				base = base.PaddingRight(2)
			}
			switch {
			case row == table.HeaderRow:
				return base.Bold(t.io.ColorEnabled())
			case t.stateCols[col] && t.io.ColorEnabled() && row >= 0 && row < len(t.rows) && t.rows[row][col] != "-":
				return base.Foreground(stateColor(t.rows[row][col]))
			}
			return base
		})
	// lipgloss pads every cell to its column's width; drop the padding
	// that ends each line.
	lines := strings.Split(tbl.Render(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := fmt.Fprintln(w, strings.Join(lines, "\n"))
	return err
}

// writeAligned prints rows as space-aligned columns with no escape codes.
func writeAligned(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// cell flattens a value onto one line so it cannot break the layout, and
// renders any other control character visibly (sanitize): table cells and
// status fields are the server's text.
func cell(s string) string {
	return safeText(strings.NewReplacer("\r\n", " ", "\n", " ", "\r", " ", "\t", " ").Replace(s))
}

// Fields prints label/value pairs (the header of `status`): labels bold on a
// colour terminal, aligned in both modes. Pairs with an empty value are
// skipped.
type Fields struct {
	io   *IOStreams
	rows [][2]string
}

// AddStyled appends a pair whose value the CLI has already rendered (and
// sanitised), e.g. a coloured state.
func (f *Fields) AddStyled(label, value string) {
	if value == "" {
		return
	}
	f.rows = append(f.rows, [2]string{label, value})
}

// NewFields starts a list of label/value pairs.
func (s *IOStreams) NewFields() *Fields { return &Fields{io: s} }

// Add appends a pair; value is flattened onto one line and sanitised (cell).
func (f *Fields) Add(label, value string) {
	f.AddStyled(label, cell(value))
}

// RenderTo writes the pairs to w.
func (f *Fields) RenderTo(w io.Writer) error {
	width := 0
	for _, r := range f.rows {
		width = max(width, len(r[0])+1)
	}
	for _, r := range f.rows {
		label := fmt.Sprintf("%-*s", width, r[0]+":")
		if _, err := fmt.Fprintf(w, "%s  %s\n", f.io.Bold(label), r[1]); err != nil {
			return err
		}
	}
	return nil
}
