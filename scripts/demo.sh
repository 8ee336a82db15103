#!/usr/bin/env bash
# demo.sh — the main job, end to end: build what it runs (the library, the
# redlock command, examples/fenced_increment, tools/demo/demo_report), start
# five local Redis masters, and let K workers increment one counter under
# `redlock run --fence` while masters are killed, paused and restarted, one
# lock holder is frozen past its lease and one write is delayed on its way
# to the store. Each increment
# is a NON-atomic read-modify-write (examples/fenced_increment) on a separate
# "store" Redis whose writes are fenced: the store refuses a write whose
# fence is below the highest it has seen. At the end it proves:
#   1. the counter equals K × N (no increment lost, none repeated; plus the
#      delayed write, should the store have accepted it),
#   2. no command issued a write after its own lease's validity deadline
#      (CLOCK_MONOTONIC issue times against `redlock run --json`'s
#      deadline_mono_us: 0, without relying on the fence),
#   3. the frozen holder's command was killed (by `redlock run`'s guard)
#      before its lease's deadline,
#   4. the delayed write — issued in time, delivered after the deadline and
#      after the next holder's write — was rejected by the fence, and
#   5. no two holders' windows [acquired, min(released, validity deadline)]
#      overlap,
# and draws an SVG timeline of who held the lock when, faults shaded
# (tools/demo/demo_report, on the chaos suite's checker and renderer).
#
#   scripts/demo.sh [--nodes URL,URL,...] [--workers K] [--iterations N]
#                   [--no-quarantine] [--out DIR] [--no-build]
#
#   --nodes URLS      use these masters instead of the local bed; the demo
#                     then neither starts, kills, pauses nor restarts them
#                     (only the holder stall and the delayed write are injected)
#   --workers K       concurrent workers (default 8)
#   --iterations N    increments per worker (default 30)
#   --no-quarantine   let freshly (re)started masters count at once
#   --out DIR         where the report is kept (default $BUILD_DIR/demo)
#   --no-build        skip scripts/bootstrap.sh (the binaries must exist)
#
# Fault schedule on the local bed (seconds after the workers start; stopped
# early, with everything stopped put back, if the workers finish first):
#   t+1 delay the next holder's write by 1.5 s on its way to the store (a
#   helper process outside the command's process group delivers it: no
#   supervisor can stop a write that has left the process), t+2 kill master
#   1, t+4 pause master 2, t+6 stall the next lock holder (its `redlock run`
#   is SIGSTOPped for 3 s, > 2 × the 1 s TTL; the guard must kill its command
#   before the lease's deadline), t+8 restart master 1 (persistence always:
#   keys and fence counters survive; it sits out its quarantine of max_ttl =
#   3 s), t+10 resume master 2.
#
# Output: the report of demo_report (counter vs expected, writes accepted
# and rejected, writes issued after their lease's deadline, the delayed
# write, acquisitions with acquire latency p50/p99, lost leases, commands
# killed, overlaps, faults) and a final OK/FAILED line. Kept in DIR:
# timeline.svg, report.json and records/ (the raw JSON lines: rerun
# demo_report on them). Exit status 0 when every check passes, 1 when one
# fails, 2 on a usage error. Everything the demo starts is stopped on exit by
# pid (workers by their process group, whose id is the pid we started; the
# stall's and the delayed write's helpers by the pid they leave in their
# claimed file, while they hold its lock; the bed by `testbed.sh down`, only
# if the demo started it); its temp dir is removed.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
workers=8
iterations=30
nodes=
no_quarantine=no
build=yes
out=

# The lock's timing: a 1 s lease, a 3 s cap (= the restart quarantine), a
# stall well past the lease, and a network delay longer than a lease (so the
# delayed write arrives after its lease's deadline, whenever it was issued).
readonly RESOURCE=demo-counter TTL_MS=1000 MAX_TTL_MS=3000 WAIT_MS=30000
readonly WORK_MS=40 STALL_MS=3000 DELAY_MS=1500 MAX_ATTEMPTS=20
# How long the demo waits for the helpers to finish after the workers did
# (the delayed write is at most DELAY_MS + the store's 2 s timeouts away).
readonly HELPER_WAIT_S=10

