package governance

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	_ "time/tzdata" // recurring windows name time zones; minimal machines lack /usr/share/zoneinfo

	"github.com/manent-io/manent/pkg/manent"
)

// Freeze is one freeze window of governance.yaml: while it is active, no
// deploy to its environments (and regions) may start, except by the
// identities it allows.
type Freeze struct {
	Name string
	// Environments and Regions scope the freeze (glob patterns); empty
	// means every environment, or every region.
	Environments []string
	Regions      []string
	// From and To bound an absolute window [From, To); zero when the
	// window is Recurring.
	From, To time.Time
	// Recurring is a weekly or daily window; nil for an absolute one.
	Recurring *Recurring
	// Allow are identity patterns ("oidc:sre-lead@example.com",
	// "group:sre") that may deploy anyway: they break the glass.
	Allow []string
}

// Recurring is a window that comes back every week ("Fri 16:00" to
// "Mon 08:00") or every day ("22:00" to "06:00"), read on the wall clock of
// Location, so it follows daylight saving time. Only ParseRules and
// LoadRules build one.
type Recurring struct {
	Location *time.Location
	// From and To as written in the rules.
	From, To string

	from, to weekClock
}

// weekClock is a time of the week (day 0 = Monday … 6 = Sunday) or, with
// day -1, a time of any day.
type weekClock struct {
	day    int
	minute int // minute of the day
}

const (
	minutesPerDay  = 24 * 60
	minutesPerWeek = 7 * minutesPerDay
)

var weekdays = map[string]int{
	"mon": 0, "monday": 0, "tue": 1, "tuesday": 1, "wed": 2, "wednesday": 2,
	"thu": 3, "thursday": 3, "fri": 4, "friday": 4, "sat": 5, "saturday": 5,
	"sun": 6, "sunday": 6,
}

// parseWeekClock reads "Fri 16:00" (day names in English, three letters or
// in full, any case) or "22:00".
func parseWeekClock(s string) (weekClock, error) {
	bad := fmt.Errorf("%q is not a time of the week like \"Fri 16:00\" or a time of day like \"22:00\"", s)
	fields := strings.Fields(s)
	c := weekClock{day: -1}
	switch len(fields) {
	case 1:
	case 2:
		d, ok := weekdays[strings.ToLower(fields[0])]
		if !ok {
			return c, bad
		}
		c.day = d
	default:
		return c, bad
	}
	hh, mm, ok := strings.Cut(fields[len(fields)-1], ":")
	h, errH := strconv.Atoi(hh)
	m, errM := strconv.Atoi(mm)
	if !ok || errH != nil || errM != nil || len(hh) > 2 || len(mm) != 2 || h < 0 || h > 23 || m < 0 || m > 59 {
		return c, bad
	}
	c.minute = h*60 + m
	return c, nil
}

// pos is c's position in its cycle: minutes since Monday 00:00, or since
// midnight for a daily clock.
func (c weekClock) pos() int {
	if c.day < 0 {
		return c.minute
	}
	return c.day*minutesPerDay + c.minute
}

// Weekly reports whether the window repeats every week (rather than every
// day).
func (r *Recurring) Weekly() bool { return r.from.day >= 0 }

// active reports whether now falls in the window and, if so, when the
// current occurrence ends: To's wall-clock time on the right day in
// r.Location, which is correct across daylight-saving changes.
func (r *Recurring) active(now time.Time) (bool, time.Time) {
	local := now.In(r.Location)
	mins := local.Hour()*60 + local.Minute()
	period, m := minutesPerDay, mins
	if r.Weekly() {
		period = minutesPerWeek
		m += (int(local.Weekday()) + 6) % 7 * minutesPerDay
	}
	from, to := r.from.pos(), r.to.pos()
	in := from <= m && m < to
	if from > to {
		in = m >= from || m < to
	}
	if !in {
		return false, time.Time{}
	}
	days := (mins + (to-m+period)%period) / minutesPerDay
	y, mo, d := local.Date()
	reopens := time.Date(y, mo, d+days, r.to.minute/60, r.to.minute%60, 0, 0, r.Location)
	// A wall-clock time the clocks skip (they went forward) is never shown:
	// the window ends at the jump. time.Date gives an instant on either
	// side of it, 30 to 60 minutes off; the jump is where its zone starts
	// (an instant after it) or ends (before it).
	want := time.Date(y, mo, d+days, r.to.minute/60, r.to.minute%60, 0, 0, time.UTC)
	if shown := wallClock(reopens.In(r.Location)); !shown.Equal(want) {
		start, end := reopens.In(r.Location).ZoneBounds()
		if shown.After(want) {
			reopens = start
		} else {
			reopens = end
		}
	}
	// A wall-clock time the clocks pass twice (they went back) is reached
	// first at its earlier instant, when the window above already ends:
	// time.Date may give the later one.
	const clock = "2006-01-02 15:04"
	for _, back := range []time.Duration{time.Hour, 30 * time.Minute} {
		if earlier := reopens.Add(-back); earlier.After(now) && earlier.In(r.Location).Format(clock) == reopens.In(r.Location).Format(clock) {
			reopens = earlier
			break
		}
	}
	return true, reopens.UTC()
}

