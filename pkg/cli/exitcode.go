package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// ExitCode is the exit status of one run of the CLI (SPEC §7 [contract]).
type ExitCode int

// Exit codes. Only ExitCodeOf chooses among them.
const (
	// ExitOK: the command succeeded; for `deploy --wait` and `wait` the
	// deploy ended SUCCESS.
	ExitOK ExitCode = 0
	// ExitFailed: the deploy ended in another final state, or validation
	// failed (invalid descriptor, conflicting request).
	ExitFailed ExitCode = 1
	// ExitUsage: usage or configuration error: bad flag or argument, bad -o
	// value, unreadable file or config, missing or refused credentials,
	// unknown deploy.
	ExitUsage ExitCode = 2
	// ExitTimeout: --timeout elapsed while the deploy was not final.
	ExitTimeout ExitCode = 3
	// ExitUnreachable: the server could not be reached (no connection, no
	// answer within --request-timeout) or answered with a server error
	// (5xx, 429 after the retries); the message says which.
	ExitUnreachable ExitCode = 4
	// ExitInterrupted: the user interrupted the command (SIGINT/SIGTERM);
	// 128+SIGINT by shell convention.
	ExitInterrupted ExitCode = 130
)

// UsageError is a usage or configuration error (exit 2). Hint, when set, is
// printed on its own line after the message.
type UsageError struct {
	Err  error
	Hint string
}

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// usageErrorf builds a *UsageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// HintedError is Err with a next step printed on its own line after it
// ("hint: …"); the exit code is Err's.
type HintedError struct {
	Err  error
	Hint string
}

func (e *HintedError) Error() string { return e.Err.Error() }
func (e *HintedError) Unwrap() error { return e.Err }

// SilentError ends the run with Code after the command has already told the
// user why (e.g. `validate` printed the errors); nothing more is printed.
type SilentError struct{ Code ExitCode }

func (e *SilentError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// TimeoutError says --timeout elapsed while the deploy was in State (exit 3).
type TimeoutError struct {
	ID    string
	State manent.State
	After time.Duration
}

func (e *TimeoutError) Error() string {
	state := string(e.State)
	if state == "" {
		state = "not final"
	}
	return fmt.Sprintf("timeout: deploy %s is still %s after %s", e.ID, state, formatDuration(e.After))
}

// DeployFailedError says the deploy ended in a final state other than
// SUCCESS (exit 1). Its message is the failure reason, one fact per line.
type DeployFailedError struct{ Deployment *manent.Deployment }

func (e *DeployFailedError) Error() string {
	return strings.Join(failureReason(e.Deployment), "\n")
}

// ExitCodeOf maps the error a command returned to the exit code: the one
// place where errors become exit codes.
func ExitCodeOf(err error) ExitCode {
	if err == nil {
		return ExitOK
	}
	var (
		silent  *SilentError
		usage   *UsageError
		timeout *TimeoutError
		failed  *DeployFailedError
		domain  *manent.Error
	)
	switch {
	case errors.As(err, &silent):
		return silent.Code
	case errors.As(err, &usage):
		return ExitUsage
	case errors.As(err, &timeout):
		return ExitTimeout
	case errors.As(err, &failed):
		return ExitFailed
	case api.IsUnreachable(err), api.IsServerError(err):
		return ExitUnreachable
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, context.DeadlineExceeded):
		return ExitTimeout
	case errors.As(err, &domain):
		return exitCodeForCode(domain.Code)
	}
	return ExitFailed
}

// exitCodeForCode maps a domain error code (from the server's answer or from
// local parsing) to an exit code.
func exitCodeForCode(c manent.Code) ExitCode {
	switch c {
	case manent.EInvalid, manent.EConflict, manent.ETooLarge:
		return ExitFailed
	case manent.EUnauthorized, manent.EForbidden, manent.ENotFound:
		return ExitUsage
	case manent.ETooManyRequests, manent.EUnavailable, manent.EInternal:
		return ExitUnreachable
	}
	return ExitFailed
}

