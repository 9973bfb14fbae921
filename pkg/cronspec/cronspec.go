// Package cronspec reads the recurring schedules of descriptors
// (schedule.cron, SPEC §11.1): standard 5-field cron (minute hour
// day-of-month month day-of-week; 0 or 7 is Sunday, as in Vixie cron), an
// optional CRON_TZ=<zone> prefix (or TZ=<zone>, as robfig/cron reads it), and
// the @hourly, @daily (@midnight), @weekly, @monthly, @yearly (@annually)
// and @every <duration> forms (whole seconds, from 1s to MaxEvery, a
// year). A schedule without a zone runs in UTC.
//
// It answers when a schedule fires next, how often it can fire at most
// (MinInterval, for schedules.min_interval) and the form the DBOS scheduler
// takes (six fields, with seconds). Parsing is robfig/cron/v3's, the parser
// DBOS itself uses; nothing here parses cron fields by hand.
//
// It imports no package of this module.
package cronspec

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // CRON_TZ= works on hosts without a zoneinfo database

	"github.com/robfig/cron/v3"
)

// MaxLength is the longest expression accepted.
const MaxLength = 256

// MaxEvery is the longest interval of an @every schedule: a year, as the
// longest a schedule.at deploy may wait.
const MaxEvery = 8760 * time.Hour

// Spec is a parsed schedule.
type Spec struct {
	expr  string         // as written
	zone  *time.Location // UTC unless CRON_TZ= says otherwise
	body  string         // the expression without its CRON_TZ= prefix
	sched cron.Schedule
}

// parser reads the body of an expression: 5 fields or a @ form.
var parser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse reads a schedule expression. Its errors are meant for the person
// who wrote the expression.
func Parse(expr string) (s *Spec, err error) {
	if len(expr) > MaxLength {
		return nil, fmt.Errorf("longer than %d characters", MaxLength)
	}
	body := strings.TrimSpace(expr)
	if body == "" {
		return nil, errors.New("empty expression")
	}
	zone := time.UTC
	if name, rest, ok := zonePrefix(body); ok {
		// The prefix as written: CRON_TZ= or TZ=.
		prefix, _, _ := strings.Cut(body, "=")
		if name == "" || name == "Local" {
			return nil, fmt.Errorf("%s=%s: name an IANA time zone such as Europe/Paris or UTC", prefix, name)
		}
		loc, err := time.LoadLocation(name)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: unknown time zone", prefix, name)
		}
		zone, body = loc, rest
		if body == "" {
			return nil, fmt.Errorf("%s=%s: the schedule is missing after the time zone", prefix, name)
		}
		if _, _, again := zonePrefix(body); again {
			return nil, errors.New("more than one CRON_TZ= prefix")
		}
	}
	if rest, ok := strings.CutPrefix(body, "@every"); ok {
		d, err := time.ParseDuration(strings.TrimSpace(rest))
		if err != nil || d < time.Second {
			return nil, fmt.Errorf("@every takes a duration of at least 1s, such as \"@every 6h\", got %q", strings.TrimSpace(rest))
		}
		if d > MaxEvery {
			// "@every 100000h" fires first in 11 years: a typo, not a
			// schedule; the longest period of the other forms is @yearly.
			return nil, fmt.Errorf("@every takes at most %s (a year), got %q: use @yearly or a cron expression for a yearly deploy, schedule.at for one deploy", strings.TrimSuffix(MaxEvery.String(), "0m0s"), strings.TrimSpace(rest))
		}
		if d%time.Second != 0 {
			// The scheduler counts whole seconds: "@every 1m0.5s" would
			// fire every minute.
			return nil, fmt.Errorf("@every takes whole seconds, got %q: the scheduler would drop the fraction", strings.TrimSpace(rest))
		}
	}
	body = sundaySeven(body)
	defer func() {
		// The cron parser is third-party code; whatever it does, Parse
		// must not panic.
		if r := recover(); r != nil {
			s, err = nil, errors.New("cannot parse")
		}
	}()
	sched, err := parser.Parse(body)
	if err != nil {
		return nil, err
	}
	if ss, ok := sched.(*cron.SpecSchedule); ok {
		ss.Location = zone
	}
	s = &Spec{expr: expr, zone: zone, body: body, sched: sched}
	if s.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() && s.Next(time.Now()).IsZero() {
		return nil, errors.New("it never fires (no such date)")
	}
	return s, nil
}

