#!/usr/bin/env bash
# testbed.sh — a local bed of five independent redis-server masters on
# 127.0.0.1:7001..7005 for trying the library and the CLI by hand.
#
#   scripts/testbed.sh up [--persistence none|always]
#   scripts/testbed.sh down | status | urls
#   scripts/testbed.sh kill N | pause N | resume N          (N = 1..5)
#   scripts/testbed.sh restart N [--wipe] [--persistence none|always]
#   scripts/testbed.sh config N      the node's port, bind, appendonly,
#                                    appendfsync, save, dir
#
# Persistence is per node and remembered in its state dir (default none):
#   always  AOF on, fsync before every reply: a killed or restarted node keeps
#           every write it acknowledged.
#   none    no AOF, no RDB: every start begins empty (leftover data files are
#           removed at start), like a node that lost its disk.
# `up --persistence X` sets it for every node it starts, `restart N
# --persistence X` for node N; without the flag the remembered one is used.
#
# State (data dirs, pidfiles, logs) lives in
#   ${REDLOCK_TESTBED_DIR:-${TMPDIR:-/tmp}/redlock-testbed}/nodeN/
# Processes are signalled only by the pid in their pidfile, and only after
# checking that this pid is a live redis-server on the node's port.
set -euo pipefail

NODES=(1 2 3 4 5)
BASE_PORT=7000
STATE_DIR=${REDLOCK_TESTBED_DIR:-${TMPDIR:-/tmp}/redlock-testbed}
STOP_TIMEOUT_TICKS=100   # 100 x 0.05 s = 5 s before SIGKILL
READY_TIMEOUT_TICKS=200  # 200 x 0.05 s = 10 s for a node to answer PING

# ---- persistence flags (one line each; keep them on one line) ----------------
# tests/compose/test_compose.cpp reads PERSISTENCE_ALWAYS from this file and
# checks that every node in docker-compose.yml states exactly these settings,
# so the two beds cannot drift apart. Words only: no $, no expansions.
PERSISTENCE_ALWAYS=(--appendonly yes --appendfsync always --save "")
PERSISTENCE_NONE=(--appendonly no --save "")
# ---- end of persistence flags -------------------------------------------------

me=$(basename "$0")

usage() {
  cat >&2 <<EOF
usage: $me up [--persistence none|always]
       $me down | status | urls
       $me kill N | pause N | resume N        (N is 1..5)
       $me restart N [--wipe] [--persistence none|always]
       $me config N                         (port, bind, appendonly, appendfsync, save, dir)
persistence: always = AOF with fsync on every write (kept across kill/restart),
             none = no AOF/RDB, every start is empty (the default)
state dir: $STATE_DIR (set REDLOCK_TESTBED_DIR to change)
EOF
}

bad() {  # bad MESSAGE: usage error, exit 2
  printf '%s: %s\n' "$me" "$1" >&2
  usage
  exit 2
}

die() {
  printf '%s: %s\n' "$me" "$1" >&2
  exit 1
}

note() { printf '%s\n' "$*" >&2; }

port_of() { echo $((BASE_PORT + $1)); }
node_dir() { echo "$STATE_DIR/node$1"; }
pidfile_of() { echo "$(node_dir "$1")/redis.pid"; }

# proc_state PID: the state letter from /proc/PID/stat (empty if gone).
proc_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  printf '%s' "${stat%% *}"
}

# is_our_redis PID PORT: PID is alive (not a zombie) and is a redis-server
# serving PORT.
is_our_redis() {
  local pid=$1 port=$2 cmd state
  [[ $pid =~ ^[1-9][0-9]*$ ]] || return 1
  state=$(proc_state "$pid")
  [[ -n $state && $state != Z && $state != X ]] || return 1
  cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || return 1
  [[ $cmd == *redis-server* ]] || return 1
  [[ $cmd =~ :$port([^0-9]|$) || $cmd =~ --port[[:space:]]+$port([^0-9]|$) ]] || return 1
}

# node_pid N: prints the verified pid of node N, or nothing (and removes a
# stale pidfile).
node_pid() {
  local n=$1 pf pid
  pf=$(pidfile_of "$n")
  [[ -f $pf ]] || return 0
  pid=$(tr -d '[:space:]' 2>/dev/null <"$pf" || true)
  if is_our_redis "$pid" "$(port_of "$n")"; then
    printf '%s' "$pid"
  else
    note "node $n: removing stale pidfile (pid '${pid}' is not redis-server on port $(port_of "$n"))"
    rm -f "$pf"
  fi
}

# wait_gone PID TICKS: true once PID is gone (or a zombie) within TICKS x 0.05 s.
wait_gone() {
  local pid=$1 ticks=$2 i state
  for ((i = 0; i < ticks; i++)); do
    state=$(proc_state "$pid")
    [[ -z $state || $state == Z || $state == X ]] && return 0
    sleep 0.05
  done
  return 1
}

