# The governance policy of governance.yaml, in Rego: the same rules give the
# same decisions on cases.yaml. It shows the shape manent expects:
#
#   package manent
#   decision := {"allowed", "deny", "approvals", "change_required",
#                "freeze", "break_glass", "missing_promotions"}
#
# The rules are kept as data at the top, and the logic below them mirrors
# the YAML engine, so this file is also a template: edit the data, or
# replace the logic with plain rules ("deny contains msg if …").
package manent

# ---------------------------------------------------------------- the rules

freeze_rules := [
	{
		"name": "year-end", "environments": ["prod"], "regions": [],
		"from": "2026-12-20T00:00:00Z", "to": "2027-01-07T00:00:00Z",
		"allow": ["oidc:sre-lead@example.com"],
	},
	{
		"name": "weekend", "environments": ["prod"], "regions": ["eu-1"],
		"recurring": {"timezone": "Europe/Rome", "from": "Fri 16:00", "to": "Mon 08:00"},
		"allow": ["group:sre"],
	},
	{
		"name": "nightly", "environments": ["lab-*"], "regions": [],
		"recurring": {"timezone": "America/New_York", "from": "22:00", "to": "06:00"},
		"allow": [],
	},
	{
		"name": "saturday-night", "environments": ["sandbox"], "regions": [],
		"recurring": {"timezone": "Europe/Rome", "from": "Sat 22:00", "to": "Sun 02:30"},
		"allow": [],
	},
]

promotion_rules := [
	{"environment": "prod", "requires": ["staging"]},
	{"environment": "perf-*", "requires": ["qa", "staging"]},
]

# First match wins; count 0 exempts.
approval_rules := [
	{"environments": ["prod"], "applications": ["hotfix-*"], "count": 0, "approvers": [], "expires": ""},
	{
		"environments": ["prod"], "applications": ["payments-*"], "count": 2,
		"approvers": ["group:payments-leads", "oidc:*@payments.example"], "expires": "12h",
	},
	{"environments": ["prod"], "applications": ["*"], "count": 1, "approvers": ["group:sre"], "expires": "24h"},
	{"environments": ["staging"], "applications": ["billing"], "count": 1, "approvers": ["group:billing-leads"], "expires": ""},
]

change_rules := [
	{"environments": ["prod"], "applications": []},
	{"environments": ["staging"], "applications": ["payments-*"]},
]

# ------------------------------------------------------------- the decision

decision := {
	"allowed": count(deny) == 0,
	"deny": deny,
	"approvals": approvals,
	"change_required": change_required,
	"freeze": freeze,
	"break_glass": break_glass,
	"missing_promotions": missing_promotions,
}

application := input.descriptor.application

version := input.descriptor.version

environment := input.environment.name

now := time.parse_rfc3339_ns(input.now)

# --------------------------------------------------------------- patterns

# Globs like path.Match: "*" stops at "/" only.
match(pattern, value) if glob.match(pattern, ["/"], value)

# An empty scope means everything.
in_scope(patterns, _) if count(patterns) == 0

in_scope(patterns, value) if {
	some p in patterns
	match(p, value)
}

# The identity matches a subject pattern, or "group:<g>" for one of its groups.
identity_matches(patterns) if {
	some p in patterns
	match(p, input.identity.subject)
}

identity_matches(patterns) if {
	some p in patterns
	some g in input.identity.groups
	match(p, concat("", ["group:", g]))
}

# ---------------------------------------------------------------- freezes

# hits: the active freezes that concern this deploy.
hits contains hit if {
	some i, f in freeze_rules
	in_scope(f.environments, environment)
	some covered in [frozen_regions(f)]
	reopens := reopening(f)
	hit := {
		"index": i, "name": f.name, "reopens": reopens,
		"regions": covered, "bypassed": bypassed(f),
	}
}

bypassed(f) if identity_matches(f.allow)

default bypassed(_) := false

# frozen_regions(f): the regions of the deploy f freezes ([] when f has no
# regions; f's own patterns when the deploy names none); undefined when f
# concerns none of them.
frozen_regions(f) := [] if count(f.regions) == 0

frozen_regions(f) := sort(f.regions) if {
	count(f.regions) > 0
	count(input.environment.regions) == 0
}