// printError writes err to w once: "Error: <message>", further lines of a
// multi-line message as they are, each field error on its own line, and a
// hint when there is one. A *SilentError prints nothing.
func printError(w io.Writer, err error) {
	var silent *SilentError
	if err == nil || errors.As(err, &silent) || errors.Is(err, context.Canceled) {
		// Nothing to explain; an interrupted command exits quietly (130).
		return
	}
	msg := err.Error()
	var domain *manent.Error
	if errors.As(err, &domain) && len(domain.Fields) > 0 && domain.Message == "" && domain.Err == nil {
		msg = "invalid request"
	}
	// The message carries the server's text (problem details, step errors):
	// sanitised like everything else the server says.
	first, rest, _ := strings.Cut(safeLines(msg), "\n")
	fmt.Fprintf(w, "Error: %s\n", first)
	if rest != "" {
		fmt.Fprintln(w, rest)
	}
	if domain != nil {
		var in *InFileError
		named := errors.As(err, &in)
		for _, fe := range domain.Fields {
			if named {
				// As validate prints them: an editor jumps to FILE:LINE:COL.
				fmt.Fprintf(w, "  %s\n", safeLines(formatValidationError(in.Name, toValidationErrors([]manent.FieldError{fe})[0])))
				continue
			}
			fmt.Fprintf(w, "  %s\n", safeLines(formatFieldError(fe)))
		}
	}
	if hint := errorHint(err); hint != "" {
		fmt.Fprintln(w, hint)
	}
	var refused *RefusedError
	if errors.As(err, &refused) {
		id := safeText(refused.ID)
		fmt.Fprintf(w, "hint: the server refused the token while following deploy %s (it expired or was revoked, or may not read the deploy); the deploy goes on on the server: follow it with 'manent wait %s' and a valid token (do not submit it again)\n", id, id)
	}
	var gone *GoneError
	if errors.As(err, &gone) {
		id := safeText(gone.ID)
		fmt.Fprintf(w, "hint: deploy %s was on the server while this command followed it and is no longer: the server's database was most likely restored from a backup taken before the deploy was submitted, which undoes the deploy (it will not run). Check with 'manent list' and submit it again if it should run\n", id)
	}
}

// InFileError is a refusal of the input file Name (a descriptor the server
// or the parser refused): its field errors are printed as validate prints
// them, "FILE:LINE:COL: /path: message", not "/path (LINE:COL): message".
type InFileError struct {
	Name string
	Err  error
}

func (e *InFileError) Error() string { return e.Err.Error() }
func (e *InFileError) Unwrap() error { return e.Err }

// inFile returns err as an *InFileError of file name when it carries field
// errors, else err as it is.
func inFile(name string, err error) error {
	var domain *manent.Error
	if name == "" || !errors.As(err, &domain) || len(domain.Fields) == 0 {
		return err
	}
	return &InFileError{Name: name, Err: err}
}

// formatFieldError prints "/path (line:col): message", leaving out what is
// unknown: "(line)" when the column is (a YAML syntax error).
func formatFieldError(fe manent.FieldError) string {
	var b strings.Builder
	b.WriteString(fe.Path)
	if fe.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if fe.Column > 0 {
			fmt.Fprintf(&b, "(%d:%d)", fe.Line, fe.Column)
		} else {
			fmt.Fprintf(&b, "(%d)", fe.Line) // a YAML syntax error: line only
		}
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(fe.Message)
	return b.String()
}

// errorHint is the line printed after err's message, "" for none: a next
// step starts "hint: " (a usage error's pointer to --help is cobra's).
func errorHint(err error) string {
	var notAPI *api.NotAPIAnswerError
	if errors.As(err, &notAPI) {
		// Not manent's answer: no hint about what manent meant.
		return "hint: --server (or MANENT_SERVER) may point at something other than manent-server"
	}
	var (
		hinted  *HintedError
		usage   *UsageError
		timeout *TimeoutError
	)
	switch {
	case errors.As(err, &hinted):
		return "hint: " + hinted.Hint
	case errors.As(err, &usage):
		return usage.Hint
	case errors.As(err, &timeout):
		return fmt.Sprintf("hint: the deploy goes on: follow it with 'manent wait %s'", timeout.ID)
	}
	var lost *LostError
	if errors.As(err, &lost) {
		id := safeText(lost.ID)
		return fmt.Sprintf("hint: deploy %s is kept on the server (it goes on there, or once the server is back): follow it with 'manent wait %s' (do not submit it again)", id, id)
	}
	if api.IsUnreachable(err) {
		return "hint: check --server (or MANENT_SERVER) and that manent-server is running"
	}
	if api.IsServerError(err) {
		return "hint: the server is reachable but failed; retry later or see the server log"
	}
	if manent.ErrorCode(err) == manent.EUnauthorized {
		return "hint: pass --token, set MANENT_TOKEN, or store one with 'manent login' (see 'manent context')"
	}
	return ""
}