# wait_state PID WANT_STOPPED(yes|no): bounded wait for SIGSTOP/SIGCONT to land.
wait_state() {
  local pid=$1 want=$2 i state
  for ((i = 0; i < 100; i++)); do
    state=$(proc_state "$pid")
    [[ -z $state ]] && return 1
    if [[ $want == yes ]]; then [[ $state == T ]] && return 0; else [[ $state != T ]] && return 0; fi
    sleep 0.05
  done
  return 1
}

persistence_of() {
  local f
  f="$(node_dir "$1")/persistence"
  if [[ -f $f ]]; then cat "$f"; else echo none; fi
}

ping_port() {
  timeout 2 redis-cli -h 127.0.0.1 -p "$1" ping </dev/null 2>/dev/null
}

# port_busy PORT: something accepts TCP connections on 127.0.0.1:PORT.
port_busy() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# new_log N OFFSET: what node N logged after byte OFFSET.
new_log() {
  local log
  log="$(node_dir "$1")/redis.log"
  [[ -f $log ]] && tail -c +"$(($2 + 1))" "$log"
  return 0
}

log_tail() {  # log_tail N OFFSET
  new_log "$1" "$2" | tail -n 20 | sed 's/^/  | /' >&2
}

# node_args N MODE: sets NODE_ARGS to redis-server's arguments for node N
# with persistence MODE (always|none).
node_args() {
  local n=$1 mode=$2 dir
  dir=$(node_dir "$n")
  NODE_ARGS=(--port "$(port_of "$n")" --bind 127.0.0.1 --protected-mode no
             --dir "$dir/data" --logfile "$dir/redis.log"
             --daemonize yes --pidfile "$(pidfile_of "$n")")
  if [[ $mode == always ]]; then
    NODE_ARGS+=("${PERSISTENCE_ALWAYS[@]}")
  else
    NODE_ARGS+=("${PERSISTENCE_NONE[@]}")
  fi
}

# start_node N PERSISTENCE(optional: empty = remembered)
start_node() {
  local n=$1 want=${2:-} port dir pf pid i reply
  port=$(port_of "$n")
  dir=$(node_dir "$n")
  pf=$(pidfile_of "$n")
  pid=$(node_pid "$n")
  if [[ -n $pid ]]; then
    local now
    now=$(persistence_of "$n")
    if [[ -n $want && $want != "$now" ]]; then
      note "node $n: already running (pid $pid) with persistence $now; use 'restart $n --persistence $want' to change"
    else
      note "node $n: already running (pid $pid)"
    fi
    return 0
  fi
  if port_busy "$port"; then
    note "node $n: port $port is in use by a process that is not this testbed's node"
    return 1
  fi
  mkdir -p "$dir/data"
  local log_offset=0
  if [[ -f $dir/redis.log ]]; then log_offset=$(stat -c %s "$dir/redis.log"); fi
  if [[ -n $want ]]; then echo "$want" >"$dir/persistence"; fi
  local mode
  mode=$(persistence_of "$n")
  node_args "$n" "$mode"
  local args=("${NODE_ARGS[@]}")
  if [[ $mode == none ]]; then
    # No persistence means every start is empty: files left by an earlier
    # `always` run (appendonlydir/) or a manual SAVE (dump.rdb) would
    # otherwise be loaded now or by a later `always` start.
    if [[ -n $(find "$dir/data" -mindepth 1 -print -quit) ]]; then
      find "$dir/data" -mindepth 1 -delete
      note "node $n: persistence none: removed leftover data files"
    fi
  fi
  printf '%s\n' "${args[@]}" >"$dir/started-with"
  rm -f "$pf"
  if ! redis-server "${args[@]}" </dev/null >>"$dir/redis.log" 2>&1; then
    note "node $n: redis-server failed to start; log tail:"
    log_tail "$n" "$log_offset"
    return 1
  fi
  # Bounded wait: pidfile written (after listening) and PING answered by it.
  for ((i = 0; i < READY_TIMEOUT_TICKS; i++)); do
    pid=$(tr -d '[:space:]' 2>/dev/null <"$pf" || true)
    if [[ -n $pid ]] && is_our_redis "$pid" "$port"; then
      reply=$(ping_port "$port" || true)
      if [[ -n $reply && $reply != LOADING* ]]; then
        note "node $n: up on 127.0.0.1:$port (pid $pid, persistence $mode)"
        return 0
      fi
    elif new_log "$n" "$log_offset" | grep -qE 'aborting|FATAL|Fatal error|Failed listening'; then
      note "node $n: redis-server failed to start; log tail:"
      log_tail "$n" "$log_offset"
      rm -f "$pf"
      return 1
    fi
    sleep 0.05
  done
  note "node $n: not ready after 10 s; log tail:"
  log_tail "$n" "$log_offset"
  if [[ -n $pid ]] && is_our_redis "$pid" "$port"; then
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" "$STOP_TIMEOUT_TICKS" || true
  fi
  rm -f "$pf"
  return 1
}