me=demo
usage() {
  cat >&2 <<'EOF'
usage: scripts/demo.sh [--nodes URL,URL,...] [--workers K] [--iterations N]
                       [--no-quarantine] [--out DIR] [--no-build]
  --nodes URLS      use these masters instead of the local bed (no kill/pause/restart then)
  --workers K       concurrent workers (default 8)
  --iterations N    increments per worker (default 30)
  --no-quarantine   let freshly (re)started masters count at once
  --out DIR         where the report is kept (default $BUILD_DIR/demo)
  --no-build        skip scripts/bootstrap.sh (the binaries must exist)
EOF
}
positive() {  # positive NAME VALUE MAX
  if ! [[ $2 =~ ^[1-9][0-9]*$ ]] || (($2 > $3)); then bad "$1: '$2' is not a whole number from 1 to $3"; fi
}

while (($#)); do
  case $1 in
    --nodes)
      need_value $# "$1" "a value (URL,URL,...)"
      [[ -n $2 ]] || bad "--nodes: empty list"
      nodes=$2; shift 2 ;;
    --workers)
      need_value $# "$1"
      positive --workers "$2" 64; workers=$2; shift 2 ;;
    --iterations)
      need_value $# "$1"
      positive --iterations "$2" 100000; iterations=$2; shift 2 ;;
    --out)
      need_value $# "$1" "a directory"
      [[ -n $2 ]] || bad "--out: empty path"
      out=$2; shift 2 ;;
    --no-quarantine) no_quarantine=yes; shift ;;
    --no-build) build=no; shift ;;
    -h | --help) usage; exit 0 ;;
    *) bad "unexpected argument '$1'" ;;
  esac
done
out=${out:-$BUILD_DIR/demo}

# ---- state and cleanup ---------------------------------------------------------

tmp=
store_pid=
started_bed=no
claimed_files=()
running_workers=()
# Faults the schedule has started and not yet undone (cleanup undoes them).
killed_master=no
paused_master=no

# helper_alive CLAIMED: true while the helper that claimed a fault holds
# the lock on its claimed file (it keeps it for as long as it lives).
helper_alive() {
  [[ -e $1 ]] && ! flock -n "$1" true 2>/dev/null
}

cleanup() {
  local rc=$? pid claimed
  set +e
  # The stall's and the delayed write's helpers live in sessions of their
  # own: stopped by the pid each wrote into its claimed file, if it still
  # holds that file's lock (so the pid is still the helper's).
  for claimed in "${claimed_files[@]}"; do
    if helper_alive "$claimed"; then
      pid=$(<"$claimed")
      [[ $pid =~ ^[0-9]+$ ]] && kill -TERM "$pid" 2>/dev/null
    fi
  done
  # Each worker runs in its own process group, whose id is the worker's pid:
  # signal the group so its `redlock run` and child go too (CONT first, a
  # stalled holder's parent is stopped).
  for pid in "${running_workers[@]}"; do
    kill -CONT -- "-$pid" 2>/dev/null
    kill -TERM -- "-$pid" 2>/dev/null
  done
  for pid in "${running_workers[@]}"; do
    wait "$pid" 2>/dev/null
  done
  stop_pid "$store_pid"
  if [[ $paused_master == yes ]]; then scripts/testbed.sh resume 2 >/dev/null 2>&1; fi
  if [[ $killed_master == yes && $started_bed == no ]]; then
    scripts/testbed.sh restart 1 >/dev/null 2>&1
  fi
  if [[ $started_bed == yes ]]; then
    scripts/testbed.sh down >/dev/null 2>&1
  fi
  if [[ -n $tmp ]]; then
    rm -rf "$tmp"
  fi
  exit "$rc"
}
on_exit cleanup

# ---- build -------------------------------------------------------------------------

# Only what the demo runs (not the tests, simulator or benchmarks).
readonly BINARIES=(cli/redlock examples/fenced_increment tools/demo/demo_report)
if [[ $build == yes ]]; then
  BUILD_DIR=$BUILD_DIR scripts/bootstrap.sh "${BINARIES[@]}"
fi
redlock=$BUILD_DIR/${BINARIES[0]}
fenced=$BUILD_DIR/${BINARIES[1]}
report=$BUILD_DIR/${BINARIES[2]}
for bin in "$redlock" "$fenced" "$report"; do
  [[ -x $bin ]] || { say "FAILED — $bin was not built"; exit 1; }
