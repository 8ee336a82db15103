#!/usr/bin/env bash
# test_bench_usage.sh — scripts/bench.sh's command line: every usage error
# exits 2 with a message naming it and the usage, before anything is built,
# installed or started; --help exits 0.
# Exit 0 when every check passed, 1 otherwise (each failure is named).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
bench=$(dirname "${BASH_SOURCE[0]}")/../../scripts/bench.sh

failures=0
checks=0
# expect STATUS TEXT ARG...: bench.sh ARG... exits STATUS, its stderr holds TEXT.
expect() {
  local want=$1 text=$2 rc=0 err
  shift 2
  err=$(bash "$bench" "$@" 2>&1 >/dev/null </dev/null) || rc=$?
  checks=$((checks + 1))
  if [[ $rc != "$want" || $err != *"$text"* ]]; then
    failures=$((failures + 1))
    log "FAIL: bench.sh $*: exit $rc (want $want), stderr without '$text':"
    printf '%s\n' "$err" | head -n 5 | sed 's/^/  | /' >&2
  fi
}

usage_line='scripts/bench.sh [--quick] [--rounds N]'
expect 0 "$usage_line" --help
expect 2 "unknown argument '--bogus'" --bogus
expect 2 "$usage_line" --bogus
expect 2 "--rounds needs a value" --rounds
expect 2 "--rounds must be a positive integer, got '0'" --rounds 0
expect 2 "--seconds must be a positive number, got 'x'" --seconds x
expect 2 "--seconds must be a positive number, got '0.0'" --seconds 0.0
expect 2 "--locks must be a positive integer, got '-1'" --locks -1
expect 2 "--concurrency needs a value" --quick --concurrency
expect 2 "--scenarios needs at least one scenario" --scenarios ''
expect 2 "unknown scenario 'nope'" --scenarios latency,nope
expect 2 "--failovers must be an integer in 1..1000, got '0'" --failovers 0
expect 2 "--failovers needs a value" --failovers
expect 2 "--failover-ttl must be milliseconds in 100..60000, got '99'" --failover-ttl 99
expect 2 "--failover-ttl must be milliseconds in 100..60000, got '60001'" --failover-ttl 60001

if ((failures > 0)); then
  die "$failures of $checks checks failed"
fi
log "all $checks checks passed"
