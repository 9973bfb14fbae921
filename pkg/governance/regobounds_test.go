package governance_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/governance"
	"github.com/manent-io/manent/pkg/manent"
)

// regoInput is a deploy of billing to prod by token:ci at a fixed time.
func regoInput() governance.Input {
	return governance.Input{Descriptor: billing("prod"), Identity: manent.Identity{Subject: "token:ci"},
		Now: time.Date(2026, 3, 28, 12, 0, 0, 0, time.UTC)}
}

// A policy that takes too long is stopped at Rego.Timeout, even when the
// caller's context has no deadline (the config step, a cron tick), with an
// error that names the policy and says what to do (OPA gives no location
// for a cancelled evaluation, so no rule).
func TestRegoStoppedAtItsTimeout(t *testing.T) {
	p, err := governance.ParseRego("slow.rego", `package manent

deny contains msg if {
	input.environment.name == "prod"
	n := count([x | some x in numbers.range(1, 100000000000)])
	msg := sprintf("%d", [n])
}
`)
	if err != nil {
		t.Fatal(err)
	}
	p.Timeout = 3 * time.Second
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := p.Decide(context.Background(), regoInput())
		done <- err
	}()
	// Meanwhile another environment's deploy is decided at once: nothing
	// serializes evaluations.
	staging := regoInput()
	staging.Descriptor = billing("staging")
	if _, err := p.Decide(context.Background(), staging); err != nil {
		t.Fatalf("staging: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("prod's evaluation ended (%v) before staging's was answered: staging waited for it", err)
	default:
	}
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the policy still runs after 20 s: nothing bounds its evaluation")
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the policy was stopped after %s, want about 3s", took)
	}
	for _, want := range []string{"rego:slow.rego", "did not decide within 3s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// A runtime error names the policy, the rule and its line.
func TestRegoRuntimeErrorNamesTheRule(t *testing.T) {
	p, err := governance.ParseRego("strict.rego", `package manent

approvals := {"count": 1} if input.environment.name == "prod"

deny contains msg if {
	input.environment.name == "prod"
	t := time.parse_rfc3339_ns(input.descriptor.version)
	msg := sprintf("%d", [t])
}
`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Decide(context.Background(), regoInput())
	for _, want := range []string{"rego:strict.rego", "rule deny", "strict.rego:7", "time.parse_rfc3339_ns"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// A decision of many megabytes (a deny reason per element of a big range)
// is refused with its size, not saved with the deploy nor written into an
// error of that size.
func TestRegoHugeDecisionRefused(t *testing.T) {
	p, err := governance.ParseRego("huge.rego", `package manent

pad := concat("", ["x" | some _ in numbers.range(1, 200)])

deny contains msg if {
	some i in numbers.range(1, 6000)
	msg := sprintf("%d %s", [i, pad])
}
`)
	if err != nil {
		t.Fatal(err)
	}
	// The size is what is refused, not the time: under -race on a busy
	// machine the 5 s default fired first.
	p.Timeout = 2 * time.Minute
	_, err = p.Decide(context.Background(), regoInput())
	if err == nil || !strings.Contains(err.Error(), "rego:huge.rego") || !strings.Contains(err.Error(), "more than 1 MiB") {
		t.Fatalf("error %v, want the decision refused for its size", err)
	}
	if len(err.Error()) > 1024 {
		t.Errorf("the error is %d bytes", len(err.Error()))
	}
}
