#!/usr/bin/env bash
# The project's test command (README): formatting, vet, then every test with
# the race detector. PostgreSQL tests run when MANENT_TEST_POSTGRES names a
# server (.ci/run installs and starts one); the Kubernetes end-to-end test
# runs when MANENT_K8S_BIN_DIR names a kube-apiserver/etcd build.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== gofmt"
bad=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './tools/*'))
if [[ -n $bad ]]; then
  echo "gofmt would change:"; echo "$bad"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
# The whole output is kept; when a package fails, what failed (its test
# names, a panic's or fatal error's first lines with the goroutine that
# raised it, a data race) is printed again at the end, where a CI log's
# tail shows it: a crash prints every goroutine, and the tail held only
# the last of thousands.
log=$(mktemp "${TMPDIR:-/tmp}/manent-test.XXXXXX")
status=0
# SQLite's C translated into Go (modernc.org/sqlite/lib) is built without
# the race detector's instrumentation and pointer checks: nearly every test
# runs it, and instrumented it cost most of the suite's CPU (pkg/engine's
# tests: 500 s of CPU, about 100 s without). Only that package: a package
# built so must define no generic instantiation (go.shape), which the
# linker shares with every package that makes the same one — modernc.org/
# libc's uninstrumented sync/atomic.Pointer[…] methods, so built, hid the
# synchronisation of sync.Map and sync.Once from the detector, which then
# reported encoding/json's and DBOS's type caches as races. Checked here:
# an upgrade of modernc.org/sqlite that adds one fails the run, not the
# tests. Every other package is instrumented: a race in it fails the run.
norace=modernc.org/sqlite/lib
archive=$(mktemp "${TMPDIR:-/tmp}/manent-norace.XXXXXX")
go build -race -gcflags="$norace=-race=false" -o "$archive" "$norace"
shapes=$(go tool nm "$archive" | grep -c 'go\.shape' || true)
if [[ $shapes -ne 0 ]]; then
  echo "$norace defines $shapes generic instantiation symbols: it cannot be built without -race (scripts/test.sh)"
  rm -f "$archive"; exit 1
fi
rm -f "$archive"
go test -race -gcflags="$norace=-race=false" -count=1 -timeout 30m ./... 2>&1 | tee "$log" || status=$?
if [[ $status -ne 0 ]]; then
  echo
  echo "== what failed (the whole output: $log)"
  grep -n -E -A 12 '^(panic: |fatal error: |WARNING: DATA RACE)' "$log" | head -n 200 || true
  grep -n -E '^(\s*--- FAIL|FAIL|panic: test timed out)' "$log" | head -n 100 || true
  exit "$status"
fi
rm -f "$log"
