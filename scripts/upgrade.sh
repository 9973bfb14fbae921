#!/usr/bin/env bash
# The upgrade harness: an older release's manent-server, built from each
# commit given (`git archive` + `go build`, cached in
# $TMPDIR/manent-upgrade-bin/<commit>), holds deploys in every waiting and
# running shape — an approval in the gate, DELAYED, a dependency, a wave's
# approval, a wave's observation, a slow script step, an ITSM change — and
# a recurring schedule; it is stopped with SIGTERM, and separately with
# SIGKILL, and this tree's manent-server starts on the same SQLite
# database. Every deploy must end SUCCESS with no step's effect twice, one
# `finished` callback each, `admin verify-audit` intact, the inventory
# naming it, the schedule firing on once per tick; an old binary started
# again on a database this tree migrated further is refused with the schema
# message. With MANENT_TEST_POSTGRES set, two old workers are also rolled
# one by one on PostgreSQL (an old and a new worker share the queue).
# See cmd/manent-server/upgrade_test.go; about 40 s per case once built.
#
# usage: scripts/upgrade.sh [COMMIT...]
#   default: the start of the previous work round and an older commit
#   (d372efc 1e77849).
set -euo pipefail
cd "$(dirname "$0")/.."
commits=("$@")
if [[ ${#commits[@]} -eq 0 ]]; then commits=(d372efc 1e77849); fi
export MANENT_UPGRADE_FROM="${commits[*]}"
go test ./cmd/manent-server -run '^TestUpgradeFromOldRelease$' -count=1 -v -timeout 60m 2>&1 |
  grep -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok)|upgrade_test.go'
