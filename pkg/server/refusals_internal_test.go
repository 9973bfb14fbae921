package server

import (
	"testing"
	"time"
)

// A limited identity is answered 429 until its bucket is full again; the
// stretch is reported once when it begins and once, with its count, when
// the next request is let through. A bucket emptied without a 429 ends
// with nothing to record.
func TestRefusalStretch(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newRefusalLimiter(2)
	l.now = func() time.Time { return now }
	for range 2 {
		if ok, _, _, _ := l.admit("a"); !ok {
			t.Fatal("refused before any refusal")
		}
		l.refused("a")
	}
	var begins int
	for i := range 5 {
		ok, wait, b, _ := l.admit("a")
		if ok || wait != time.Minute {
			t.Fatalf("429 %d: ok %v, wait %s; want 429 for a minute", i, ok, wait)
		}
		if b {
			begins++
		}
	}
	if ok, _, _, _ := l.admit("b"); !ok || begins != 1 {
		t.Fatalf("another identity let through: %v; %d stretches begun, want 1", ok, begins)
	}
	now = now.Add(30 * time.Second)
	if ok, wait, _, _ := l.admit("a"); ok || wait != 30*time.Second {
		t.Fatalf("half a minute later: ok %v, wait %s; want 429 for 30s", ok, wait)
	}
	now = now.Add(30 * time.Second)
	ok, _, _, ended := l.admit("a")
	if !ok || ended == nil || ended.answered != 6 || ended.until.Sub(ended.since) != time.Minute {
		t.Fatalf("a minute later: ok %v, ended %+v; want let through, a stretch of 6 answers over a minute", ok, ended)
	}
	l.refused("a")
	l.refused("a")
	now = now.Add(time.Minute)
	if ok, _, _, ended := l.admit("a"); !ok || ended != nil {
		t.Fatalf("limited without a 429: ok %v, ended %+v; want let through and nothing to record", ok, ended)
	}
}