done
command -v redis-server >/dev/null || { say "FAILED — redis-server not found"; exit 1; }
command -v redis-cli >/dev/null || { say "FAILED — redis-cli not found"; exit 1; }
command -v flock >/dev/null || { say "FAILED — flock (util-linux) not found"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-demo.XXXXXX")
mkdir -p "$out"
rec=$out/records
rm -rf "$rec" "$out/timeline.svg" "$out/report.json"
mkdir -p "$rec"
faults=$rec/faults.jsonl
: >"$faults"

# ---- the lock's masters ------------------------------------------------------------

local_bed=no
if [[ -z $nodes ]]; then
  local_bed=yes
  # Start the bed unless some of it is already running (then it is not ours
  # to stop; `up` only starts the missing nodes).
  if scripts/testbed.sh status | awk '$6 != "down" { found = 1 } END { exit !found }'; then
    say "testbed already running: using it and leaving it up (its persistence is whatever it was started with)"
  else
    started_bed=yes
  fi
  scripts/testbed.sh up --persistence always 2>"$rec/testbed.log" ||
    { say "FAILED — the testbed did not start:"; cat "$rec/testbed.log" >&2; exit 1; }
  nodes=$(scripts/testbed.sh urls)
fi
say "lock masters: $nodes"

# The config: the masters plus a short lease cap, so a restarted master sits
# out only max_ttl (3 s) before it counts again.
json_string() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  printf '"%s"' "$s"
}
conf=$tmp/redlock.json
{
  printf '{"nodes": ['
  sep=
  IFS=, read -r -a node_list <<<"$nodes"
  for url in "${node_list[@]}"; do
    printf '%s%s' "$sep" "$(json_string "$url")"
    sep=', '
  done
  printf '], "default_ttl_ms": %d, "max_ttl_ms": %d' "$TTL_MS" "$MAX_TTL_MS"
  [[ $no_quarantine == yes ]] && printf ', "quarantine": false'
  printf '}\n'
} >"$conf"

# Bounded wait until a quorum of masters is reachable and out of quarantine.
quorum_ready() {
  "$redlock" --config "$conf" nodes >"$tmp/nodes.out" 2>&1
}
waited=$(now_us)
if ! wait_until -i 0.1 10 quorum_ready; then
  say "FAILED — no quorum of masters ready after 10 s; redlock nodes says:"
  cat "$tmp/nodes.out" >&2
  exit 1
fi
waited=$((($(now_us) - waited) / 100000))
say "a quorum of masters is ready (out of quarantine) after $((waited / 10)).$((waited % 10)) s"

# ---- the store Redis (separate from the lock's masters) ------------------------

if ! start_master any "$tmp/store"; then
  say "FAILED — could not start the store redis-server"
  exit 1
fi
store_pid=$MASTER_PID
store_port=$MASTER_PORT
say "fenced store: 127.0.0.1:$store_port (pid $store_pid), hash $RESOURCE"

# ---- the workers ------------------------------------------------------------------

stall_file=$tmp/stall
delay_file=$tmp/delay
claimed_files=("$stall_file.claimed" "$delay_file.claimed")
helpers_log=$rec/helpers.jsonl
: >"$helpers_log"

# worker W: ITERATIONS increments, each under its own `redlock run --fence`.
# An increment is repeated until the child logs an accepted write (a lost
# lease, a rejected stale write, a write handed to the network whose outcome
# is unknown, or a failed acquire just means "again"), so the counter must
# end at exactly workers × iterations (+ the delayed write, had it landed). The last line of
# run's stderr is its JSON result (runs.jsonl); anything before it goes to
# stderr.log. Exit 1 when an increment fails MAX_ATTEMPTS times or
# `redlock run` cannot run at all.
worker() {
  local w=$1 i attempt rc before after last
  local runs=$rec/worker$w.runs.jsonl writes=$rec/worker$w.writes.jsonl
  local errs=$rec/worker$w.stderr.log err=$tmp/worker$w.err
  : >"$runs"
  : >"$writes"
  : >"$errs"
  for ((i = 1; i <= iterations; i++)); do
    for ((attempt = 1; ; attempt++)); do
      before=$(wc -l <"$writes")
      rc=0
      DEMO_WORKER=$w "$redlock" --config "$conf" run --json --fence --ttl "${TTL_MS}ms" --wait "${WAIT_MS}ms" \
        "$RESOURCE" -- "$fenced" --store "127.0.0.1:$store_port" --key "$RESOURCE" --log "$writes" \
        --work-ms "$WORK_MS" --fault-log "$helpers_log" --stall-file "$stall_file" --stall-ms "$STALL_MS" \
        --delay-file "$delay_file" --delay-ms "$DELAY_MS" \
        </dev/null >/dev/null 2>"$err" || rc=$?
      last=$(tail -n 1 "$err")
      if [[ $last == '{'*'"command"'* ]]; then
        printf '%s\n' "$last" >>"$runs"
        head -n -1 "$err" >>"$errs"
      else
        cat "$err" >>"$errs"
        printf 'worker %d: redlock run exited %d without a JSON result\n' "$w" "$rc" >>"$errs"
        return 1
      fi
      case $rc in 2 | 126 | 127) printf 'worker %d: redlock run exited %d\n' "$w" "$rc" >>"$errs"; return 1 ;; esac
      after=$(wc -l <"$writes")
      if ((after > before)) && [[ $(tail -n 1 "$writes") == *'"accepted":true'* ]]; then
        break
      fi
      if ((attempt >= MAX_ATTEMPTS)); then
        printf 'worker %d: increment %d failed %d times\n' "$w" "$i" "$attempt" >>"$errs"
        return 1
      fi
    done
  done
}

