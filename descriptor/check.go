package descriptor

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/manent-io/manent/pkg/manent"
)

// checker runs the rules a JSON Schema cannot express on the generic value.
// Every check looks at the shape it needs and skips what is not there, so it
// runs even when the schema found errors. A value the schema already
// reported is not reported again.
type checker struct {
	root     *yaml.Node
	reported map[string]bool // paths with a schema error
	errs     []manent.FieldError
}

func (c *checker) add(path []string, format string, args ...any) {
	p := pointer(path)
	_, n := locate(c.root, path)
	c.errs = append(c.errs, fieldError(p, n, fmt.Sprintf(format, args...)))
}

// addAtKey reports at the key of a field (e.g. the second of two
// conflicting fields).
func (c *checker) addAtKey(path []string, format string, args ...any) {
	p := pointer(path)
	k, n := locate(c.root, path)
	if k != nil {
		n = k
	}
	c.errs = append(c.errs, fieldError(p, n, fmt.Sprintf(format, args...)))
}

func (c *checker) line(path []string) int {
	_, n := locate(c.root, path)
	if n == nil {
		return 0
	}
	return n.Line
}

// stringAt returns the string at path when it is one and the schema did not
// already report it.
func (c *checker) stringAt(m map[string]any, field string, path []string) (string, bool) {
	s, ok := m[field].(string)
	if !ok || c.reported[pointer(path)] {
		return "", false
	}
	return s, true
}

func (c *checker) check(doc map[string]any) {
	custom := c.checkSteps(doc)
	c.checkRollback(doc, custom)
	c.checkSchedule(doc)
	c.checkSource(doc)
	c.checkHealth(doc)
	c.checkRollout(doc)
}

// builtinSteps are every step name of the engine (pkg/manent): custom steps
// may not take them.
func builtinSteps() []string {
	return []string{
		manent.StepConfig, manent.StepChangeOpen, manent.StepNotifyStarted,
		manent.StepSecrets, manent.StepArtifacts, manent.StepQA, manent.StepDeploy,
		manent.StepPostTest, manent.StepActivation, manent.StepCleanup, manent.StepChangeClose,
	}
}

// reservedPrefixes start the names of the steps the engine adds around
// compensable steps.
func reservedPrefixes() []string { return []string{"rollback:", "checkpoint:"} }

// knownSteps says which names a custom step may be placed against and
// rollback.on may name: the plan steps and the custom steps.
func knownSteps(custom []string) string {
	return strings.Join(append(slices.Clone(manent.DefaultPipeline), custom...), ", ")
}

func isKnownStep(name string, custom []string) bool {
	return slices.Contains(manent.DefaultPipeline, name) || slices.Contains(custom, name)
}

// checkSteps checks the custom steps' names and placement and returns the
// valid custom step names.
func (c *checker) checkSteps(doc map[string]any) []string {
	list, _ := doc["steps"].([]any)
	type step struct {
		index  int
		name   string
		anchor string // the custom step it is placed against, if any
	}
	var steps []step
	first := map[string]int{}
	for i, s := range list {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		path := []string{"steps", strconv.Itoa(i), "name"}
		name, ok := c.stringAt(m, "name", path)
		if !ok {
			continue
		}
		reserved := ""
		for _, p := range reservedPrefixes() {
			if strings.HasPrefix(name, p) {
				reserved = p
			}
		}
		switch {
		case slices.Contains(builtinSteps(), name):
			c.add(path, "%q is a built-in step; choose another name", name)
		case reserved != "":
			c.add(path, "step names starting with %q are reserved", reserved)
		default:
			if j, dup := first[name]; dup {
				c.add(path, "duplicate step name %q (first at line %d)", name, c.line([]string{"steps", strconv.Itoa(j), "name"}))
				continue
			}
			first[name] = i
			steps = append(steps, step{index: i, name: name})
		}
	}
	custom := make([]string, len(steps))
	for i, s := range steps {
		custom[i] = s.name
	}

	anchors := map[string]string{} // custom step -> custom step it is placed against
	for i, s := range list {
		m, ok := s.(map[string]any)
		if !ok {
			continue
		}
		idx := strconv.Itoa(i)
		_, hasBefore := m["before"]
		_, hasAfter := m["after"]
		switch {
		case hasBefore && hasAfter:
			c.addAtKey([]string{"steps", idx, "after"}, `set either "before" or "after", not both`)
			continue
		case !hasBefore && !hasAfter:
			c.add([]string{"steps", idx}, `missing "before" or "after": say which step this one runs before or after`)
			continue
		}
		field := "before"
		if hasAfter {
			field = "after"
		}
		path := []string{"steps", idx, field}
		target, ok := c.stringAt(m, field, path)
		if !ok {
			continue
		}
		name, _ := m["name"].(string)
		switch {
		case target == name:
			c.add(path, "a step cannot run %s itself", field)
		case !isKnownStep(target, custom):
			c.add(path, "%s", unknownStep(target, custom))
		case slices.Contains(custom, target) && slices.Contains(custom, name) && first[name] == i:
			anchors[name] = target
		}
	}

	// Custom steps placed against each other must not form a loop.
	inLoop := map[string]bool{}
	for _, s := range steps {
		if inLoop[s.name] {
			continue
		}
		loop := []string{s.name}
		for next, ok := anchors[s.name]; ok; next, ok = anchors[next] {
			if next == s.name {
				for _, n := range loop {
					inLoop[n] = true
				}
				c.add([]string{"steps", strconv.Itoa(s.index)},
					"steps %s are placed before/after each other in a loop", strings.Join(loop, " -> ")+" -> "+s.name)
				break
			}
			if slices.Contains(loop, next) || len(loop) > len(steps) {
				break // a loop that does not include s; reported from one of its members
			}
			loop = append(loop, next)
		}
	}
	return custom
}

