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
go test -race -count=1 -timeout 30m ./...