// wallClock is t's wall-clock time written as if it were UTC.
func wallClock(t time.Time) time.Time {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}

// Active reports whether the window is open at now and, if so, when it
// reopens to deploys.
func (f *Freeze) Active(now time.Time) (active bool, reopensAt time.Time) {
	if f.Recurring != nil {
		return f.Recurring.active(now)
	}
	if !now.Before(f.From) && now.Before(f.To) {
		return true, f.To.UTC()
	}
	return false, time.Time{}
}

// Allows reports whether id may deploy through the freeze (break glass).
func (f *Freeze) Allows(id manent.Identity) bool { return id.Matches(f.Allow) }

// covers reports whether the freeze concerns a deploy to environment that
// touches regions (none: the whole environment), and which of them it
// freezes: the matching regions, or the freeze's own patterns when the
// deploy names none.
func (f *Freeze) covers(environment string, regions []string) (bool, []string) {
	if !matchScope(f.Environments, environment) {
		return false, nil
	}
	if len(f.Regions) == 0 {
		return true, nil
	}
	if len(regions) == 0 {
		return true, sortedSet(f.Regions)
	}
	var hit []string
	for _, r := range regions {
		if matchRegion(f.Regions, r) {
			hit = append(hit, r)
		}
	}
	return len(hit) > 0, sortedSet(hit)
}

// matchRegion matches a wave's target against a freeze's region patterns
// without regard to case or surrounding spaces: a target is free text the
// plugin interprets, and "EU-1" or "eu-1 " must not slip past a freeze of
// eu-1 to a plugin that reads them as the same region.
func matchRegion(patterns []string, region string) bool {
	region = strings.ToLower(strings.TrimSpace(region))
	for _, p := range patterns {
		if matchAny([]string{strings.ToLower(p)}, region) {
			return true
		}
	}
	return false
}

// freezeHit is an active freeze that concerns a deploy.
type freezeHit struct {
	index     int
	freeze    *Freeze
	reopensAt time.Time
	regions   []string
	bypassed  bool
}

// activeFreezes returns the active freezes that concern a deploy to
// environment and regions by id, in the order of the rules.
func (r *Rules) activeFreezes(now time.Time, environment string, regions []string, id manent.Identity) []freezeHit {
	var hits []freezeHit
	for i := range r.Freezes {
		f := &r.Freezes[i]
		ok, hitRegions := f.covers(environment, regions)
		if !ok {
			continue
		}
		active, reopens := f.Active(now)
		if !active {
			continue
		}
		hits = append(hits, freezeHit{index: i, freeze: f, reopensAt: reopens, regions: hitRegions, bypassed: f.Allows(id)})
	}
	return hits
}

// latest returns the hit that reopens last, the first in the rules on a
// tie; hits must not be empty.
func latest(hits []freezeHit) freezeHit {
	return slices.MaxFunc(hits, func(a, b freezeHit) int {
		if c := a.reopensAt.Compare(b.reopensAt); c != 0 {
			return c
		}
		return b.index - a.index
	})
}

// ActiveFreeze tells whether a deploy to environment (and region, "" for
// the whole environment) by id is frozen at now. When a freeze blocks it,
// f is the blocking freeze that reopens last and reopensAt is when it ends.
// When every active freeze allows id, f is the one it bypasses (the one
// that reopens last) and breakGlass is true: the caller must write a loud
// audit entry. Otherwise f is nil.
//
// The engine calls it again in the config step and before each rollout
// wave; a Rego policy answers the same question through Decide with
// Environment.Regions set to the one region.
func (r *Rules) ActiveFreeze(now time.Time, environment, region string, id manent.Identity) (f *Freeze, reopensAt time.Time, breakGlass bool) {
	var regions []string
	if region != "" {
		regions = []string{region}
	}
	blocking, bypassed := splitHits(r.activeFreezes(now, environment, regions, id))
	switch {
	case len(blocking) > 0:
		h := latest(blocking)
		return h.freeze, h.reopensAt, false
	case len(bypassed) > 0:
		h := latest(bypassed)
		return h.freeze, h.reopensAt, true
	}
	return nil, time.Time{}, false
}

func splitHits(hits []freezeHit) (blocking, bypassed []freezeHit) {
	for _, h := range hits {
		if h.bypassed {
			bypassed = append(bypassed, h)
		} else {
			blocking = append(blocking, h)
		}
	}
	return blocking, bypassed
}

// freezeReason is the deny reason for a blocking freeze, e.g.
// `prod (regions eu-1) is frozen by "weekend" until 2026-03-30T06:00:00Z`.
func freezeReason(environment string, h freezeHit) string {
	scope := environment
	if len(h.regions) > 0 {
		scope += " (regions " + strings.Join(h.regions, ", ") + ")"
	}
	return fmt.Sprintf("%s is frozen by %q until %s", scope, h.freeze.Name, h.reopensAt.UTC().Format(time.RFC3339))
}