# stop_node N SIGNAL: TERM = graceful (SIGKILL after 5 s), KILL = at once.
stop_node() {
  local n=$1 sig=$2 pid pf
  pf=$(pidfile_of "$n")
  pid=$(node_pid "$n")
  if [[ -z $pid ]]; then
    note "node $n: not running"
    return 0
  fi
  if [[ $sig == TERM ]]; then
    kill -TERM "$pid" 2>/dev/null || true
    kill -CONT "$pid" 2>/dev/null || true  # a paused node must run to see SIGTERM
    if ! wait_gone "$pid" "$STOP_TIMEOUT_TICKS"; then
      note "node $n: pid $pid still alive after 5 s, sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" "$STOP_TIMEOUT_TICKS" || die "node $n: pid $pid did not exit"
    fi
    note "node $n: stopped (pid $pid)"
  else
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" "$STOP_TIMEOUT_TICKS" || die "node $n: pid $pid did not exit after SIGKILL"
    note "node $n: killed (pid $pid)"
  fi
  rm -f "$pf"
}

wipe_node() {
  local data
  data="$(node_dir "$1")/data"
  if [[ -d $data ]]; then
    find "$data" -mindepth 1 -delete
  fi
  note "node $1: data wiped"
}

signal_node() {  # signal_node N STOP|CONT
  local n=$1 sig=$2 pid
  pid=$(node_pid "$n")
  [[ -n $pid ]] || die "node $n: not running"
  kill "-$sig" "$pid"
  if [[ $sig == STOP ]]; then
    wait_state "$pid" yes || die "node $n: pid $pid did not stop"
    note "node $n: paused (pid $pid)"
  else
    wait_state "$pid" no || die "node $n: pid $pid did not continue"
    note "node $n: resumed (pid $pid)"
  fi
}

# ---- config N ------------------------------------------------------------------

CONFIG_KEYS=(port bind appendonly appendfsync save dir)

# conf_line KEY VALUE: one redis.conf-style line; empty or spaced values quoted.
conf_line() {
  if [[ -z $2 || $2 == *[[:space:]]* ]]; then
    printf '%s "%s"\n' "$1" "$2"
  else
    printf '%s %s\n' "$1" "$2"
  fi
}

