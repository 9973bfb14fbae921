// Package artifact downloads a deploy's artifact from an http(s):// or
// file:// URL into the deploy's work directory, with a size limit, and
// computes its sha256.
//
// HTTP downloads go through a pkg/egress client (Fetcher.HTTP) that checks
// every redirect hop against artifacts.sources and every address dialed.
//
// It imports pkg/egress, pkg/plugin (for the permanent-error marker) and
// pkg/stall (the idle timeout).
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/manent-io/manent/pkg/egress"
	"github.com/manent-io/manent/pkg/plugin"
	"github.com/manent-io/manent/pkg/stall"
)

// Fetched describes a downloaded artifact.
type Fetched struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Fetcher downloads artifacts.
type Fetcher struct {
	// HTTP is the egress client of artifacts.sources; nil refuses every
	// http(s) download.
	HTTP     *http.Client
	MaxBytes int64
	// IdleTimeout fails an http(s) download that receives nothing — no
	// answer, then no byte of the body — for this long
	// (artifacts.idle_timeout; 0: DefaultIdleTimeout). Timeout bounds the
	// whole download (artifacts.timeout; 0: DefaultTimeout). Both are
	// transient: the step retries.
	IdleTimeout time.Duration
	Timeout     time.Duration
	// Files, when set, checks the real path of a file:// artifact reached
	// through a symbolic link (artifacts.sources): the URL matched the
	// policy, the file it leads to must too.
	Files func(path string) error
}

// The defaults of artifacts.idle_timeout and artifacts.timeout.
const (
	DefaultIdleTimeout = time.Minute
	DefaultTimeout     = 30 * time.Minute
)

// stalled and tooLong are the causes of a download cut by its timeouts.
type stalled struct{ after time.Duration }

func (e stalled) Error() string {
	return fmt.Sprintf("no data received for %s (artifacts.idle_timeout)", e.after)
}

type tooLong struct{ after time.Duration }

func (e tooLong) Error() string {
	return fmt.Sprintf("not complete after %s (artifacts.timeout)", e.after)
}

// cut is err, or the timeout that cut the download of rawURL when ctx
// ended because of one.
func cut(ctx context.Context, rawURL string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		var s stalled
		var l tooLong
		if errors.As(cause, &s) || errors.As(cause, &l) {
			return fmt.Errorf("%s: %w", plugin.RedactURL(rawURL), cause)
		}
	}
	return err
}

// Fetch downloads rawURL into dir and checks it against want (a hex sha256,
// empty to skip). A mismatch, a 4xx or a size overflow is permanent.
func (f *Fetcher) Fetch(ctx context.Context, rawURL, dir, want string) (*Fetched, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, plugin.Permanent(fmt.Errorf("artifact url %q: %w", rawURL, err))
	}
	name := path.Base(u.Path)
	if name == "" || name == "/" || name == "." {
		name = "artifact"
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	dst := filepath.Join(dir, name)
	var src io.ReadCloser
	switch u.Scheme {
	case "file":
		fh, err := f.openFile(u.Path)
		if err != nil {
			return nil, err
		}
		src = fh
	case "http", "https":
		// A source that stops sending must not hold a worker slot: the
		// download ends after idle without a byte, or after timeout.
		idle, total := f.IdleTimeout, f.Timeout
		if idle <= 0 {
			idle = DefaultIdleTimeout
		}
		if total <= 0 {
			total = DefaultTimeout
		}
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, total, tooLong{total})
		defer stop()
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		timer := time.AfterFunc(idle, func() { cancel(stalled{idle}) })
		defer timer.Stop()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
		if err != nil {
			return nil, plugin.Permanent(err)
		}
		hc := f.HTTP
		if hc == nil {
			hc = egress.Deny("artifact", "artifacts.sources")
		}
		resp, err := hc.Do(req)
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			// A signed URL's signature stays out of the step's error.
			ue.URL = plugin.RedactURL(ue.URL)
		}
		if err != nil {
			if egress.IsRefused(err) {
				return nil, plugin.Permanent(fmt.Errorf("download artifact: %w", err))
			}
			return nil, fmt.Errorf("download artifact: %w", cut(ctx, rawURL, err))
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			err := fmt.Errorf("download artifact %s: HTTP %d", plugin.RedactURL(rawURL), resp.StatusCode)
			if resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusRequestTimeout {
				return nil, plugin.Permanent(err)
			}
			return nil, err
		}
		src = struct {
			io.Reader
			io.Closer
		}{&stall.Reader{R: resp.Body, Timer: timer, Idle: idle}, resp.Body}
	default:
		return nil, plugin.Permanent(fmt.Errorf("artifact url scheme %q is not supported (http, https, file)", u.Scheme))
	}
	defer src.Close()
	tmp := dst + ".part"
	out, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	limit := f.MaxBytes
	if limit <= 0 {
		limit = 1 << 30
	}
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(src, limit+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("download artifact: %w", cut(ctx, rawURL, err))
	}
	if n > limit {
		os.Remove(tmp)
		return nil, plugin.Permanent(fmt.Errorf("artifact is larger than the limit of %d bytes", limit))
	}
	got := hex.EncodeToString(h.Sum(nil))
	if want != "" && !strings.EqualFold(want, got) {
		os.Remove(tmp)
		return nil, plugin.Permanent(fmt.Errorf("artifact sha256 mismatch: expected %s, got %s", strings.ToLower(want), got))
	}
	if err := os.Rename(tmp, dst); err != nil {
		return nil, err
	}
	return &Fetched{Path: dst, SHA256: got, Size: n}, nil
}

// openFile opens a file:// artifact and checks what it opened, not what the
// path named a moment before (a link swapped in between would otherwise
// get through): a regular file — a device or a FIFO is refused (/dev/zero
// would be read up to the size limit, a FIFO would block the step; the
// open does not wait for a FIFO's writer) — that is the file at the path's
// real location, which Files must allow when a symbolic link led there.
func (f *Fetcher) openFile(p string) (*os.File, error) {
	fh, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, plugin.Permanent(fmt.Errorf("artifact %s does not exist", p))
		}
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			fh.Close()
		}
	}()
	opened, err := fh.Stat()
	if err != nil {
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	if !opened.Mode().IsRegular() {
		return nil, plugin.Permanent(fmt.Errorf("artifact %s is not a regular file", p))
	}
	if afterOpen != nil {
		afterOpen(p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return nil, fmt.Errorf("open artifact: %w", err)
	}
	if real != filepath.Clean(p) && f.Files != nil {
		if err := f.Files(real); err != nil {
			return nil, plugin.Permanent(fmt.Errorf("artifact %s is a symbolic link to %s, which artifacts.sources does not allow", p, real))
		}
	}
	if st, err := os.Stat(real); err != nil || !os.SameFile(opened, st) {
		// Replaced between the open and the check: what was opened may
		// be anything. Transient: the next attempt opens it again.
		return nil, fmt.Errorf("artifact %s changed while it was opened; try again", p)
	}
	ok = true
	return fh, nil
}

// afterOpen, when set (tests), runs between the open of a file:// artifact
// and its checks: where a swapped link would slip in.
var afterOpen func(path string)

// SHA256File returns the hex sha256 of a file.
func SHA256File(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