frozen_regions(f) := covered if {
	count(f.regions) > 0
	count(input.environment.regions) > 0
	covered := sort({r | some r in input.environment.regions; some p in f.regions; match(p, r)})
	count(covered) > 0
}

# reopening(f): when f reopens, if it is active now.
reopening(f) := to if {
	not f.recurring
	to := time.parse_rfc3339_ns(f.to)
	time.parse_rfc3339_ns(f.from) <= now
	now < to
}

reopening(f) := reopens if {
	r := f.recurring
	tz := r.timezone
	from := week_clock(r.from)
	to := week_clock(r.to)
	clock := time.clock([now, tz])
	minutes := (clock[0] * 60) + clock[1]
	m := minutes + week_offset(from, tz)
	period := cycle(from)
	in_window(pos(from), pos(to), m)
	days := floor((minutes + (((pos(to) - m) + period) % period)) / 1440)
	[y, mo, d] := time.date([now, tz])
	midnight := time.add_date(time.parse_rfc3339_ns(sprintf("%04d-%02d-%02dT00:00:00Z", [y, mo, d])), 0, 0, days)
	reopens := local_to_utc(midnight + ((to.minute * 60) * 1000000000), tz)
}

in_window(from, to, m) if {
	from < to
	from <= m
	m < to
}

in_window(from, to, m) if {
	from > to
	m >= from
}

in_window(from, to, m) if {
	from > to
	m < to
}

weekdays := {
	"mon": 0, "monday": 0, "tue": 1, "tuesday": 1, "wed": 2, "wednesday": 2,
	"thu": 3, "thursday": 3, "fri": 4, "friday": 4, "sat": 5, "saturday": 5,
	"sun": 6, "sunday": 6,
}

day_index := {"Monday": 0, "Tuesday": 1, "Wednesday": 2, "Thursday": 3, "Friday": 4, "Saturday": 5, "Sunday": 6}

# week_clock("Fri 16:00") = {"day": 4, "minute": 960}; week_clock("22:00") = {"day": -1, "minute": 1320}
week_clock(s) := {"day": weekdays[lower(parts[0])], "minute": minute_of_day(parts[1])} if {
	parts := regex.split(`\s+`, trim_space(s))
	count(parts) == 2
}

week_clock(s) := {"day": -1, "minute": minute_of_day(trim_space(s))} if {
	count(regex.split(`\s+`, trim_space(s))) == 1
}

minute_of_day(hm) := (to_number(p[0]) * 60) + to_number(p[1]) if p := split(hm, ":")

pos(c) := c.minute if c.day < 0

pos(c) := (c.day * 1440) + c.minute if c.day >= 0

cycle(c) := 1440 if c.day < 0

cycle(c) := 10080 if c.day >= 0

week_offset(c, _) := 0 if c.day < 0

week_offset(c, tz) := day_index[time.weekday([now, tz])] * 1440 if c.day >= 0

# local_to_utc turns a wall-clock time in tz (written as if it were UTC)
# into the instant, like Go's time.Date: correct across DST changes. A time
# the clocks pass twice (they went back) is its first instant still to
# come, as in the YAML rules. A time the clocks skip (they went forward) is
# never shown: it is the jump, the first minute whose wall clock is past it
# (the guess lies within 3 hours after it, or before it).
local_to_utc(wall, tz) := min(earlier) if {
	later := local_guess(wall, tz)
	earlier := {e | some back in [3600000000000, 1800000000000]; e := later - back; e > now; wall_of(e, tz) == wall}
	count(earlier) > 0
} else := min(after) if {
	guess := local_guess(wall, tz)
	wall_of(guess, tz) != wall
	after := {i | some k in numbers.range(-180, 180); i := guess + (k * 60000000000); wall_of(i, tz) > wall}
} else := local_guess(wall, tz)

local_guess(wall, tz) := wall - utc_offset(wall - utc_offset(wall, tz), tz)

# wall_of is the wall-clock time in tz of the instant ns, written as if UTC.
wall_of(ns, tz) := ns + utc_offset(ns, tz)