# print_args_config ARG...: CONFIG_KEYS as set by a redis-server argument list
# (--key value...); keys it leaves alone show redis-server 7.0's default.
print_args_config() {
  declare -A val=([port]=6379 [bind]="* -::*" [appendonly]=no
                  [appendfsync]=everysec [save]="3600 1 300 100 60 10000"
                  [dir]="(redis-server's working directory)")
  local key= arg k
  for arg in "$@"; do
    if [[ $arg == --* ]]; then
      key=${arg#--}
      val[$key]=
    elif [[ -n $key ]]; then
      val[$key]+="${val[$key]:+ }$arg"
    fi
  done
  for k in "${CONFIG_KEYS[@]}"; do
    conf_line "$k" "${val[$k]}"
  done
}

# print_live_config PORT: CONFIG_KEYS read from the server with CONFIG GET;
# fails (printing nothing) if the reply is not the expected key/value pairs.
print_live_config() {
  local lines=() i k
  local -A val=()
  mapfile -t lines < <(timeout 2 redis-cli -h 127.0.0.1 -p "$1" --raw \
                         config get "${CONFIG_KEYS[@]}" </dev/null 2>/dev/null)
  ((${#lines[@]} == 2 * ${#CONFIG_KEYS[@]})) || return 1
  for ((i = 0; i < ${#lines[@]}; i += 2)); do
    val[${lines[i]}]=${lines[i + 1]}
  done
  for k in "${CONFIG_KEYS[@]}"; do
    [[ -v val[$k] ]] || return 1
  done
  for k in "${CONFIG_KEYS[@]}"; do
    conf_line "$k" "${val[$k]}"
  done
}

config_node() {
  local n=$1 port pid state started out
  port=$(port_of "$n")
  started="$(node_dir "$n")/started-with"
  pid=$(node_pid "$n")
  state=
  [[ -n $pid ]] && state=$(proc_state "$pid")
  if [[ -n $pid && $state != T ]]; then
    if out=$(print_live_config "$port"); then
      printf '# node %s (127.0.0.1:%s): running, pid %s; live values from CONFIG GET\n' "$n" "$port" "$pid"
      printf '%s\n' "$out"
      return 0
    fi
    printf '# node %s (127.0.0.1:%s): running, pid %s, but CONFIG GET failed; values it was started with\n' "$n" "$port" "$pid"
  elif [[ -n $pid ]]; then
    printf '# node %s (127.0.0.1:%s): paused, pid %s (cannot answer); values it was started with\n' "$n" "$port" "$pid"
  else
    local mode
    mode=$(persistence_of "$n")
    node_args "$n" "$mode"
    printf '# node %s (127.0.0.1:%s): down; what the next start would use (persistence %s)\n' "$n" "$port" "$mode"
    print_args_config "${NODE_ARGS[@]}"
    return 0
  fi
  [[ -f $started ]] || die "node $n: no record of its start arguments ($started)"
  local args=()
  mapfile -t args <"$started"
  print_args_config "${args[@]}"
}

need_redis() {
  command -v redis-server >/dev/null 2>&1 || die "redis-server not found (scripts/bootstrap.sh installs it)"
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (package redis-tools)"
}

parse_node() {  # parse_node ARG: validates 1..5
  [[ $1 =~ ^[1-5]$ ]] || bad "bad node number '$1' (expected 1..5)"
}

parse_persistence() {
  [[ $1 == none || $1 == always ]] || bad "bad --persistence value '$1' (expected none or always)"
}

# ---- main ----------------------------------------------------------------------

(($# >= 1)) || bad "missing command"
cmd=$1
shift

case $cmd in
  up)
    persistence=
    while (($#)); do
      case $1 in
        --persistence)
          (($# >= 2)) || bad "--persistence needs a value (none or always)"
          parse_persistence "$2"; persistence=$2; shift 2 ;;
        --persistence=*)
          parse_persistence "${1#*=}"; persistence=${1#*=}; shift ;;
        *) bad "unexpected argument '$1' for up" ;;
      esac
    done
    need_redis
    mkdir -p "$STATE_DIR"
    failed=0
    for n in "${NODES[@]}"; do
      start_node "$n" "$persistence" || failed=1
    done
    exit "$failed"
    ;;
  down)
    (($# == 0)) || bad "unexpected argument '$1' for down"
    for n in "${NODES[@]}"; do
      stop_node "$n" TERM
    done
    ;;
  status)
    (($# == 0)) || bad "unexpected argument '$1' for status"
    for n in "${NODES[@]}"; do
      pid=$(node_pid "$n" 2>/dev/null)
      if [[ -z $pid ]]; then
        state=down
        pid=-
      elif [[ $(proc_state "$pid") == T ]]; then
        state=paused
      else
        state=running
      fi
      printf 'node %s  127.0.0.1:%s  pid %-8s %-8s persistence %s\n' \
        "$n" "$(port_of "$n")" "$pid" "$state" "$(persistence_of "$n")"
    done
    ;;
  urls)
    (($# == 0)) || bad "unexpected argument '$1' for urls"
    out=
    for n in "${NODES[@]}"; do
      out+="${out:+,}redis://127.0.0.1:$(port_of "$n")"
    done
    printf '%s\n' "$out"
    ;;
  kill | pause | resume)
    (($# >= 1)) || bad "$cmd needs a node number (1..5)"
    parse_node "$1"
    (($# == 1)) || bad "unexpected argument '$2' for $cmd"
    case $cmd in
      kill) stop_node "$1" KILL ;;
      pause) signal_node "$1" STOP ;;
      resume) signal_node "$1" CONT ;;
    esac
    ;;
  restart)
    (($# >= 1)) || bad "restart needs a node number (1..5)"
    parse_node "$1"
    n=$1
    shift
    wipe=no
    persistence=
    while (($#)); do
      case $1 in
        --wipe) wipe=yes; shift ;;
        --persistence)
          (($# >= 2)) || bad "--persistence needs a value (none or always)"
          parse_persistence "$2"; persistence=$2; shift 2 ;;
        --persistence=*)
          parse_persistence "${1#*=}"; persistence=${1#*=}; shift ;;
        *) bad "unexpected argument '$1' for restart" ;;
      esac
    done
    need_redis
    mkdir -p "$STATE_DIR"
    stop_node "$n" TERM
    if [[ $wipe == yes ]]; then wipe_node "$n"; fi
    start_node "$n" "$persistence"
    ;;
  config)
    (($# >= 1)) || bad "config needs a node number (1..5)"
    parse_node "$1"
    (($# == 1)) || bad "unexpected argument '$2' for config"
    config_node "$1"
    ;;
  -h | --help | help)
    usage
    ;;
  *)
    bad "unknown command '$cmd'"
    ;;
esac
