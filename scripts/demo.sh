#!/usr/bin/env bash
# The README quick start: build the binaries, start manent-server in local
# trial mode (embedded SQLite, a fresh data dir), deploy the example in
# examples/hello with `manent deploy --wait`, show the result, stop.
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p bin
echo "== building bin/manent, bin/manent-server (and manent's siblings manent-agent, manent-policy)"
go build -o bin/ ./cmd/...

work=$(mktemp -d /tmp/manent-demo.XXXXXX)
data="$work/manent-data"
srv_pid=""
cleanup() {
  if [[ -n $srv_pid ]]; then kill "$srv_pid" 2>/dev/null || true; wait "$srv_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

echo "== packing the example artifact"
artifact="$work/hello-1.0.0.tar.gz"
tar czf "$artifact" -C examples/hello/site .
sed "s#file:///tmp/manent-example/hello-1.0.0.tar.gz#file://$artifact#" examples/hello/deploy.yml > "$work/deploy.yml"

echo "== starting manent-server (local trial mode, data in $data)"
# XDG_CONFIG_HOME: the trial server records its token file there (for the
# CLI from any directory); keep the demo's record out of the user's config.
XDG_CONFIG_HOME="$work/config" bin/manent-server serve --data-dir "$data" --listen 127.0.0.1:0 > "$work/server.out" 2> "$work/server.log" &
srv_pid=$!
addr=""
for _ in $(seq 1 300); do
  addr=$(sed -n 's/.*listening on \(http:[^ ]*\).*/\1/p' "$work/server.out" | head -n 1)
  [[ -n $addr ]] && break
  kill -0 "$srv_pid" 2>/dev/null || { cat "$work/server.log"; echo "manent-server exited" >&2; exit 1; }
  sleep 0.1
done
[[ -n $addr ]] || { echo "manent-server did not start" >&2; exit 1; }
cat "$work/server.out"
export MANENT_SERVER="$addr"
export MANENT_TOKEN="$(cat "$data/admin.token")"

echo "== manent validate --offline"
bin/manent validate --offline -f "$work/deploy.yml"
echo "== manent deploy --wait"
bin/manent deploy -f "$work/deploy.yml" --wait -o json | tee "$work/deploy.json"
id=$(sed -n 's/.*"id": *"\([^"]*\)".*/\1/p' "$work/deploy.json" | head -n 1)
echo "== manent status $id"
bin/manent status "$id"
echo "== manent logs $id"
bin/manent logs "$id"
echo "== manent inventory"
bin/manent inventory
echo "== the live release"
ls -l "$data/targets/hello/staging/current"
cat "$data/targets/hello/staging/current/index.html"
echo "== done: SUCCESS (server log: $work/server.log)"