workers_alive() {
  local pid
  for pid in "${running_workers[@]}"; do
    kill -0 "$pid" 2>/dev/null && return 0
  done
  return 1
}

say "running $workers workers x $iterations increments of $RESOURCE (lease ${TTL_MS} ms, work ${WORK_MS} ms each)"
t0=$(now_us)
set -m  # each worker in its own process group (pgid = its pid), for cleanup
for ((w = 1; w <= workers; w++)); do
  worker "$w" &
  running_workers+=("$!")
done
set +m

# ---- the fault schedule ------------------------------------------------------------

# at SECONDS: sleeps until that long after the workers started; false at once
# when every worker has finished (the rest of the schedule is then skipped).
at() {
  local target=$((t0 + $1 * 1000000))
  while (($(now_us) < target)); do
    workers_alive || return 1
    sleep 0.05
  done
  workers_alive
}
since() {  # since US: seconds since the workers started, one decimal
  local d=$(($1 - t0))
  printf 't+%d.%ds' $((d / 1000000)) $((d % 1000000 / 100000))
}
fault() {  # fault WHAT START_US END_US
  printf '{"what":"%s","start_us":%s,"end_us":%s}\n' "$1" "$2" "$3" >>"$faults"
}
bed() {  # bed ARGS...: testbed.sh, its notes to the record
  scripts/testbed.sh "$@" >>"$rec/testbed.log" 2>&1
}

kill_start=
pause_start=
stall_armed=no
delay_armed=no
quarantine_note="; quarantined for ${MAX_TTL_MS} ms"
[[ $no_quarantine == no ]] || quarantine_note="; counts at once: --no-quarantine"
# put_back FAULT START_US DONE TESTBED_ARGS...: undoes a fault with
# testbed.sh and records its interval; false when testbed.sh failed.
put_back() {
  local what=$1 start=$2 done_text=$3 t
  shift 3
  if ! bed "$@"; then
    say "could not $* (see $rec/testbed.log)"
    return 1
  fi
  t=$(now_us)
  fault "$what" "$start" "$t"
  say "$(since "$t") $done_text"
}
restart_master() {
  if put_back "master 1 down" "$kill_start" \
    "master 1 restarted (keeps its keys$quarantine_note)" restart 1; then
    killed_master=no
  fi
}
resume_master() {
  if put_back "master 2 paused" "$pause_start" "master 2 resumed" resume 2; then paused_master=no; fi
}

schedule() {
  at 1 || return 0
  : >"$delay_file"
  delay_armed=yes
  say "$(since "$(now_us)") the next lock holder's write will take ${DELAY_MS} ms to reach the store (handed to a helper outside its process group)"
  if [[ $local_bed == yes ]]; then
    at 2 || return 0
    kill_start=$(now_us)
    if bed kill 1; then killed_master=yes; say "$(since "$kill_start") master 1 killed (SIGKILL)"; fi
    at 4 || return 0
    pause_start=$(now_us)
    if bed pause 2; then paused_master=yes; say "$(since "$pause_start") master 2 paused (SIGSTOP)"; fi
  else
    say "--nodes given: these masters are not killed, paused or restarted (only the holder stall is injected)"
  fi
  at 6 || return 0
  : >"$stall_file"
  stall_armed=yes
  say "$(since "$(now_us)") the next lock holder will stall for ${STALL_MS} ms (its redlock run is SIGSTOPped; its guard must end the command)"
  [[ $local_bed == yes ]] || return 0
  at 8 || return 0
  [[ $killed_master == yes ]] && restart_master
  at 10 || return 0
  [[ $paused_master == yes ]] && resume_master
  return 0
}
schedule
# Put back whatever the schedule left stopped (workers finished early).
if [[ $paused_master == yes ]]; then resume_master; fi
if [[ $killed_master == yes ]]; then restart_master; fi

