#!/usr/bin/env bash
# expect_exit.sh STATUS CMD... — run CMD; pass when it exits with exactly
# STATUS (sim/catches: a sabotaged variant must be caught, exit 1 — not a
# crash, not a usage error). CMD's output is shown either way.
set -uo pipefail
want=$1
shift
"$@"
got=$?
if [[ $got -ne $want ]]; then
  echo "expect_exit: $1 exited $got, expected $want" >&2
  exit 1
fi
exit 0
