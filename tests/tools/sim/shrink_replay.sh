#!/usr/bin/env bash
# shrink_replay.sh SIM [ARGS...] — sim/shrinks: SIM ARGS --first --shrink
# must find a violation (exit 1), print a SHRUNK summary naming fewer
# faults than were planned, and a replay line with --faults; that replay,
# run as printed, must show the violation again (exit 1).
set -uo pipefail
sim=$1
shift
log=$(mktemp)
trap 'rm -f "$log"' EXIT

"$sim" "$@" --first --shrink 2>"$log" >/dev/null
got=$?
cat "$log" >&2
if [[ $got -ne 1 ]]; then
  echo "shrink_replay: $sim exited $got, expected 1 (a violation)" >&2
  exit 1
fi
summary=$(grep -m1 '^SHRUNK seed ' "$log") || { echo "shrink_replay: no SHRUNK line" >&2; exit 1; }
if [[ ! $summary =~ :\ ([0-9]+)\ of\ ([0-9]+)\ planned ]]; then
  echo "shrink_replay: cannot read the SHRUNK line: $summary" >&2
  exit 1
fi
kept=${BASH_REMATCH[1]}
planned=${BASH_REMATCH[2]}
if ((kept >= planned)); then
  echo "shrink_replay: nothing was shrunk ($kept of $planned)" >&2
  exit 1
fi
replay=$(grep -A1000 '^SHRUNK seed ' "$log" | grep -m1 '^replay: .* --faults ') ||
  { echo "shrink_replay: no replay line with --faults after SHRUNK" >&2; exit 1; }
# The replay line: "replay: PROGRAM ARGS..."; run it with the same binary.
read -r -a words <<<"${replay#replay: }"
args=()
for w in "${words[@]:1}"; do args+=("${w//\'/}"); done
"$sim" "${args[@]}" >/dev/null 2>&1
again=$?
if [[ $again -ne 1 ]]; then
  echo "shrink_replay: the shrunk replay (${args[*]}) exited $again, expected 1" >&2
  exit 1
fi
echo "shrink_replay: $kept of $planned faults; the replay shows the violation again" >&2
exit 0
