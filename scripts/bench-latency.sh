#!/usr/bin/env bash
# Latency a person feels (issue 19), against the real manent-server binary
# in local trial mode: idle submit → first step and → SUCCESS of a tiny
# local deploy, then a paced mixed load (50 clients × 10 requests/s for
# 20 s, 2 % submits, the rest status/list//healthz) with p50/p99 of each
# side by side. SQLite always; PostgreSQL too when MANENT_TEST_POSTGRES is
# set. Knobs: MANENT_BENCH_CLIENTS, MANENT_BENCH_RATE (requests/s per
# client), MANENT_BENCH_SECONDS, MANENT_BENCH_SUBMIT_PCT.
#
#   scripts/bench-latency.sh
#   MANENT_TEST_POSTGRES=postgres://… scripts/bench-latency.sh
set -euo pipefail
cd "$(dirname "$0")/.."
go test ./cmd/manent-server -run '^$' -bench '^BenchmarkLatency$' -benchtime 1x -timeout 20m
