#!/usr/bin/env bash
# The chaos harness, long version: the real manent-server runs N deploys over
# M environments whose steps take 0.2–2 s while it is SIGKILLed K times at
# random instants (on SQLite; on PostgreSQL too when MANENT_TEST_POSTGRES is
# set: three workers, steps up to 6 s, a killed worker down past
# dead_after, every other fault a pause of up to twice dead_after), then
# every invariant of cmd/manent-server/chaos_test.go
# is checked (every deploy final, no step twice at once, no overlap per
# environment, current = last SUCCESS = inventory, one `finished` per deploy).
# Then TestUndoPathsSurviveSIGKILL kills the paths that undo and roll out
# (compensations, a cancel between waves, `manent rollback`) at chosen
# instants, each case on PostgreSQL too (the default test run takes two
# there).
#
# usage: scripts/chaos.sh [DEPLOYS [KILLS [ENVIRONMENTS [SEED]]]]
#   defaults: 200 deploys, 20 kills, 6 environments, a random seed
#   (the seed is printed; pass it again to replay a run).
set -euo pipefail
cd "$(dirname "$0")/.."
export MANENT_CHAOS_DEPLOYS=${1:-200}
export MANENT_CHAOS_KILLS=${2:-20}
export MANENT_CHAOS_ENVIRONMENTS=${3:-6}
if [[ -n ${4:-} ]]; then export MANENT_CHAOS_SEED=$4; fi
go test ./cmd/manent-server -run '^(TestChaos|TestUndoPathsSurviveSIGKILL)$' -count=1 -v -timeout 60m 2>&1 |
  grep -E '^(=== RUN|--- |PASS|FAIL|ok)|chaos|overlap|announced|inventory|current ->' 