// sundaySeven rewrites the day-of-week field of a 5-field expression so
// that 7 means Sunday, as in standard (Vixie) cron, for robfig/cron (the
// parser DBOS uses too), which knows only 0-6: "7" becomes "0", "5-7"
// becomes "5-6,0", "1-7/2" becomes "1-6/2,0". Anything else is left for the
// parser to judge, so its error messages stay the ones people see.
func sundaySeven(body string) string {
	fields := strings.Fields(body)
	if len(fields) != 5 || strings.HasPrefix(body, "@") {
		return body
	}
	items := strings.Split(fields[4], ",")
	changed := false
	for i, item := range items {
		if r, ok := sevenItem(item); ok {
			items[i], changed = r, true
		}
	}
	if !changed {
		return body
	}
	fields[4] = strings.Join(items, ",")
	return strings.Join(fields, " ")
}

// sevenItem rewrites one list item of the day-of-week field that names 7.
func sevenItem(item string) (string, bool) {
	rng, step, stepped := strings.Cut(item, "/")
	if rng == "7" && !stepped {
		return "0", true
	}
	lo, hi, isRange := strings.Cut(rng, "-")
	if !isRange || hi != "7" {
		return "", false
	}
	start, err := strconv.Atoi(lo)
	if err != nil || start < 0 || start > 7 {
		return "", false
	}
	every := 1
	if stepped {
		if every, err = strconv.Atoi(step); err != nil || every < 1 {
			return "", false
		}
	}
	if start == 7 {
		return "0", true // 7-7
	}
	out := lo + "-6"
	if stepped {
		out += "/" + step
	}
	if (7-start)%every == 0 {
		out += ",0" // the range reaches Sunday at its end
	}
	return out, true
}

// zonePrefix splits "CRON_TZ=<zone> <rest>" (or TZ=).
func zonePrefix(expr string) (zone, rest string, ok bool) {
	var after string
	switch {
	case strings.HasPrefix(expr, "CRON_TZ="):
		after = strings.TrimPrefix(expr, "CRON_TZ=")
	case strings.HasPrefix(expr, "TZ="):
		after = strings.TrimPrefix(expr, "TZ=")
	default:
		return "", "", false
	}
	zone, rest, _ = strings.Cut(after, " ")
	return zone, strings.TrimSpace(rest), true
}

// String returns the expression as written.
func (s *Spec) String() string { return s.expr }

// Zone returns the time zone the schedule runs in (UTC by default).
func (s *Spec) Zone() *time.Location { return s.zone }

// Every returns the interval of an @every schedule, or 0.
func (s *Spec) Every() time.Duration {
	if c, ok := s.sched.(cron.ConstantDelaySchedule); ok {
		return c.Delay
	}
	return 0
}

// Next returns the first time after t the schedule fires, or the zero time
// when it does not fire in the five years after t. An @every schedule
// fires its interval after t.
func (s *Spec) Next(t time.Time) time.Time { return s.sched.Next(t) }

// NextSince returns the first fire time after now of a schedule that has
// run since start (its creation or its last tick): an @every schedule
// counts its intervals from start; the other forms do not depend on it.
func (s *Spec) NextSince(start, now time.Time) time.Time {
	d := s.Every()
	if d <= 0 || start.IsZero() || start.After(now) {
		return s.Next(now)
	}
	n := now.Sub(start)/d + 1
	return start.Add(n * d)
}

// Period returns the tick of an @every schedule that started at start
// whose period holds at, a time its scheduler fired: the last start + k ×
// interval not after at (whole seconds). Each worker's scheduler counts
// the interval from when it installed the schedule, so the workers, and
// one worker before and after a restart, fire one period at different
// times; Period makes them one tick. The other forms, and a time before
// start, return at.
func (s *Spec) Period(start, at time.Time) time.Time {
	d := s.Every()
	start = start.Truncate(time.Second)
	if d <= 0 || start.IsZero() || at.Before(start) {
		return at
	}
	return start.Add(at.Sub(start) / d * d)
}

// Repeated says whether at, a fire time after prev, is the same wall-clock
// minute as prev in the schedule's zone, an hour or so later: the clocks
// went back (the end of summer time) and the scheduler fires a 02:30
// schedule at both 02:30s. Standard (Vixie) cron runs such a job once; so
// do we, by skipping the repeat. The spring change is not made up for: a
// time inside the skipped hour does not fire that day (docs/descriptor.md).
func (s *Spec) Repeated(prev, at time.Time) bool {
	if s.Every() > 0 || !at.After(prev) || at.Sub(prev) > 3*time.Hour {
		return false
	}
	const minute = "2006-01-02 15:04"
	return prev.In(s.zone).Format(minute) == at.In(s.zone).Format(minute)
}

