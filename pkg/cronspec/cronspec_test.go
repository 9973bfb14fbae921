package cronspec

import (
	"strings"
	"testing"
	"time"
)

func TestParseNext(t *testing.T) {
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	// Thursday 2026-12-03 10:17:30 UTC.
	now := time.Date(2026, 12, 3, 10, 17, 30, 0, time.UTC)
	tests := []struct {
		expr string
		want time.Time
	}{
		{"0 3 * * 1-5", time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)},    // Friday 03:00 UTC
		{"0 3 * * 6", time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)},      // Saturday
		{"*/15 * * * *", time.Date(2026, 12, 3, 10, 30, 0, 0, time.UTC)}, // quarter hours
		{"  0 3 * * 1-5  ", time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 0 3 * * *", time.Date(2026, 12, 4, 3, 0, 0, 0, paris)}, // 02:00 UTC
		{"TZ=Europe/Paris 0 12 * * *", time.Date(2026, 12, 3, 12, 0, 0, 0, paris)},
		{"CRON_TZ=UTC @daily", time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)},
		{"@hourly", time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC)},
		{"@daily", time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)},
		{"@midnight", time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)},
		{"@weekly", time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)}, // Sunday
		{"@monthly", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"@yearly", time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{"@every 90m", now.Add(90 * time.Minute)},
		{"@every 8760h", now.Add(8760 * time.Hour)}, // the longest accepted
		{"0 0 29 2 *", time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		// 7 is Sunday, as in standard cron.
		{"0 3 * * 7", time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)},
		{"0 3 * * 5-7", time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)}, // Friday
		{"0 3 * * 6-7", time.Date(2026, 12, 5, 3, 0, 0, 0, time.UTC)}, // Saturday
		{"0 3 * * 7-7", time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}, // Sunday
		{"0 3 * * 1,7", time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)}, // Sunday, then Monday
		{"0 3 * * MON-FRI", time.Date(2026, 12, 4, 3, 0, 0, 0, time.UTC)},
		{"0 12 * * 4-7/3", time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}, // Thursday and Sunday
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(now); !got.Equal(tt.want) {
				t.Errorf("Next(%s) = %s, want %s", now, got, tt.want)
			}
			if s.String() != tt.expr {
				t.Errorf("String() = %q, want the expression as written", s.String())
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ expr, want string }{
		{"", "empty expression"},
		{"   ", "empty expression"},
		{"0 3 * *", "expected exactly 5 fields"},
		{"0 0 3 * * *", "expected exactly 5 fields"}, // 6 fields (seconds) are not standard cron
		{"61 * * * *", "above maximum"},
		{"0 3 * * 8", "above maximum"},
		{"0 3 * * 3-8", "above maximum"},
		{"*/0 * * * *", "step"},
		{"@sometimes", "unrecognized descriptor"},
		{"@every", "@every takes a duration"},
		{"@every -1m", "at least 1s"},
		{"@every 500ms", "at least 1s"},
		{"@every soon", "@every takes a duration"},
		{"@every 100000h", "at most 8760h"},
		{"@every 2562047h", "at most 8760h"},
		{"@every 8760h1s", "at most 8760h"},
		{"@every 1m0.5s", "whole seconds"},
		{"@every 1.5s", "whole seconds"},
		{"CRON_TZ=Mars/Olympus 0 3 * * *", "unknown time zone"},
		{"CRON_TZ=Local 0 3 * * *", "IANA time zone"},
		{"CRON_TZ=", "IANA time zone"},
		{"CRON_TZ=UTC", "missing after the time zone"},
		{"CRON_TZ=UTC CRON_TZ=UTC 0 3 * * *", "more than one"},
		{"0 0 30 2 *", "never fires"},
		{strings.Repeat("1,", 200) + " * * * *", "longer than 256"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err == nil {
				t.Fatalf("got %v, want an error", s)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestMinInterval(t *testing.T) {
	tests := []struct {
		expr string
		want time.Duration
	}{
		{"* * * * *", time.Minute},
		{"*/5 * * * *", 5 * time.Minute},
		{"0 3 * * 1-5", 24 * time.Hour},       // Monday to Friday: consecutive days
		{"0 3 * * 1", 7 * 24 * time.Hour},     // once a week
		{"0 3 * * 1,3", 2 * 24 * time.Hour},   // Monday and Wednesday
		{"0,59 0,23 * * *", time.Minute},      // 23:59 then 00:00 the next day
		{"0,59 0,23 * * 1", 59 * time.Minute}, // the next day is no Monday
		{"0 0 1 * *", 28 * 24 * time.Hour},    // February
		{"0 0 28,1 2,3 *", 24 * time.Hour},    // February 28th, then March 1st
		{"0 0 29 2 *", 1461 * 24 * time.Hour}, // leap days, four years apart
		{"CRON_TZ=Asia/Tokyo 30 */6 * * *", 6 * time.Hour},
		{"@hourly", time.Hour},
		{"@daily", 24 * time.Hour},
		{"@weekly", 7 * 24 * time.Hour},
		{"@every 1s", time.Second},
		{"@every 1h30m", 90 * time.Minute},
		{"0 0 1 1 *", 365 * 24 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			s, err := Parse(tt.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.MinInterval(); got != tt.want {
				t.Errorf("MinInterval() = %s, want %s", got, tt.want)
			}
		})
	}
	once, err := Parse("0 0 29 2 1") // February 29th or any Monday of February
	if err != nil {
		t.Fatal(err)
	}
	if got := once.MinInterval(); got != 24*time.Hour { // Monday the 28th, then the 29th
		t.Errorf("MinInterval() = %s, want 24h", got)
	}
}

func TestDBOS(t *testing.T) {
	tests := []struct{ expr, sched, zone string }{
		{"0 3 * * 1-5", "0 0 3 * * 1-5", "UTC"},
		{"CRON_TZ=Europe/Paris 0 3 * * *", "0 0 3 * * *", "Europe/Paris"},
		{"@daily", "@daily", "UTC"},
		{"@every 10m", "@every 10m", "UTC"},
		{"0 3 * * 5-7", "0 0 3 * * 5-6,0", "UTC"}, // DBOS's parser knows only 0-6
		{"CRON_TZ=UTC 0 3 * * 7", "0 0 3 * * 0", "UTC"},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		if sched, zone := s.DBOS(); sched != tt.sched || zone != tt.zone {
			t.Errorf("%s: DBOS() = %q, %q; want %q, %q", tt.expr, sched, zone, tt.sched, tt.zone)
		}
	}
}

func TestNextSince(t *testing.T) {
	s, err := Parse("@every 10m")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 12, 3, 10, 3, 0, 0, time.UTC)
	now := time.Date(2026, 12, 3, 10, 27, 0, 0, time.UTC)
	if got, want := s.NextSince(start, now), time.Date(2026, 12, 3, 10, 33, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("@every: got %s, want %s", got, want)
	}
	d, _ := Parse("@hourly")
	if got, want := d.NextSince(start, now), time.Date(2026, 12, 3, 11, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("@hourly: got %s, want %s", got, want)
	}
}

// At the end of summer time a schedule inside the repeated hour is fired
// twice by the scheduler; Repeated marks the second fire (Vixie cron runs
// it once). Other schedules are not affected.
func TestRepeatedAtTheEndOfSummerTime(t *testing.T) {
	rome, err := Parse("CRON_TZ=Europe/Rome 30 2 * * *")
	if err != nil {
		t.Fatal(err)
	}
	first := rome.Next(time.Date(2026, 10, 24, 12, 0, 0, 0, time.UTC))
	second := rome.Next(first)
	if !first.Equal(time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)) || !second.Equal(time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC)) {
		t.Fatalf("fire times %v, %v: want 02:30 CEST and 02:30 CET (the scheduler's double fire)", first, second)
	}
	if rome.Repeated(first, first) || !rome.Repeated(first, second) {
		t.Errorf("Repeated(first, second) = %v: want the second 02:30 marked", rome.Repeated(first, second))
	}
	next := rome.Next(second)
	if rome.Repeated(second, next) {
		t.Errorf("the next day's 02:30 is marked repeated")
	}
	hourly, _ := Parse("CRON_TZ=Europe/Rome 0 * * * *")
	a := time.Date(2026, 10, 25, 0, 0, 0, 0, time.UTC) // 02:00 CEST
	b := time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC) // 02:00 CET
	if !hourly.Repeated(a, b) {
		t.Errorf("hourly: the second 02:00 is not marked")
	}
	utc, _ := Parse("30 2 * * *")
	if utc.Repeated(time.Date(2026, 10, 25, 2, 30, 0, 0, time.UTC), time.Date(2026, 10, 26, 2, 30, 0, 0, time.UTC)) {
		t.Errorf("UTC: consecutive days marked repeated")
	}
	every, _ := Parse("@every 1h")
	if every.Repeated(a, b) {
		t.Errorf("@every: an interval is never a repeat")
	}
}