func unknownStep(name string, custom []string) string {
	msg := fmt.Sprintf("unknown step %q", name)
	if s := suggest(name, append(slices.Clone(manent.DefaultPipeline), custom...)); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; known steps: " + knownSteps(custom)
}

func (c *checker) checkRollback(doc map[string]any, custom []string) {
	rb, _ := doc["rollback"].(map[string]any)
	on, _ := rb["on"].([]any)
	for i, v := range on {
		path := []string{"rollback", "on", strconv.Itoa(i)}
		name, ok := v.(string)
		if !ok || c.reported[pointer(path)] {
			continue
		}
		if !isKnownStep(name, custom) {
			c.add(path, "%s", unknownStep(name, custom))
		}
	}
}

func (c *checker) checkSchedule(doc map[string]any) {
	s, ok := doc["schedule"].(map[string]any)
	if !ok {
		return
	}
	_, hasAt := s["at"]
	_, hasCron := s["cron"]
	switch {
	case hasAt && hasCron:
		c.addAtKey([]string{"schedule", "cron"}, `set either "at" (run once) or "cron" (recurring), not both`)
	case !hasAt && !hasCron:
		c.add([]string{"schedule"}, `missing "at" (run once) or "cron" (recurring)`)
	}
	if at, ok := c.stringAt(s, "at", []string{"schedule", "at"}); ok {
		if _, err := time.Parse(time.RFC3339, at); err != nil {
			c.add([]string{"schedule", "at"}, "must be an RFC 3339 date-time with a time zone, e.g. 2026-12-24T06:00:00Z: %q", at)
		}
	}
	if expr, ok := c.stringAt(s, "cron", []string{"schedule", "cron"}); ok {
		if err := parseCron(expr); err != nil {
			c.add([]string{"schedule", "cron"},
				"invalid cron expression %q: %v (want 5 fields: minute hour day-of-month month day-of-week, or @daily, @hourly, @every 1h…)", expr, err)
		}
	}
}

// checkSource checks source.committed_at strictly as RFC 3339 (the schema's
// date-time format is laxer, e.g. about leap seconds).
func (c *checker) checkSource(doc map[string]any) {
	s, ok := doc["source"].(map[string]any)
	if !ok {
		return
	}
	if at, ok := c.stringAt(s, "committed_at", []string{"source", "committed_at"}); ok {
		if _, err := time.Parse(time.RFC3339, at); err != nil {
			c.add([]string{"source", "committed_at"}, "must be an RFC 3339 date-time with a time zone, e.g. 2026-12-24T06:00:00Z: %q", at)
		}
	}
}

// parseCron checks a standard cron expression. The cron package has
// panicked on odd input in the past; a panic is an invalid expression.
func parseCron(expr string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("cannot parse")
		}
	}()
	_, err = cron.ParseStandard(expr)
	return err
}

func (c *checker) checkHealth(doc map[string]any) {
	list, _ := doc["health"].([]any)
	for i, h := range list {
		m, ok := h.(map[string]any)
		if !ok {
			continue
		}
		c.checkDuration(m, []string{"health", strconv.Itoa(i), "timeout"}, false)
	}
}

// checkDuration checks a Go duration string; zero is allowed only when
// zeroOK.
func (c *checker) checkDuration(m map[string]any, path []string, zeroOK bool) {
	s, ok := c.stringAt(m, path[len(path)-1], path)
	if !ok {
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		c.add(path, "invalid duration %q: use a number and a unit, e.g. \"30s\", \"5m\", \"1h30m\"", s)
	case d < 0 || (d == 0 && !zeroOK):
		c.add(path, "must be more than zero, got %q", s)
	}
}

func (c *checker) checkRollout(doc map[string]any) {
	r, ok := doc["rollout"].(map[string]any)
	if !ok {
		return
	}
	waves, hasWaves := r["waves"]
	pcts, hasPcts := r["percentages"]
	switch {
	case hasWaves && hasPcts:
		c.addAtKey([]string{"rollout", "percentages"}, `set either "waves" or "percentages", not both`)
	case !hasWaves && !hasPcts:
		c.add([]string{"rollout"}, `missing "waves" or "percentages"`)
	}

	list, _ := waves.([]any)
	first := map[string]int{}
	for i, w := range list {
		m, ok := w.(map[string]any)
		if !ok {
			continue
		}
		idx := strconv.Itoa(i)
		c.checkDuration(m, []string{"rollout", "waves", idx, "observe"}, true)
		path := []string{"rollout", "waves", idx, "name"}
		name, ok := c.stringAt(m, "name", path)
		if !ok {
			continue
		}
		if j, dup := first[name]; dup {
			c.add(path, "duplicate wave name %q (first at line %d)", name, c.line([]string{"rollout", "waves", strconv.Itoa(j), "name"}))
			continue
		}
		first[name] = i
	}

	nums, _ := pcts.([]any)
	prev, last := int64(0), -1
	for i, v := range nums {
		path := []string{"rollout", "percentages", strconv.Itoa(i)}
		n, ok := v.(json.Number)
		if !ok || c.reported[pointer(path)] {
			last = -1
			continue
		}
		p, err := n.Int64()
		if err != nil {
			last = -1
			continue
		}
		if i > 0 && last >= 0 && p <= prev {
			c.add(path, "percentages must increase: %d comes after %d", p, prev)
		}
		prev, last = p, i
	}
	if last >= 0 && last == len(nums)-1 && prev != 100 {
		c.add([]string{"rollout", "percentages", strconv.Itoa(last)}, "the last percentage must be 100, got %d", prev)
	}
}
