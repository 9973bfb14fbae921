#!/bin/sh
# Build a real kube-apiserver and etcd for manent's end-to-end agent tests,
# from the Go module proxy (tools/k8stest, a module of its own), and print
# the directory that holds them.
#
# The binaries are built once into a cache directory keyed by the hash of
# tools/k8stest/go.mod + go.sum:
#   ${MANENT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manent/k8s}/<hash>/
# A second call with the same go.mod/go.sum prints the same directory at
# once. A cold build takes 6-9 minutes on 2 cores and ~2.4 GB of memory.
#
# Usage (CI):
#   MANENT_K8S_BIN_DIR=$(scripts/k8s-test-env.sh) || exit 1
#   MANENT_K8S_BIN_DIR=$MANENT_K8S_BIN_DIR MANENT_TEST_REQUIRE_K8S=1 \
#     go test ./pkg/agent -run E2E
#
# Progress goes to stderr; only the bin directory is printed on stdout.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
mod="$root/tools/k8stest"
k8s_version=v1.37.2

hash=$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-16)
base=${MANENT_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manent/k8s}
bin="$base/$hash"

if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/etcd" ]; then
	echo "$bin"
	exit 0
fi

mkdir -p "$base"
tmp=$(mktemp -d "$base/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

echo "k8s-test-env: building kube-apiserver $k8s_version and etcd into $bin (cold: 6-9 min)" >&2
cd "$mod"
# -mod=mod: the tools module has no vendor directory; go.sum pins every module.
GOFLAGS=-mod=mod go build -trimpath \
	-ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$k8s_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37" \
	-o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver >&2
GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3 >&2

# Publish atomically: a concurrent run sees either nothing or both binaries.
# mv -T fails if another run published first; its binaries are as good.
chmod 755 "$tmp"
if mv -T "$tmp" "$bin" 2>/dev/null; then
	trap - EXIT INT TERM
fi
[ -x "$bin/kube-apiserver" ] && [ -x "$bin/etcd" ] || { echo "k8s-test-env: build incomplete in $bin" >&2; exit 1; }
echo "$bin"