failed_workers=0
pids=("${running_workers[@]}")
for pid in "${pids[@]}"; do
  wait "$pid" || failed_workers=$((failed_workers + 1))
  running_workers=("${running_workers[@]:1}")
done
elapsed=$(since "$(now_us)")
say "workers finished at ${elapsed#t+} ($failed_workers failed)"
# injected NAME ARMED FILE: 1 when the fault was claimed by a holder, else 0
# (with a note); disarms an unclaimed one.
injected() {
  if [[ $2 == no ]]; then
    say "note: the workers finished before the $1 was due (try more --iterations)" >&2
  elif [[ -e $3 ]]; then
    rm -f "$3"
    say "note: the $1 was armed but no holder ran after it (try more --iterations)" >&2
  fi
  if [[ -e $3.claimed ]]; then echo 1; else echo 0; fi
}
stalls=$(injected "holder stall" "$stall_armed" "$stall_file")
delays=$(injected "delayed write" "$delay_armed" "$delay_file")
# The delayed write may still be on its way: await its helper (it holds the
# lock on its claimed file until it has logged the store's verdict).
helpers_done=yes
for claimed in "${claimed_files[@]}"; do
  if [[ -e $claimed ]] && ! flock -w "$HELPER_WAIT_S" "$claimed" true; then
    helpers_done=no
    say "the helper of $claimed (pid $(<"$claimed")) did not finish within ${HELPER_WAIT_S} s"
  fi
done

# ---- the proof -------------------------------------------------------------------------

expected=$((workers * iterations))
value=$(redis-cli -h 127.0.0.1 -p "$store_port" HGET "$RESOURCE" value)
rejected=$(redis-cli -h 127.0.0.1 -p "$store_port" HGET "$RESOURCE" rejected)
[[ $value =~ ^[0-9]+$ ]] || value=0
[[ $rejected =~ ^[0-9]+$ ]] || rejected=0

inputs=()
for ((w = 1; w <= workers; w++)); do
  inputs+=(--worker "$w" "$rec/worker$w.runs.jsonl" "$rec/worker$w.writes.jsonl")
done
title="redlock demo: $workers workers x $iterations fenced increments"
[[ $local_bed == yes ]] && title+=", master 1 killed + restarted, master 2 paused"
title+=", a holder stalled, a write delayed"
echo
report_rc=0
"$report" --final-value "$value" --expected "$expected" --store-rejected "$rejected" \
  --injected-stalls "$stalls" --injected-delays "$delays" \
  --svg "$out/timeline.svg" --json "$out/report.json" --title "$title" \
  "${inputs[@]}" "$helpers_log" "$faults" || report_rc=$?
echo

problems=()
((report_rc == 0)) || problems+=("demo_report found a problem (exit $report_rc)")
((failed_workers == 0)) || problems+=("$failed_workers worker(s) failed (see $rec/worker*.stderr.log)")
[[ $helpers_done == yes ]] || problems+=("a fault's helper did not finish")
# report_field NAME: a whole-number top-level field of report.json.
report_field() {
  sed -n "s/^  \"$1\": \([0-9]*\),\{0,1\}\$/\1/p" "$out/report.json" 2>/dev/null
}
late=$(report_field late_issued_writes)
delayed_rejected=$(report_field delayed_rejected)
if ((${#problems[@]} == 0)); then
  say "OK — counter $value as expected, ${late:-?} write(s) issued after their lease's deadline," \
    "$stalls stalled holder(s) killed before the deadline, ${delayed_rejected:-?} of $delays delayed write(s)" \
    "rejected by the fence ($rejected stale write(s) fenced off in all), no overlapping holders (${elapsed#t+})"
  say "kept: $out (timeline.svg, report.json, records/)"
else
  say "FAILED — $(IFS=';'; printf '%s' "${problems[*]}")"
  say "kept: $out (timeline.svg, report.json, records/)"
  exit 1
fi