// DBOS returns the schedule as the DBOS scheduler takes it: a cron
// expression with a seconds field (or the @ form) and the time zone name.
func (s *Spec) DBOS() (schedule, timezone string) {
	schedule = s.body
	if !strings.HasPrefix(schedule, "@") {
		schedule = "0 " + schedule
	}
	return schedule, s.zone.String()
}

// MinInterval returns the shortest time between two consecutive fire
// times: the interval of @every; for the other forms the shortest gap
// within a day it fires on, and between the last tick of a day and the
// first of the next day it fires on (valid days are searched over 28 years,
// the period of the calendar). Clock changes are not counted. A schedule
// that fires at most once in those 28 years gets the largest Duration.
func (s *Spec) MinInterval() time.Duration {
	if d := s.Every(); d > 0 {
		return d
	}
	spec, ok := s.sched.(*cron.SpecSchedule)
	if !ok {
		return 0
	}
	// The days the schedule fires on: the same schedule at midnight only.
	days := *spec
	days.Second, days.Minute, days.Hour = 1, 1, 1
	ref := time.Date(2001, 1, 1, 0, 0, 0, 0, s.zone).Add(-time.Second)
	end := ref.AddDate(28, 0, 0)
	var first time.Time
	prev, minDays := ref, 0
	for t := days.Next(ref); !t.IsZero() && t.Before(end); t = days.Next(t) {
		if first.IsZero() {
			first = t
		} else if gap := civilDays(t) - civilDays(prev); minDays == 0 || gap < minDays {
			minDays = gap
		}
		if minDays == 1 {
			break
		}
		prev = t
	}
	if first.IsZero() {
		return math.MaxInt64
	}
	// The ticks of one day it fires on (at most 1440).
	y, m, d := first.Date()
	var ticks []time.Duration // time of day
	for t := spec.Next(first.Add(-time.Second)); !t.IsZero(); t = spec.Next(t) {
		if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
			break
		}
		ticks = append(ticks, time.Duration(t.Hour())*time.Hour+time.Duration(t.Minute())*time.Minute)
	}
	shortest := time.Duration(0)
	for i := 1; i < len(ticks); i++ {
		if gap := ticks[i] - ticks[i-1]; shortest == 0 || gap < shortest {
			shortest = gap
		}
	}
	if minDays > 0 && len(ticks) > 0 {
		across := time.Duration(minDays)*24*time.Hour - (ticks[len(ticks)-1] - ticks[0])
		if shortest == 0 || across < shortest {
			shortest = across
		}
	}
	if shortest == 0 {
		return math.MaxInt64
	}
	return shortest
}

// SameTimes says whether s and o fire at the same times, however they are
// written ("0 3 * * 7" and "CRON_TZ=UTC 0 3 * * 0", "@daily" and
// "0 0 * * *"): the same minutes, hours, days and months in the same zone;
// for @every, the same interval (each counts it from its own start, so
// both fire once a period). Two schedules of one environment that fire at
// the same times deploy twice each tick.
func (s *Spec) SameTimes(o *Spec) bool {
	if a, b := s.Every(), o.Every(); a > 0 || b > 0 {
		return a == b
	}
	x, ok := s.sched.(*cron.SpecSchedule)
	y, ok2 := o.sched.(*cron.SpecSchedule)
	if !ok || !ok2 {
		return false
	}
	// robfig/cron marks a field written "*" (or "?") with its top bit:
	// the days match when both day fields do if either is "*", when either
	// does otherwise (as in Vixie cron). The same days are the same bits
	// read the same way.
	const star = 1 << 63
	and := func(c *cron.SpecSchedule) bool { return c.Dom&star != 0 || c.Dow&star != 0 }
	return x.Second&^star == y.Second&^star && x.Minute&^star == y.Minute&^star && x.Hour&^star == y.Hour&^star &&
		x.Dom&^star == y.Dom&^star && x.Month&^star == y.Month&^star && x.Dow&^star == y.Dow&^star &&
		and(x) == and(y) && s.zone.String() == o.zone.String()
}

// civilDays numbers the calendar day of t (in its own zone).
func civilDays(t time.Time) int {
	y, m, d := t.Date()
	return int(time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400)
}
