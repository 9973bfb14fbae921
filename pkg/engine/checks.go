package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	neturl "net/url"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/manent-io/manent/descriptor"
	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/regularfile"
	"github.com/manent-io/manent/pkg/retry"
)

// MaxSecretFile bounds a `file:` secret: a secret is a password, a key or a
// certificate chain, and a descriptor naming /dev/zero, /dev/urandom or a
// huge file must not make the worker read without end.
const MaxSecretFile = 1 << 20

// readSecretFile reads a `file:` secret: a regular file (a link to one, as
// Kubernetes mounts them, is followed) of at most MaxSecretFile bytes. A
// device or a FIFO is refused before it is opened, so a reference to one
// neither blocks the step nor fills the worker's memory.
func readSecretFile(path string) (string, error) {
	b, err := regularfile.Read(path, MaxSecretFile, regularfile.FollowLinks)
	var notRegular *regularfile.NotRegularError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("file %s does not exist on the worker", path)
	case errors.As(err, &notRegular):
		return "", fmt.Errorf("file %s on the worker is not a regular file", path)
	case errors.Is(err, regularfile.ErrTooLarge):
		return "", fmt.Errorf("file %s on the worker is larger than %d bytes: not a secret", path, MaxSecretFile)
	case err != nil:
		return "", fmt.Errorf("file %s cannot be read on the worker", path)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// SecretReadTimeout bounds the resolution of one secret (ResolveSecretWithin):
// a file on a hung network mount (NFS, FUSE) blocks its read, which Go
// cannot interrupt.
var SecretReadTimeout = 10 * time.Second

// secretReads bounds the secret reads in flight in the worker: a read
// abandoned on a hung mount keeps its goroutine and OS thread until the
// mount answers, and no more than this many are ever left so.
var secretReads = make(chan struct{}, 16)

// resolveSecret is ResolveSecret (a test blocks it).
var resolveSecret = ResolveSecret

// ResolveSecretWithin is ResolveSecret within SecretReadTimeout and ctx:
// the secrets step ends with an error naming the reference (never a value)
// instead of holding a worker slot for as long as a hung mount does.
func ResolveSecretWithin(ctx context.Context, ref string) error {
	ctx, cancel := context.WithTimeout(ctx, SecretReadTimeout)
	defer cancel()
	select {
	case secretReads <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("%s was not read within %s: %d earlier secret reads of this worker have not returned yet (a file on a hung network mount?)", ref, SecretReadTimeout, cap(secretReads))
	}
	done, resolve := make(chan error, 1), resolveSecret
	go func() {
		defer func() { <-secretReads }()
		_, err := resolve(ref)
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("%s was not read within %s (a file on a hung network mount?)", ref, SecretReadTimeout)
	}
}

// ResolveSecret resolves a secret reference `env:VAR` or `file:/path`. The
// value is returned to the caller only: it is never stored, logged or
// returned by the API.
func ResolveSecret(ref string) (string, error) {
	kind, arg, ok := strings.Cut(ref, ":")
	if !ok || arg == "" {
		return "", fmt.Errorf("reference %q is not env:VAR or file:/path", ref)
	}
	switch kind {
	case "env":
		v, ok := os.LookupEnv(arg)
		if !ok {
			return "", fmt.Errorf("environment variable %s is not set on the worker", arg)
		}
		return v, nil
	case "file":
		return readSecretFile(arg)
	}
	return "", fmt.Errorf("unknown secret provider %q (env, file)", kind)
}

// HealthResult is the output of the post-test step.
type HealthResult struct {
	URL      string `json:"url"`
	Status   int    `json:"status"`
	Attempts int    `json:"attempts"`
}

// HealthRetry is the wait between two attempts of one health check: from the
// engine's RetryBase (Initial, set per call), doubling, at most 30 s; its
// Attempts are the check's retries + 1.
var HealthRetry = retry.Policy{Max: 30 * time.Second}

// CheckHealth checks every endpoint: each must answer its expected status
// (200 by default) within its timeout, within its retries (interval grows
// from base). It logs each attempt. hc is the egress client of
// health.allow (nil refuses every check); a URL or address it refuses
// fails the check at once, without retries.
func CheckHealth(ctx context.Context, hc *http.Client, checks []descriptor.HealthCheck, base time.Duration, log io.Writer) ([]HealthResult, error) {
	if hc == nil {
		hc = egress.Deny("health check", "health.allow")
	}
	var out []HealthResult
	for _, c := range checks {
		expect := c.Expect
		if expect == 0 {
			expect = http.StatusOK
		}
		timeout := c.Timeout.D()
		if timeout <= 0 {
			timeout = 5 * time.Second
		}
		var last error
		// What the step shows of the URL (log, output, error): redacted
		// like a deploy's settings, since all three reach every reader.
		shown := plugin.RedactURL(c.URL)
		res := HealthResult{URL: shown}
		if c.Retries < 0 { // the schema forbids it: no attempt, as ever
			out = append(out, res)
			continue
		}
		p := HealthRetry
		p.Initial, p.Attempts = base, c.Retries+1
		// The start of the last unexpected answer's body, for the error.
		var body []byte
		var truncated bool
		err := p.Do(ctx, func(n int) error {
			res.Attempts = n
			status, b, more, err := probe(ctx, hc, c.URL, timeout)
			body, truncated = b, more
			res.Status = status
			if err == nil && status == expect {
				last = nil
				fmt.Fprintf(log, "health %s: %d (attempt %d)\n", shown, status, n)
				return nil
			}
			if err != nil && egress.IsRefused(err) {
				last = fmt.Errorf("health %s: %v", shown, err)
				fmt.Fprintf(log, "%v\n", last)
				return retry.Stop(plugin.Permanent(last))
			}
			if err != nil {
				last = fmt.Errorf("health %s: %v", shown, err)
			} else {
				last = fmt.Errorf("health %s: got %d, want %d", shown, status, expect)
			}
			fmt.Fprintf(log, "%v (attempt %d of %d)\n", last, n, c.Retries+1)
			return last
		})
		switch {
		case err == nil || err == last:
		case plugin.IsPermanent(err):
			out = append(out, res)
			return out, err
		default: // ctx ended while waiting
			return out, err
		}
		out = append(out, res)
		if last != nil {
			// The endpoint had its retries: retrying the whole step would only
			// repeat them. The error ends with the start of what it last
			// answered (`; response: …`), the URL's credentials masked in it
			// as they are redacted in the URL.
			urlMask := plugin.NewMasker(plugin.SettingSecrets("health", map[string]any{"url": c.URL}))
			return out, plugin.Permanent(plugin.WithResponse(last, urlMask, body, truncated))
		}
	}
	return out, nil
}

// healthBodyShown is how much of an unexpected answer's body a failed
// health check keeps for its error.
const healthBodyShown = 1 << 10

// probe asks url once: the status, and the start of the body (more: it
// went on).
func probe(ctx context.Context, hc *http.Client, url string, timeout time.Duration) (status int, body []byte, more bool, _ error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, false, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *neturl.Error
		if errors.As(err, &ue) {
			ue.URL = plugin.RedactURL(ue.URL)
		}
		return 0, nil, false, err
	}
	body, _ = io.ReadAll(io.LimitReader(resp.Body, healthBodyShown))
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, body, n > 0, nil
}

func sortStrings(s []string) { sort.Strings(s) }