utc_offset(ns, tz) := seen - ns if {
	[y, mo, d] := time.date([ns, tz])
	[h, mi, s] := time.clock([ns, tz])
	seen := time.parse_rfc3339_ns(sprintf("%04d-%02d-%02dT%02d:%02d:%02dZ", [y, mo, d, h, mi, s]))
}

blocking := [h | some h in hits; not h.bypassed]

passed := [h | some h in hits; h.bypassed]

deny contains msg if {
	some h in blocking
	msg := sprintf("%s is frozen by %q until %s", [freeze_scope(h), h.name, rfc3339(h.reopens)])
}

freeze_scope(h) := environment if count(h.regions) == 0

freeze_scope(h) := sprintf("%s (regions %s)", [environment, concat(", ", h.regions)]) if count(h.regions) > 0

rfc3339(ns) := time.format([ns, "UTC", "RFC3339"])

# The freeze to report: the one that reopens last, the first on a tie.
latest(hs) := h if {
	last := max({x.reopens | some x in hs})
	first := min({x.index | some x in hs; x.reopens == last})
	some h in hs
	h.index == first
}

default freeze := null

freeze := {"name": h.name, "reopens_at": rfc3339(h.reopens)} if {
	count(blocking) > 0
	h := latest(blocking)
}

freeze := {"name": h.name, "reopens_at": rfc3339(h.reopens)} if {
	count(blocking) == 0
	count(passed) > 0
	h := latest(passed)
}

default break_glass := false

break_glass if {
	count(blocking) == 0
	count(passed) > 0
}

# -------------------------------------------------------------- promotion

required_environments contains env if {
	some p in promotion_rules
	match(p.environment, environment)
	some env in p.requires
}

missing_promotions contains env if {
	some env in required_environments
	not succeeded(env)
}

# The same artifact, when the deploy's digest and the success's are known:
# the same version rebuilt is not promoted.
succeeded(env) if {
	some s in input.inventory.successes
	s.application == application
	s.version == version
	s.environment == env
	same_artifact(s)
}

same_artifact(s) if not input.descriptor.artifact.sha256
same_artifact(s) if not s.sha256
same_artifact(s) if lower(s.sha256) == lower(input.descriptor.artifact.sha256)

# Environments where the version succeeded with another artifact only.
other_artifact[env] := lower(s.sha256) if {
	some env in missing_promotions
	some s in input.inventory.successes
	s.application == application
	s.version == version
	s.environment == env
}

# Environments where the version's success was taken back by a rollback
# there: the server leaves it out of successes and lists it here.
rolled_back[env] := r if {
	some env in missing_promotions
	not other_artifact[env]
	some r in input.inventory.rolled_back
	r.application == application
	r.version == version
	r.environment == env
}

deny contains msg if {
	some env, r in rolled_back
	at := time.format([time.parse_rfc3339_ns(r.rolled_back_at), "UTC", "2006-01-02T15:04:05Z07:00"])
	msg := sprintf("promotion to %s requires %s %s to succeed first in %s: release %s (%s) was rolled back in %s at %s by %s (rollback %s); a rollback there says it is not good: deploy %s to %s again for it to count", [environment, application, version, env, version, r.deployment_id, env, at, r.by, r.rollback_id, version, env])
}

deny contains msg if {
	not_run := {env | some env in missing_promotions; not other_artifact[env]; not rolled_back[env]}
	count(not_run) > 0
	msg := sprintf("promotion to %s requires %s %s to succeed first in: %s", [environment, application, version, concat(", ", sort(not_run))])
}

deny contains msg if {
	some env, digest in other_artifact
	msg := sprintf("promotion to %s requires the artifact of %s %s that succeeded in %s (sha256 %s), not sha256 %s", [environment, application, version, env, digest, lower(input.descriptor.artifact.sha256)])
}

# -------------------------------------------------------------- approvals

default approvals := null

approvals := {"count": r.count, "approvers": r.approvers, "expires": r.expires} if {
	matching := {i |
		some i, a in approval_rules
		in_scope(a.environments, environment)
		in_scope(a.applications, application)
	}
	count(matching) > 0
	r := approval_rules[min(matching)]
	r.count > 0
}

# ----------------------------------------------------------------- change

default change_required := false

change_required if {
	some c in change_rules
	in_scope(c.environments, environment)
	in_scope(c.applications, application)
}
