package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

func TestExitCodeOf(t *testing.T) {
	failed := &manent.Deployment{ID: "dpl_1", State: manent.StateError, Error: `step "deploy" failed: boom`}
	tests := []struct {
		name string
		err  error
		want ExitCode
	}{
		{"nil", nil, ExitOK},
		{"plain error", errors.New("something broke"), ExitFailed},
		{"silent", &SilentError{Code: ExitFailed}, ExitFailed},
		{"silent usage", &SilentError{Code: ExitUsage}, ExitUsage},
		{"usage", usageErrorf("missing deploy id"), ExitUsage},
		{"wrapped usage", fmt.Errorf("ctx: %w", &UsageError{Err: errors.New("bad flag")}), ExitUsage},
		{"timeout", &TimeoutError{ID: "dpl_1", State: manent.StatePending, After: time.Minute}, ExitTimeout},
		{"deadline", context.DeadlineExceeded, ExitTimeout},
		{"interrupted", context.Canceled, ExitInterrupted},
		{"deploy failed", &DeployFailedError{Deployment: failed}, ExitFailed},
		{"unreachable", &api.UnreachableError{Server: "http://x", Err: errors.New("connection refused")}, ExitUnreachable},
		{"wrapped unreachable", fmt.Errorf("status: %w", &api.UnreachableError{Server: "http://x", Err: errors.New("EOF")}), ExitUnreachable},
		{"server error", &api.ServerError{Server: "http://x", Status: 500, Message: "internal error"}, ExitUnreachable},
		{"wrapped server error", fmt.Errorf("status: %w", &api.ServerError{Server: "http://x", Status: 503}), ExitUnreachable},
		{"invalid", manent.Errorf(manent.EInvalid, "invalid descriptor"), ExitFailed},
		{"conflict", manent.Errorf(manent.EConflict, "already final"), ExitFailed},
		{"too large", manent.Errorf(manent.ETooLarge, "too large"), ExitFailed},
		{"unauthorized", manent.Errorf(manent.EUnauthorized, "no token"), ExitUsage},
		{"forbidden", manent.Errorf(manent.EForbidden, "not allowed"), ExitUsage},
		{"not found", manent.Errorf(manent.ENotFound, "no such deploy"), ExitUsage},
		{"too many requests", manent.Errorf(manent.ETooManyRequests, "slow down"), ExitUnreachable},
		{"unavailable", manent.Errorf(manent.EUnavailable, "db down"), ExitUnreachable},
		{"internal", manent.Errorf(manent.EInternal, "bug"), ExitUnreachable},
		{"unknown code", manent.Errorf("weird", "?"), ExitFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ExitCodeOf(tt.err); got != tt.want {
				t.Errorf("ExitCodeOf(%v) = %d, want %d", tt.err, got, tt.want)
			}
		})
	}
}

func TestPrintError(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"silent", &SilentError{Code: ExitFailed}, ""},
		{"plain", errors.New("boom"), "Error: boom\n"},
		{
			"usage with hint",
			&UsageError{Err: errors.New("unknown flag: --x"), Hint: "Run 'manent list --help' for usage."},
			"Error: unknown flag: --x\nRun 'manent list --help' for usage.\n",
		},
		{
			"field errors",
			&manent.Error{Code: manent.EInvalid, Message: "invalid descriptor", Fields: []manent.FieldError{
				{Path: "/artifact/url", Message: "must be a URL", Line: 5, Column: 8},
				{Path: "/version", Message: "missing"},
				{Message: "no target"},
			}},
			"Error: invalid descriptor\n  /artifact/url (5:8): must be a URL\n  /version: missing\n  no target\n",
		},
		{
			"field errors of a file",
			&InFileError{Name: "deploy.yml", Err: &manent.Error{Code: manent.EInvalid, Message: "invalid descriptor", Fields: []manent.FieldError{
				{Path: "/schedule/at", Message: "is already past", Line: 23, Column: 16},
				{Path: "/version", Message: "missing"},
				{Message: "no target"},
			}}},
			"Error: invalid descriptor\n  deploy.yml:23:16: /schedule/at: is already past\n  deploy.yml: /version: missing\n  deploy.yml: no target\n",
		},
		{
			"deploy failed",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateError, Error: `step "deploy" failed: exit status 1`, Rollback: "failed"}},
			"Error: step \"deploy\" failed: exit status 1\nrollback: failed\n",
		},
		{
			"rollback failed names the undo that failed",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateError, Error: `step "post-test" failed: exit status 3`, Rollback: "failed",
				Steps: []manent.Step{
					{Name: "post-test", State: manent.StepError, Error: "exit status 3"},
					{Name: "rollback:activation", State: manent.StepSuccess},
					{Name: "rollback:deploy", State: manent.StepError, Error: "script sh exited with status 12; last output: rsync: connection unexpectedly closed"},
				}}},
			"Error: step \"post-test\" failed: exit status 3\nrollback: failed\nstep \"rollback:deploy\" failed: script sh exited with status 12; last output: rsync: connection unexpectedly closed\n",
		},
		{
			"cancelled",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateCancelled}},
			"Error: cancelled\n",
		},
		{
			"cancelled by",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateCancelled, Error: "cancelled by token:bob"}},
			"Error: cancelled by token:bob\n",
		},
		{
			"cancelled with rollback disabled",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateCancelled,
				Error: "cancelled by token:bob; the release stays live on the waves activated before the cancel (rollback is disabled)"}},
			"Error: cancelled by token:bob; the release stays live on the waves activated before the cancel (rollback is disabled)\n",
		},
		{
			"superseded",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateCancelled, Error: "superseded by sch_1@2026-01-01T02:00:00Z"}},
			"Error: superseded by sch_1@2026-01-01T02:00:00Z\n",
		},
		{
			"rejected",
			&DeployFailedError{Deployment: &manent.Deployment{State: manent.StateRejected, Error: "rejected by oidc:ann"}},
			"Error: REJECTED: rejected by oidc:ann\n",
		},
		{
			"timeout",
			&TimeoutError{ID: "dpl_1", State: manent.StatePending, After: 30 * time.Minute},
			"Error: timeout: deploy dpl_1 is still PENDING after 30m\nhint: the deploy goes on: follow it with 'manent wait dpl_1'\n",
		},
		{
			"unauthorized",
			manent.Errorf(manent.EUnauthorized, "missing bearer token"),
			"Error: missing bearer token\nhint: pass --token, set MANENT_TOKEN, or store one with 'manent login' (see 'manent context')\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			printError(&buf, tt.err)
			if got := buf.String(); got != tt.want {
				t.Errorf("printError() wrote\n%q\nwant\n%q", got, tt.want)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{250 * time.Millisecond, "250ms"},
		{1234 * time.Millisecond, "1.234s"},
		{14 * time.Second, "14s"},
		{65 * time.Second, "1m5s"},
		{30 * time.Minute, "30m"},
		{2 * time.Hour, "2h"},
		{2*time.Hour + 3*time.Second, "2h0m3s"},
		{20 * time.Millisecond, "20ms"},
	}
	for _, tt := range tests {
		if got := formatDuration(tt.in); got != tt.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
