#!/usr/bin/env bash
# Packs examples/hello/site into the artifact that examples/hello/deploy.yml
# (and the README's minimal descriptor) deploys:
# /tmp/manent-example/hello-1.0.0.tar.gz. Run it from any directory; it
# prints the artifact's path and sha256.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=/tmp/manent-example/hello-1.0.0.tar.gz
mkdir -p "$(dirname "$out")"
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
tar czf "$tmp" -C "$here/site" .
chmod 644 "$tmp"
mv -f "$tmp" "$out"   # atomic: a deploy never reads a half-written artifact
trap - EXIT
echo "$out"
sha256sum "$out" 2>/dev/null || shasum -a 256 "$out"
