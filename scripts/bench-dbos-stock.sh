#!/usr/bin/env bash
# manent against DBOS Transact as released (issue 13). BenchmarkEngine
# compares manent with raw DBOS in one binary, so both run the DBOS that
# manent ships, patched (third_party/dbos-transact-golang/PATCHES.md), and
# the patches made raw DBOS itself ~4x faster. This script also builds the
# same raw workload (scripts/rawdbos) against DBOS v1.9.0 unmodified — the
# tree the fork started from, commit a5c7ea8, or the module proxy when the
# clone lacks that commit — and prints, on SQLite and (when
# MANENT_TEST_POSTGRES is set) PostgreSQL:
#   raw DBOS v1.9.0 as released, raw DBOS as manent ships it, then
#   BenchmarkEngine (manent, raw patched, ratios).
# Knobs: MANENT_BENCH_ROUNDS (3).
#
#   scripts/bench-dbos-stock.sh
#   MANENT_TEST_POSTGRES=postgres://… scripts/bench-dbos-stock.sh
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
rounds=${MANENT_BENCH_ROUNDS:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# DBOS v1.9.0 unmodified.
stock=$work/dbos-v1.9.0
if git cat-file -e a5c7ea8^{commit} 2>/dev/null; then
	git archive a5c7ea8 third_party/dbos-transact-golang | tar -x -C "$work"
	mv "$work/third_party/dbos-transact-golang" "$stock"
else
	dir=$(GOFLAGS=-mod=mod go mod download -json github.com/dbos-inc/dbos-transact-golang@v1.9.0 | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
	cp -r "$dir" "$stock" && chmod -R u+w "$stock"
fi

# The same program in a module of its own whose only difference from
# manent's is the DBOS it replaces with: same versions of everything else.
mod=$work/rawdbos
mkdir "$mod"
cp scripts/rawdbos/main.go "$mod/"
sed -e 's#^module .*#module rawdbos#' \
	-e "s#=> ./third_party/dbos-transact-golang#=> $stock#" go.mod > "$mod/go.mod"
cp go.sum "$mod/"
(cd "$mod" && GOFLAGS=-mod=mod go build -o "$work/rawdbos-stock" .)
go build -o "$work/rawdbos-shipped" ./scripts/rawdbos

dbs=("")
[ -n "${MANENT_TEST_POSTGRES:-}" ] && dbs+=("$MANENT_TEST_POSTGRES")
for db in "${dbs[@]}"; do
	"$work/rawdbos-stock" -rounds "$rounds" -db "$db" -label "raw DBOS v1.9.0 as released"
	"$work/rawdbos-shipped" -rounds "$rounds" -db "$db" -label "raw DBOS as manent ships it"
done
for r in $(seq "$rounds"); do
	go test ./pkg/engine -run '^$' -bench '^BenchmarkEngine$' -benchtime 1x -timeout 20m | grep -E 'bench_test.go|^Benchmark'
done
