// Package version holds the build identity of the manent binaries. The values
// are set at link time, e.g.
//
//	go build -ldflags "-X github.com/manent-io/manent/pkg/version.Version=1.2.3 \
//	  -X github.com/manent-io/manent/pkg/version.Commit=$(git rev-parse HEAD) \
//	  -X github.com/manent-io/manent/pkg/version.Date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
//
// It imports nothing of this module.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Build identity, overridden with -ldflags -X. They are variables only so the
// linker can set them; nothing assigns them at run time.
var (
	Version = "dev"
	Commit  = "dev"
	Date    = "dev"
)

// Info is the build identity as one value.
type Info struct {
	Version string `json:"version"`
	Commit  string `json:"commit"`
	Date    string `json:"date"`
	Go      string `json:"go"`
}

// Get returns the build identity. When the linker did not set the version it
// falls back to the module version and VCS data recorded by the Go toolchain
// (e.g. for `go install github.com/manent-io/manent/cmd/manent@v1.2.3`).
func Get() Info {
	info := Info{Version: Version, Commit: Commit, Date: Date, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	if info.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		info.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision" && info.Commit == "dev":
			info.Commit = s.Value
		case s.Key == "vcs.time" && info.Date == "dev":
			info.Date = s.Value
		}
	}
	return info
}

// String returns a one-line description, e.g. "1.2.3 (commit 0a1b2c3d4e5f, built 2026-01-02T03:04:05Z, go1.26.8)".
func String() string { return Get().String() }

// String returns the identity on one line; the commit is cut to 12 characters.
func (i Info) String() string {
	commit := i.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return fmt.Sprintf("%s (commit %s, built %s, %s)", i.Version, commit, i.Date, i.Go)
}
