#!/usr/bin/env bash
# expect_usage.sh STATUS TEXT CMD... — run CMD; pass when it exits with
# exactly STATUS and its output (stdout and stderr together) contains TEXT.
# For the command lines of the programs that parse them with CLI11: --help
# exits 0 with the program's description, a bad argument exits 2 naming it.
set -uo pipefail
want=$1
text=$2
shift 2
out=$("$@" 2>&1 </dev/null)
got=$?
printf '%s\n' "$out"
if [[ $got -ne $want ]]; then
  echo "expect_usage: $1 exited $got, expected $want" >&2
  exit 1
fi
if [[ $out != *"$text"* ]]; then
  echo "expect_usage: the output of $1 does not contain \"$text\"" >&2
  exit 1
fi
exit 0
