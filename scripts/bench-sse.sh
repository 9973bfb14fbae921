#!/usr/bin/env bash
# Event fan-out benchmark (issue 4): 1,000 concurrent SSE followers of one
# deploy on loopback, against a real in-process server; the followers run
# in a child process. Prints p50/p99/max delay from an event's commit to its
# receipt, and the server's peak RSS. One iteration takes about 10 s.
#
#   scripts/bench-sse.sh            # one deploy
#   scripts/bench-sse.sh 3          # three deploys, figures over all of them
set -euo pipefail
cd "$(dirname "$0")/.."
ulimit -n 8192 2>/dev/null || true   # 1,000 client + 1,000 server sockets
go test ./pkg/server -run '^$' -bench '^BenchmarkFanout$' -benchtime "${1:-1}x" -timeout 10m
