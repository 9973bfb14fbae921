#!/bin/sh
# Fuzz descriptor.Parse: no input may make it panic, and a nil error must
# come with a descriptor. FUZZTIME sets the duration (default 60s).
# Crashers are written to descriptor/testdata/fuzz/FuzzParse/; keep them,
# they become regression tests of `go test ./descriptor`. Minimizing a new
# interesting input is capped (FUZZMINIMIZETIME, default 5s): the default
# 60s can stall a short run.
set -eu
cd "$(dirname "$0")/.."
exec go test ./descriptor -run '^$' -fuzz FuzzParse -fuzztime "${FUZZTIME:-60s}" \
	-fuzzminimizetime "${FUZZMINIMIZETIME:-5s}"
