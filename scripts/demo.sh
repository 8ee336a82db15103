#!/usr/bin/env bash
# demo.sh — the main job, end to end: build, start five local Redis masters,
# let K counter_worker processes fight over one Redlock lock while each does a
# non-atomic GET + SET increment of a counter kept in a separate Redis, then
# prove mutual exclusion two ways:
#   1. the counter equals K × N (no increment was lost), and
#   2. `counter_worker check` finds no two holders whose lock windows
#      [acquired, min(released, validity deadline)] overlap.
#
#   scripts/demo.sh [--nodes URL,URL,...] [--workers K] [--iterations N] [--no-quarantine]
#
#   --nodes URLS      use these masters instead of the local bed
#                     (scripts/testbed.sh, 127.0.0.1:7001-7005), which is then
#                     neither started nor stopped
#   --workers K       contending processes (default 6)
#   --iterations N    increments per worker (default 50)
#   --no-quarantine   with --nodes: let freshly started masters count at once
#                     (always on for the local bed, whose masters start empty)
#
# Exit status 0 when both checks pass, 1 when one fails, 2 on a usage error.
# Everything the demo starts is stopped on exit (by pid; the bed by
# `testbed.sh down`, only if the demo started it), and its temp dir removed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
workers=6
iterations=50
nodes=
no_quarantine=no

me=demo
say() { printf '%s: %s\n' "$me" "$*"; }
usage() {
  cat >&2 <<'EOF'
usage: scripts/demo.sh [--nodes URL,URL,...] [--workers K] [--iterations N] [--no-quarantine]
  --nodes URLS      use these masters instead of the local bed (scripts/testbed.sh)
  --workers K       contending processes (default 6)
  --iterations N    increments per worker (default 50)
  --no-quarantine   with --nodes: let freshly started masters count at once
EOF
}
bad() {
  printf '%s: %s\n' "$me" "$1" >&2
  usage
  exit 2
}
positive() {  # positive NAME VALUE
  [[ $2 =~ ^[1-9][0-9]{0,5}$ ]] || bad "$1: '$2' is not a whole number from 1 to 999999"
}

while (($#)); do
  case $1 in
    --nodes)
      (($# >= 2)) || bad "--nodes needs a value (URL,URL,...)"
      [[ -n $2 ]] || bad "--nodes: empty list"
      nodes=$2; shift 2 ;;
    --workers)
      (($# >= 2)) || bad "--workers needs a value"
      positive --workers "$2"; workers=$2; shift 2 ;;
    --iterations)
      (($# >= 2)) || bad "--iterations needs a value"
      positive --iterations "$2"; iterations=$2; shift 2 ;;
    --no-quarantine) no_quarantine=yes; shift ;;
    -h | --help) usage; exit 0 ;;
    *) bad "unexpected argument '$1'" ;;
  esac
done

# ---- state and cleanup ---------------------------------------------------------

tmp=
counter_pid=
started_bed=no
running_workers=()

cleanup() {
  local rc=$?
  set +e
  # Our own children only, each by its pid (unreaped, so the pid is still ours).
  for pid in "${running_workers[@]}"; do
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  if [[ -n $counter_pid ]]; then
    kill -TERM "$counter_pid" 2>/dev/null
    wait "$counter_pid" 2>/dev/null
  fi
  if [[ $started_bed == yes ]]; then
    scripts/testbed.sh down
  fi
  if [[ -n $tmp ]]; then
    rm -rf "$tmp"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

# ---- build -------------------------------------------------------------------------

scripts/bootstrap.sh
worker_bin=$BUILD_DIR/examples/counter_worker
[[ -x $worker_bin ]] || { say "FAILED — $worker_bin was not built"; exit 1; }
command -v redis-server >/dev/null || { say "FAILED — redis-server not found"; exit 1; }
command -v redis-cli >/dev/null || { say "FAILED — redis-cli not found"; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/redlock-demo.XXXXXX")

# ---- the lock's masters ------------------------------------------------------------

worker_flags=()
if [[ -z $nodes ]]; then
  # Start the bed unless some of it is already running (then it is not ours
  # to stop; `up` only starts the missing nodes).
  if scripts/testbed.sh status | awk '$6 != "down" { found = 1 } END { exit !found }'; then
    say "testbed already running: using it and leaving it up"
  else
    started_bed=yes
  fi
  scripts/testbed.sh up
  nodes=$(scripts/testbed.sh urls)
  # The bed's masters start empty, so they have no lost locks to sit out.
  worker_flags+=(--no-quarantine)
elif [[ $no_quarantine == yes ]]; then
  worker_flags+=(--no-quarantine)
fi
say "lock masters: $nodes"

# ---- the counter Redis (separate from the lock's masters) ------------------------

# start_counter PORT: starts redis-server on 127.0.0.1:PORT as our child and
# waits (bounded) until it answers PING; false if it exited (port taken).
start_counter() {
  local port=$1 i
  mkdir -p "$tmp/counter"
  redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no \
    --dir "$tmp/counter" --logfile "$tmp/counter/redis.log" </dev/null &
  counter_pid=$!
  for ((i = 0; i < 200; i++)); do
    if ! kill -0 "$counter_pid" 2>/dev/null; then
      wait "$counter_pid" 2>/dev/null || true
      counter_pid=
      return 1
    fi
    [[ $(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null) == PONG ]] && return 0
    sleep 0.05
  done
  return 1
}

counter_port=
for _ in 1 2 3 4 5 6 7 8; do
  port=$((20000 + RANDOM % 40000))
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && continue  # something listens there
  if start_counter "$port"; then
    counter_port=$port
    break
  fi
done
if [[ -z $counter_port ]]; then
  say "FAILED — could not start the counter redis-server; log tail:"
  tail -n 20 "$tmp/counter/redis.log" >&2 2>/dev/null || true
  exit 1
fi
say "counter redis: 127.0.0.1:$counter_port (pid $counter_pid)"

# ---- the contenders ------------------------------------------------------------------

say "running $workers workers x $iterations iterations on resource demo-counter"
start=$SECONDS
logs=()
for ((w = 1; w <= workers; w++)); do
  logs+=("$tmp/worker$w.log")
  "$worker_bin" --nodes "$nodes" --counter-url "redis://127.0.0.1:$counter_port" \
    --resource demo-counter --iterations "$iterations" --log "$tmp/worker$w.log" \
    "${worker_flags[@]}" </dev/null &
  running_workers+=("$!")
done

failed_workers=0
pids=("${running_workers[@]}")
for pid in "${pids[@]}"; do
  if ! wait "$pid"; then
    failed_workers=$((failed_workers + 1))
  fi
  running_workers=("${running_workers[@]:1}")
done
say "workers finished in $((SECONDS - start)) s ($failed_workers failed)"

# ---- the proof -------------------------------------------------------------------------

expected=$((workers * iterations))
counter=$(redis-cli -h 127.0.0.1 -p "$counter_port" GET counter)
check_rc=0
check=$("$worker_bin" check "${logs[@]}") || check_rc=$?
say "counter:  $counter"
say "expected: $expected"
say "check:    $check"

overlaps=${check##*overlaps=}
if ((failed_workers == 0)) && [[ $counter == "$expected" ]] && ((check_rc == 0)) && [[ $overlaps == 0 ]]; then
  say "OK — counter $counter == expected $expected, 0 overlapping holders"
else
  say "FAILED — counter ${counter:-<none>} (expected $expected), ${overlaps:-?} overlapping holders, $failed_workers failed workers"
  exit 1
fi
