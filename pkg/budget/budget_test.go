package budget

import (
	"strconv"
	"testing"
	"time"
)

var start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Allow takes a token a call; past perMin it says how long until the next
// one, refilled at perMin a minute.
func TestAllowRefills(t *testing.T) {
	now := start
	l := New(2, func() time.Time { return now })
	for i := range 2 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("call %d refused within the budget", i+1)
		}
	}
	if ok, wait := l.Allow("a"); ok || wait != 30*time.Second {
		t.Fatalf("past the budget: ok %v, wait %s; want refused for 30s", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key refused")
	}
	now = now.Add(30 * time.Second)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("refused after a token was refilled")
	}
	if ok, wait := l.Allow("a"); ok || wait != 30*time.Second {
		t.Fatalf("refill spent: ok %v, wait %s; want refused for 30s", ok, wait)
	}
}

// A nil Limiter, or one of perMin <= 0, lets everything through.
func TestOffLetsThrough(t *testing.T) {
	for _, l := range []*Limiter{nil, New(0, nil), New(-1, nil)} {
		for range 3 {
			l.Refused("a")
			if ok, _ := l.Allow("a"); !ok {
				t.Fatalf("%v: Allow refused", l)
			}
			if ok, _, _, _ := l.Admit("a"); !ok {
				t.Fatalf("%v: Admit refused", l)
			}
		}
	}
}

// A limited key is answered no until its budget is whole again; the
// stretch is reported once when it begins and once, with its count, when
// the next call is let through. A budget emptied without a 429 ends with
// nothing to record.
func TestStretch(t *testing.T) {
	now := start
	l := New(2, nil)
	l.SetClock(func() time.Time { return now })
	for range 2 {
		if ok, _, _, _ := l.Admit("a"); !ok {
			t.Fatal("refused before any refusal")
		}
		l.Refused("a")
	}
	var begins int
	for i := range 5 {
		ok, wait, b, _ := l.Admit("a")
		if ok || wait != time.Minute {
			t.Fatalf("429 %d: ok %v, wait %s; want 429 for a minute", i, ok, wait)
		}
		if b {
			begins++
		}
	}
	if ok, _, _, _ := l.Admit("b"); !ok || begins != 1 {
		t.Fatalf("another key let through: %v; %d stretches begun, want 1", ok, begins)
	}
	now = now.Add(30 * time.Second)
	if ok, wait, _, _ := l.Admit("a"); ok || wait != 30*time.Second {
		t.Fatalf("half a minute later: ok %v, wait %s; want 429 for 30s", ok, wait)
	}
	now = now.Add(30 * time.Second)
	ok, _, _, ended := l.Admit("a")
	if !ok || ended == nil || ended.Answered != 6 || ended.Until.Sub(ended.Since) != time.Minute {
		t.Fatalf("a minute later: ok %v, ended %+v; want let through, a stretch of 6 answers over a minute", ok, ended)
	}
	l.Refused("a")
	l.Refused("a")
	now = now.Add(time.Minute)
	if ok, _, _, ended := l.Admit("a"); !ok || ended != nil {
		t.Fatalf("limited without a 429: ok %v, ended %+v; want let through and nothing to record", ok, ended)
	}
}

// Past maxBuckets keys, those whose budget is whole and that are not
// limited are forgotten; a limited key, and one whose budget is not
// whole, are kept.
func TestForgetsOnlyWholeBudgets(t *testing.T) {
	now := start
	l := New(2, func() time.Time { return now })
	l.Refused("limited")
	l.Refused("limited")
	l.Allow("spent")
	for i := len(l.buckets); i < maxBuckets; i++ {
		l.Allow("k" + strconv.Itoa(i))
	}
	now = now.Add(time.Minute) // every budget but the limited one's is whole
	l.Refused("limited")       // keep it spent
	l.Allow("spent")
	l.Allow("spent")
	l.Allow("new")
	if _, ok := l.buckets["k3"]; ok {
		t.Error("a whole budget is remembered past the bound")
	}
	if len(l.buckets) != 3 {
		t.Errorf("%d keys remembered past the bound, want 3 (limited, spent, new)", len(l.buckets))
	}
	if ok, _, _, _ := l.Admit("limited"); ok {
		t.Error("a limited key was forgotten: let through")
	}
	if ok, _ := l.Allow("spent"); ok {
		t.Error("a spent budget was forgotten: allowed")
	}
}
