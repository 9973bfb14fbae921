package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/manent-io/manent/pkg/api"
	"github.com/manent-io/manent/pkg/manent"
)

// DeployOptions are the inputs of `manent deploy`.
type DeployOptions struct {
	IO           *IOStreams
	Client       func() (*api.Client, error)
	ReadInput    func(name string) ([]byte, string, error)
	Exporter     *Exporter
	Now          func() time.Time
	PollInterval time.Duration
	// FollowGrace is how long a server that stopped answering is asked
	// again while following (DefaultFollowGrace when 0).
	FollowGrace time.Duration

	File string
	Wait bool
	// Quiet hides the progress of --wait on stderr.
	Quiet   bool
	Timeout time.Duration
	// IdempotencyKey is sent as Idempotency-Key; "" makes a fresh one for
	// this invocation.
	IdempotencyKey string
}

// NewCmdDeploy builds `manent deploy`.
func NewCmdDeploy(f *Factory, runF func(*DeployOptions) error) *cobra.Command {
	opts := &DeployOptions{IO: f.IOStreams, Client: f.Client, ReadInput: f.ReadInput, Now: f.Now, PollInterval: f.PollInterval}
	cmd := &cobra.Command{
		Use:   "deploy -f <file> [--wait [--timeout <duration>]]",
		Short: "Submit a deploy",
		Long: `Submit a deploy descriptor to the server. The server checks it and answers
with the deploy's id and first state; from then on the deploy is durable.
A descriptor it refuses exits 1 with every problem on stderr as
'manent validate' prints them, "deploy.yml:LINE:COL: /path: message".

With --wait the command follows the deploy to its final state, printing
state changes, finished steps and failed attempts that another attempt
follows ("attempt 1 of 4 failed; retrying in 1s: ...") on stderr (and, when stderr is not a
terminal, the state again after 5 minutes without a line), and exits 0 if it ended
SUCCESS, 1 if it ended otherwise (printing the failed step, its error and
the rollback outcome), 3 if --timeout elapsed first, 4 if the server is
unreachable or answers with a server error. A server that stops answering
once it has accepted the deploy (a restart, a network cut) is asked again
for --follow-grace (default 30s; MANENT_FOLLOW_GRACE), as stderr says; past that the command exits 4 saying that the
deploy is kept on the server (it goes on there, or once the server is
back): follow it with 'manent wait <id>' rather than submitting it again.

Every submission carries an Idempotency-Key, fresh for each invocation
unless --idempotency-key gives one. A submission that got no answer (a
dropped connection) or a 503/429 is sent again with the same key, a few
times and honouring the server's Retry-After; the server answers a repeat
with the first deploy, so a retry never creates a second deploy. Passing
the same --idempotency-key again (e.g. a re-run CI job, within 24 h)
prints the deploy of the first run. A submission interrupted (Ctrl-C,
SIGTERM) or unanswered before the server's answer prints the command, with
the key it sent, that gets the deploy back if the server accepted it.`,
		Example: `  manent deploy -f deploy.yml
  # deploy dpl_01JABCDEF submitted: ENQUEUED

  # in CI: follow to the end and fail the job if the deploy fails
  manent deploy -f deploy.yml --wait --timeout 20m

  # only the id, for scripts
  manent deploy -f deploy.yml -o json | jq -r .id

  # a CI job that may be re-run submits once per pipeline
  manent deploy -f deploy.yml --idempotency-key "ci-$CI_PIPELINE_ID"`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Exporter = f.Exporter()
			opts.FollowGrace = f.followGrace()
			if opts.Timeout < 0 {
				return usageErrorf("--timeout must not be negative")
			}
			if err := timeoutNeedsWait(cmd, opts.Wait); err != nil {
				return err
			}
			if err := checkIdempotencyKey(opts.IdempotencyKey); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return deployRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", "descriptor to submit (- reads stdin)")
	cmd.Flags().BoolVar(&opts.Wait, "wait", false, "follow the deploy until it is final")
	cmd.Flags().BoolVarP(&opts.Quiet, "quiet", "q", false, "with --wait: no progress on stderr (state, step, elapsed time)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 30*time.Minute, "with --wait (refused without it), give up after this long (exit 3); 0 waits forever")
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key of the submission (default: a fresh one per invocation)")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagFilename("file", "yml", "yaml", "json")
	return cmd
}

// SubmitOutput is the `deploy -o json` document (SPEC §7 [contract]).
type SubmitOutput struct {
	ID       string       `json:"id"`
	State    manent.State `json:"state"`
	Schedule string       `json:"schedule,omitempty"`
	Notice   string       `json:"notice,omitempty"`
}

func deployRun(ctx context.Context, opts *DeployOptions) error {
	data, name, err := opts.ReadInput(opts.File)
	if err != nil {
		return err
	}
	client, err := opts.Client()
	if err != nil {
		return err
	}
	key := opts.IdempotencyKey
	if key == "" {
		key = newIdempotencyKey()
	}
	res, replayed, err := client.SubmitIdempotent(ctx, data, key)
	if err != nil {
		sayMaybeAccepted(opts.IO, err, "deploy", fmt.Sprintf("manent deploy -f %s --idempotency-key %s", shellQuote(opts.File), key))
		return inFile(name, err)
	}
	if replayed && opts.IdempotencyKey != "" {
		// Our own retries replay silently; a key given again is worth saying.
		fmt.Fprintf(opts.IO.ErrOut, "notice: already submitted with idempotency key %q: this is the first submission's answer\n", key)
	}
	if res.Notice != "" {
		fmt.Fprintf(opts.IO.ErrOut, "notice: %s\n", safeLines(res.Notice))
	}
	// Ids are the server's text like any other: sanitised for printing
	// (-o json escapes by itself).
	res.ID, res.Schedule = safeText(res.ID), safeText(res.Schedule)
	out := SubmitOutput{ID: res.ID, State: res.State, Schedule: res.Schedule, Notice: res.Notice}
	if out.ID == "" {
		out.ID = res.Schedule
	}
	if res.Schedule != "" && out.State == "" {
		out.State = manent.StateScheduled
	}

	// A recurring schedule has nothing to wait for; a plain submission is done.
	if !opts.Wait || res.Schedule != "" {
		if opts.Wait {
			fmt.Fprintf(opts.IO.ErrOut, "schedule %s is recurring: nothing to wait for\n", out.ID)
		}
		if opts.Exporter != nil {
			return opts.Exporter.Write(opts.IO.Out, out)
		}
		if res.Schedule != "" {
			_, err = fmt.Fprintf(opts.IO.Out, "schedule %s created: %s\n", out.ID, opts.IO.State(string(out.State)))
			return err
		}
		_, err = fmt.Fprintf(opts.IO.Out, "deploy %s submitted: %s\n", out.ID, opts.IO.State(string(out.State)))
		return err
	}

	// --wait: progress on stderr; stdout gets the final result only, so
	// `-o json` prints one document (the final deployment, which has id and state).
	if !opts.Quiet {
		fmt.Fprintf(opts.IO.ErrOut, "deploy %s submitted: %s\n", out.ID, opts.IO.State(string(out.State)))
	}
	return followSubmitted(ctx, client, opts.IO, opts.Exporter, opts.Now, out.ID, out.State,
		watch{Interval: opts.PollInterval, Timeout: opts.Timeout, Grace: opts.FollowGrace}, opts.Quiet)
}

// followSubmitted is --wait after a submission (deploy, rollback): the
// progress line on stderr (none when quiet) until the deploy id is final or
// w.Timeout passes, then the final result on stdout. The server accepted the
// deploy: it is followed across an outage from the first poll.
func followSubmitted(ctx context.Context, client *api.Client, io *IOStreams, exp *Exporter, now func() time.Time,
	id string, state manent.State, w watch, quiet bool) error {
	p := newProgress(io, now)
	p.quiet = quiet
	p.last = string(state)
	w.Client, w.ID, w.Submitted, w.OnPoll, w.OnLost = client, id, true, p.update, p.lost
	d, err := watchDeploy(ctx, w)
	p.finish() // erase the status line before the result
	if ExitCodeOf(err) == ExitInterrupted {
		// Not waiting any longer does not stop the deploy.
		fmt.Fprintf(io.ErrOut, "\ndeploy %s goes on (only the waiting stopped): 'manent wait %s' follows it, 'manent cancel %s' stops it\n",
			safeText(id), safeText(id), safeText(id))
	}
	return finishFollow(io, exp, d, err)
}

// sayGoesOn tells, when err is an interruption of `wait` or `logs -f`
// (Ctrl-C, a cancelled CI job), that the deploy id goes on and how to stop
// it: the user may have meant to stop the deploy itself.
func sayGoesOn(s *IOStreams, err error, id string) {
	if ExitCodeOf(err) != ExitInterrupted {
		return
	}
	fmt.Fprintf(s.ErrOut, "\ndeploy %s goes on (only the waiting stopped): 'manent cancel %s' stops it\n", safeText(id), safeText(id))
}

// sayMaybeAccepted tells, when a submission was interrupted or got no
// answer, that the server may have accepted it, and the command (with the
// Idempotency-Key that was sent) that answers with that deploy if it did,
// and submits it once if it did not: a CI job re-run with it never creates
// a second deploy.
func sayMaybeAccepted(s *IOStreams, err error, what, again string) {
	if ExitCodeOf(err) != ExitInterrupted && !api.IsUnreachable(err) {
		return
	}
	fmt.Fprintf(s.ErrOut, "\nthe server may have accepted the %s before the answer was lost; to get it without a second one, run: %s\n",
		what, safeText(again))
}

// shellQuote quotes an argument for a command line printed to copy.
func shellQuote(arg string) string {
	if arg != "" && strings.Trim(arg, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@,+") == "" {
		return arg
	}
	return "'" + strings.ReplaceAll(arg, "'", `'\''`) + "'"
}

// newIdempotencyKey returns a fresh Idempotency-Key: "manent-cli-" and 128
// random bits in hex.
func newIdempotencyKey() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "manent-cli-" + hex.EncodeToString(b[:])
}

// checkIdempotencyKey refuses a --idempotency-key the server would refuse:
// at most 255 printable ASCII characters.
func checkIdempotencyKey(key string) error {
	if len(key) > 255 {
		return usageErrorf("--idempotency-key is longer than 255 characters")
	}
	for _, c := range key {
		if c < 0x20 || c > 0x7e {
			return usageErrorf("--idempotency-key must be printable ASCII")
		}
	}
	return nil
}

// finishFollow prints the result of following a deploy (deploy --wait,
// wait, logs -f) and returns the error that picks the exit code: the
// deployment as JSON/YAML or a `deploy <id>: <STATE>` line on stdout, the
// failure reason or timeout as the error.
func finishFollow(s *IOStreams, exp *Exporter, d *manent.Deployment, err error) error {
	if d != nil && (err == nil || ExitCodeOf(err) == ExitTimeout) {
		if exp != nil {
			if werr := exp.Write(s.Out, d); werr != nil {
				return werr
			}
		} else if err == nil {
			fmt.Fprintf(s.Out, "deploy %s: %s\n", safeText(d.ID), s.State(string(d.State)))
		}
	}
	if err != nil {
		return err
	}
	return outcome(d)
}
