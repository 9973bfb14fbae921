package descriptor

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/cronspec"
	"github.com/manent-io/manent/pkg/manent"
	"github.com/manent-io/manent/pkg/suggest"
)

// checker runs the rules a JSON Schema cannot express on the generic value.
// Every check looks at the shape it needs and skips what is not there, so it
// runs even when the schema found errors. A value the schema already
// reported is not reported again. Every check is linear in the input and
// stops once errs is full.
type checker struct {
	tree     *tree
	reported map[string]bool // paths with a schema error
	errs     *errorList
}

func (c *checker) full() bool {
	if c.errs.full() {
		c.errs.more = true
		return true
	}
	return false
}

func (c *checker) add(path []string, format string, args ...any) {
	if c.full() {
		return
	}
	p := pointer(path)
	_, n := c.tree.locate(path)
	c.errs.add(fieldError(p, n, fmt.Sprintf(format, args...)))
}

// addAtKey reports at the key of a field (e.g. the second of two
// conflicting fields).
func (c *checker) addAtKey(path []string, format string, args ...any) {
	if c.full() {
		return
	}
	p := pointer(path)
	k, n := c.tree.locate(path)
	if k != nil {
		n = k
	}
	c.errs.add(fieldError(p, n, fmt.Sprintf(format, args...)))
}

func (c *checker) line(path []string) int {
	_, n := c.tree.locate(path)
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
	c.checkText(doc)
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

// maxRollbackOn is the most steps rollback.on may name (the schema's
// maxItems).
const maxRollbackOn = 256

// maxListed is the most step names an "unknown step" message lists.
const maxListed = 20

// knownSteps says which names a custom step may be placed against and
// rollback.on may name: the plan steps and the custom steps (the first
// maxListed of them).
func knownSteps(custom []string) string {
	all := append(slices.Clone(manent.DefaultPipeline), custom...)
	if len(all) > maxListed {
		return strings.Join(all[:maxListed], ", ") + fmt.Sprintf(" and %d more", len(all)-maxListed)
	}
	return strings.Join(all, ", ")
}

// stepSet is the names a step may be placed against: the plan steps and
// the custom steps.
type stepSet struct {
	custom   []string
	known    map[string]bool
	isCustom map[string]bool
}

func newStepSet(custom []string) *stepSet {
	s := &stepSet{custom: custom, known: make(map[string]bool), isCustom: make(map[string]bool)}
	for _, n := range manent.DefaultPipeline {
		s.known[n] = true
	}
	for _, n := range custom {
		s.known[n], s.isCustom[n] = true, true
	}
	return s
}

// checkSteps checks the custom steps' names and placement and returns the
// valid custom step names. Past maxSteps steps it checks nothing: the
// schema already refuses the list.
func (c *checker) checkSteps(doc map[string]any) *stepSet {
	list, _ := doc["steps"].([]any)
	if len(list) > maxSteps {
		return newStepSet(nil)
	}
	type step struct {
		index int
		name  string
	}
	var steps []step
	first := map[string]int{}
	builtin := map[string]bool{}
	for _, n := range builtinSteps() {
		builtin[n] = true
	}
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
		case builtin[name]:
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
	set := newStepSet(custom)

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
		case !set.known[target]:
			c.add(path, "%s", unknownStep(target, set))
		case set.isCustom[target] && set.isCustom[name] && first[name] == i:
			anchors[name] = target
		}
	}

	// Custom steps placed against each other must not form a loop. Each
	// step is visited once: a walk stops at a step an earlier walk saw.
	const (
		unseen = iota
		onPath
		done
	)
	state := make(map[string]int, len(steps))
	order := make(map[string]int, len(steps)) // position in the descriptor
	for i, s := range steps {
		order[s.name] = i
	}
	for _, s := range steps {
		if state[s.name] != unseen {
			continue
		}
		var path []string
		at := map[string]int{}
		name, ok := s.name, true
		for ok && state[name] == unseen {
			state[name] = onPath
			at[name] = len(path)
			path = append(path, name)
			name, ok = anchors[name]
		}
		if ok && state[name] == onPath {
			loop := path[at[name]:]
			// Report at the loop's first step in the descriptor, listing
			// the loop from there.
			start := 0
			for i, n := range loop {
				if order[n] < order[loop[start]] {
					start = i
				}
			}
			loop = append(slices.Clone(loop[start:]), loop[:start]...)
			c.add([]string{"steps", strconv.Itoa(steps[order[loop[0]]].index)},
				"steps %s are placed before/after each other in a loop", strings.Join(loop, " -> ")+" -> "+loop[0])
		}
		for _, n := range path {
			state[n] = done
		}
	}
	return set
}

func unknownStep(name string, set *stepSet) string {
	msg := fmt.Sprintf("unknown step %q", clip(name))
	if s := suggest.Closest(name, append(slices.Clone(manent.DefaultPipeline), set.custom...)); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	}
	return msg + "; known steps: " + knownSteps(set.custom)
}

func (c *checker) checkRollback(doc map[string]any, steps *stepSet) {
	rb, _ := doc["rollback"].(map[string]any)
	on, _ := rb["on"].([]any)
	if len(on) > maxRollbackOn {
		return // the schema refuses the list
	}
	for i, v := range on {
		if c.full() {
			return
		}
		path := []string{"rollback", "on", strconv.Itoa(i)}
		name, ok := v.(string)
		if !ok || c.reported[pointer(path)] {
			continue
		}
		if !steps.known[name] {
			c.add(path, "%s", unknownStep(name, steps))
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
		if _, err := cronspec.Parse(expr); err != nil {
			c.add([]string{"schedule", "cron"},
				"invalid cron expression %q: %v (want 5 fields: minute hour day-of-month month day-of-week, optionally after CRON_TZ=<zone>, or @hourly, @daily, @weekly, @monthly, @every 1h…)", clip(expr), err)
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

// durationPattern is the schema's $defs/duration pattern.
var durationPattern = regexp.MustCompile(`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`)

// checkDuration checks a Go duration string; zero is allowed only when
// zeroOK.
func (c *checker) checkDuration(m map[string]any, path []string, zeroOK bool) {
	s, ok := c.stringAt(m, path[len(path)-1], path)
	if !ok {
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && durationPattern.MatchString(s):
		// Well written, but past time.Duration's range.
		c.add(path, "duration %q is too long: the most is 2562047h (about 292 years)", s)
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
