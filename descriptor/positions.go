package descriptor

import (
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/yamlvalue"
)

// Positions gives each field error that has a path but no position the
// line and column of that path's value in data, a descriptor Parse
// accepted: the checks after parsing (plugins, sources, environment
// configuration, governance) see the decoded descriptor, not its text, so
// their errors carry only a path. A path data does not hold — a value that
// comes from the environment configuration, or the whole descriptor ("/")
// — keeps no position. Reading data again costs what Parse's own reading
// did: it is bounded by MaxSize and linear in it.
func Positions(data []byte, fields []manent.FieldError) {
	var t *yamlvalue.Tree // read at the first field to place
	for i := range fields {
		f := &fields[i]
		if f.Line != 0 || f.Path == "" || f.Path == "/" {
			continue
		}
		if t == nil {
			if len(data) > MaxSize {
				return
			}
			root, fe := parseYAML(data)
			if fe != nil {
				return
			}
			t = yamlvalue.NewTree(root)
		}
		if _, n, found := t.Find(yamlvalue.SplitPointer(f.Path)); found && n != nil {
			f.Line, f.Column = n.Line, n.Column
		}
	}
}
