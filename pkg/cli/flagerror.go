package cli

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/manent-io/manent/pkg/suggest"
)

// flagError is the usage error of a flag that cannot be parsed (cobra's
// FlagErrorFunc of manent and its siblings), with the hint to --help.
func flagError(c *cobra.Command, err error) error {
	hint := fmt.Sprintf("Run '%s --help' for usage.", c.CommandPath())
	if near := closestFlag(c, err); near != "" {
		hint = fmt.Sprintf("Did you mean --%s?\n", near) + hint
	}
	return &UsageError{Err: explainTooLongDuration(err), Hint: hint}
}

// closestFlag is the flag of c (its own or inherited) that pflag's
// "unknown flag: --NAME" was likely meant for (`--wat` → wait), or "".
func closestFlag(c *cobra.Command, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok || name == "" {
		return ""
	}
	name, _, _ = strings.Cut(name, "=")
	var names []string
	collect := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	c.LocalFlags().VisitAll(collect)
	c.InheritedFlags().VisitAll(collect)
	return suggest.Closest(name, names)
}

// durationSyntax is the text time.ParseDuration reads: numbers each with
// its unit.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$`)

// explainTooLongDuration rewrites pflag's error for a duration flag whose
// value is a duration too long for time.Duration ("99999999h"): pflag says
// `must be a duration like "30s" or "5m"` of every value it cannot parse,
// which sent a user looking for a mistake in a well-formed value. It now
// says too long, and the longest accepted. Other errors are returned as
// they are.
func explainTooLongDuration(err error) error {
	const like = ` flag: must be a duration like "30s" or "5m"`
	rest, ok := strings.CutPrefix(err.Error(), "invalid argument ")
	if !ok || !strings.HasSuffix(rest, like) {
		return err
	}
	quoted, qerr := strconv.QuotedPrefix(rest)
	if qerr != nil {
		return err
	}
	value, qerr := strconv.Unquote(quoted)
	if qerr != nil || !durationSyntax.MatchString(value) {
		return err
	}
	if _, perr := time.ParseDuration(value); perr == nil {
		return err
	}
	flag := strings.TrimSuffix(strings.TrimPrefix(rest, quoted), like) // ` for "--timeout"`
	return errors.New("invalid argument " + quoted + flag + fmt.Sprintf(" flag: too long: the longest duration is %s (about 292 years)", time.Duration(math.MaxInt64)))
}

// timeoutNeedsWait refuses --timeout without --wait (deploy, rollback):
// the command would return once the deploy is submitted, and a CI job
// that meant to fail on a failed deploy would pass.
func timeoutNeedsWait(cmd *cobra.Command, wait bool) error {
	if wait || !cmd.Flags().Changed("timeout") {
		return nil
	}
	return usageErrorf("--timeout applies only with --wait: add --wait to follow the deploy to its end (without it the command returns once the deploy is submitted, whatever becomes of it)")
}