func TestPeriod(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 500, time.UTC)
	at := func(d time.Duration) time.Time { return start.Truncate(time.Second).Add(d) }
	tests := []struct {
		expr  string
		fired time.Time
		want  time.Time
	}{
		{"@every 1h", at(time.Hour + 13*time.Second), at(time.Hour)},
		{"@every 1h", at(2*time.Hour - time.Second), at(time.Hour)},
		{"@every 1h", at(2 * time.Hour), at(2 * time.Hour)},
		{"@every 90s", at(4 * time.Minute), at(3 * time.Minute)},
		{"@every 1h", at(-time.Minute), at(-time.Minute)}, // before the start: as fired
		{"@hourly", at(time.Hour + 13*time.Second), at(time.Hour + 13*time.Second)},
	}
	for _, tt := range tests {
		s, err := Parse(tt.expr)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Period(start, tt.fired); !got.Equal(tt.want) {
			t.Errorf("%s fired at %s: period %s, want %s", tt.expr, tt.fired, got, tt.want)
		}
	}
}

// A TZ= prefix (robfig/cron's other spelling) is read as CRON_TZ= is, and
// its mistakes quote it as written.
func TestTZPrefixIsQuotedAsWritten(t *testing.T) {
	for expr, want := range map[string]string{
		"TZ=Mars/Olympus 0 3 * * *": "TZ=Mars/Olympus: unknown time zone",
		"TZ=UTC":                    "TZ=UTC: the schedule is missing after the time zone",
		"TZ=Local @daily":           "TZ=Local: name an IANA time zone",
	} {
		if _, err := Parse(expr); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: got %v, want an error starting %q", expr, err, want)
		}
	}
}

func TestSameTimes(t *testing.T) {
	tests := []struct {
		a, b string
		same bool
	}{
		{"0 3 * * *", "0 3 * * *", true},
		{"0 3 * * *", "0  3 * * *", true},
		{"0 3 * * *", "CRON_TZ=UTC 0 3 * * *", true},
		{"0 3 * * 7", "0 3 * * 0", true},
		{"0 3 * * 1-5", "0 3 * * MON-FRI", true},
		{"@daily", "0 0 * * *", true},
		{"@every 1h", "@every 60m", true},
		{"0 3 * * *", "0 4 * * *", false},
		{"0 3 * * *", "CRON_TZ=Europe/Paris 0 3 * * *", false},
		{"0 3 1 * *", "0 3 1 * 0-6", false}, // the 1st, or every day (Vixie's OR of two day fields)
		{"@every 1h", "@hourly", false},
		{"@every 1h", "@every 2h", false},
	}
	for _, tt := range tests {
		a, err := Parse(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Parse(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.SameTimes(b); got != tt.same || b.SameTimes(a) != tt.same {
			t.Errorf("SameTimes(%q, %q) = %t, want %t", tt.a, tt.b, got, tt.same)
		}
	}
}
