#!/usr/bin/env bash
# test_testbed_clean_start.sh — scripts/testbed.sh's clean start, for real:
# a bed it has just created empty counts at once (`redlock nodes` shows every
# master counted, a lock is taken without waiting), while every start that
# cannot prove it is empty and new is quarantined for the full period
# (max_ttl 60 s + drift): a node restarted empty on its port, a node
# restarted with its data (AOF: the marker survives, the run id does not),
# `up` again after `down`, and a new bed on ports a bed served before.
# Beds on free loopback ports (REDLOCK_TESTBED_BASE_PORT) with their state
# and port ledger in a temp dir; every node stopped by its pid on exit.
#   REDLOCK    the redlock command to run (meson passes the built one)
# Exit 0 when every check passed, 1 otherwise (each failure is named).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
testbed=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/testbed.sh
redlock=${REDLOCK:?REDLOCK must name the redlock command}

need_redis
tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-test-testbed.XXXXXX")
export REDLOCK_TESTBED_LEDGER=$tmp/ledger
beds=()  # "STATE_DIR BASE_PORT" of every bed started
cleanup() {
  local rc=$? bed
  trap - EXIT INT TERM
  for bed in "${beds[@]}"; do
    REDLOCK_TESTBED_DIR=${bed% *} REDLOCK_TESTBED_BASE_PORT=${bed#* } "$testbed" down >/dev/null 2>&1 || true
  done
  rm -rf -- "$tmp"
  exit "$rc"
}
on_exit cleanup

# shellcheck source-path=SCRIPTDIR source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"

# free_base: a base port whose five node ports are all free.
free_base() {
  local try base n ok
  for ((try = 0; try < 50; try++)); do
    base=$(free_port) || return 1
    ok=yes
    for n in 1 2 3 4 5; do
      if port_busy $((base + n)); then ok=no; break; fi
    done
    if [[ $ok == yes ]]; then printf '%s\n' "$base"; return 0; fi
  done
  return 1
}

# bed STATE BASE ARG...: testbed.sh ARG... on that bed; its notes to bed.log.
bed() {
  local state=$1 base=$2
  shift 2
  REDLOCK_TESTBED_DIR=$state REDLOCK_TESTBED_BASE_PORT=$base "$testbed" "$@" 2>>"$tmp/bed.log"
}
# new_bed NAME: a state dir and base port for a new bed (BED_STATE, BED_BASE, URLS).
new_bed() {
  BED_STATE=$tmp/$1
  BED_BASE=$(free_base) || die "no five free ports in a row"
  beds+=("$BED_STATE $BED_BASE")
  URLS=$(bed "$BED_STATE" "$BED_BASE" urls)
}

# nodes_json: `redlock nodes --json` of the current bed, as a fresh client
# would see it (its first contact with every master); sets rc and out.
nodes_json() {
  rc=0
  out=$("$redlock" --nodes "$URLS" nodes --json 2>"$tmp/nodes.err") || rc=$?
}
usable_is() { grep -Eq "\"usable\":$1[,}]" <<<"$out"; }
# quarantined N: how many masters the last nodes_json showed quarantined.
quarantined() { grep -o '"quarantined":true' <<<"$out" | wc -l; }

# ---- a new bed counts at once ------------------------------------------------
new_bed fresh
check "a fresh bed starts" bed "$BED_STATE" "$BED_BASE" up
check "every node says it is a clean start" [ "$(grep -c 'a clean start: counts at once' "$tmp/bed.log")" = 5 ]
nodes_json
check "fresh bed: redlock nodes exits 0 (locks can be taken)" [ "$rc" = 0 ]
check "fresh bed: all 5 masters usable ($out)" usable_is 5
check "fresh bed: none quarantined" [ "$(quarantined)" = 0 ]
rc=0
"$redlock" --nodes "$URLS" run --nonblock first-lock -- true 2>"$tmp/run.err" || rc=$?
check "fresh bed: a lock is taken at once (run exit $rc: $(<"$tmp/run.err"))" [ "$rc" = 0 ]

# ---- a node restarted empty on its port: quarantined -------------------------
check "restart node 1 (persistence none: empty)" bed "$BED_STATE" "$BED_BASE" restart 1
nodes_json
check "restarted node: 4 of 5 usable ($out)" usable_is 4
check "restarted node: 1 quarantined" [ "$(quarantined)" = 1 ]
check "restarted node: it is node 1, for about a minute" \
  grep -Eq "\"address\":\"127\\.0\\.0\\.1:$((BED_BASE + 1))\"[^}]*\"quarantine_left_ms\":[56][0-9]{4}," <<<"$out"

# ---- the whole bed again after down: its state dirs exist, quarantined -------
check "down" bed "$BED_STATE" "$BED_BASE" down
check "up again" bed "$BED_STATE" "$BED_BASE" up
nodes_json
check "up after down: redlock nodes exits 1 (no lock can be taken)" [ "$rc" = 1 ]
check "up after down: all 5 quarantined ($out)" [ "$(quarantined)" = 5 ]
check "down again" bed "$BED_STATE" "$BED_BASE" down

# ---- a new state dir on ports a bed served before: quarantined ---------------
used_base=$BED_BASE
BED_STATE=$tmp/other
beds+=("$BED_STATE $used_base")
check "a new bed on the same ports" bed "$BED_STATE" "$used_base" up
nodes_json
check "same ports, new state dir: all 5 quarantined ($out)" [ "$(quarantined)" = 5 ]

# ---- a clean start with persistence, restarted with its data -----------------
new_bed kept
check "a fresh bed with persistence always" bed "$BED_STATE" "$BED_BASE" up --persistence always
nodes_json
check "fresh bed (always): all 5 usable ($out)" usable_is 5
check "restart node 2, keeping its data" bed "$BED_STATE" "$BED_BASE" restart 2
check "node 2 kept its marker" \
  [ "$(redis-cli -h 127.0.0.1 -p $((BED_BASE + 2)) exists redlock-marker </dev/null)" = 1 ]
nodes_json
check "restarted with its data: 1 quarantined ($out)" [ "$(quarantined)" = 1 ]

bed_log() {
  log "the beds said:"
  sed 's/^/  | /' "$tmp/bed.log" >&2
}
CHECKS_ON_FAIL=bed_log
checks_done
