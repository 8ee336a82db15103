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
#
# A new bed counts at once. A node whose state dir this start creates, on a
# port no node of any bed has served since the machine booted (the port
# ledger, REDLOCK_TESTBED_LEDGER, default /dev/shm/redlock-testbed-ports.UID),
# gets a clean-start marker once it answers with no key at all: clients
# then skip its restart quarantine (docs/design.md §5, "A clean start").
# Every other start — a restart, `up` after `down`, a wiped node, a port
# served before — is quarantined as usual.
#   REDLOCK_TESTBED_BASE_PORT  node N listens on BASE + N (default 7000)
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

NODES=(1 2 3 4 5)
BASE_PORT=${REDLOCK_TESTBED_BASE_PORT:-7000}
if ! [[ $BASE_PORT =~ ^[1-9][0-9]{3,4}$ ]] || ((BASE_PORT < 1024 || BASE_PORT > 65530)); then
  die "REDLOCK_TESTBED_BASE_PORT: '$BASE_PORT' is not a port from 1024 to 65530"
fi
STATE_DIR=${REDLOCK_TESTBED_DIR:-${TMPDIR:-/tmp}/redlock-testbed}
LEDGER=${REDLOCK_TESTBED_LEDGER:-/dev/shm/redlock-testbed-ports.$(id -u)}

# ---- persistence flags (one line each; keep them on one line) ----------------
# tests/compose/test_compose.cpp reads PERSISTENCE_ALWAYS from this file and
# checks that every node in docker-compose.yml states exactly these settings,
# so the two beds cannot drift apart. Words only: no $, no expansions.
PERSISTENCE_ALWAYS=(--appendonly yes --appendfsync always --save "")
PERSISTENCE_NONE=(--appendonly no --save "")
# ---- end of persistence flags -------------------------------------------------

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

port_of() { echo $((BASE_PORT + $1)); }
node_dir() { echo "$STATE_DIR/node$1"; }
pidfile_of() { echo "$(node_dir "$1")/redis.pid"; }

# is_our_redis PID PORT: PID is alive (not a zombie) and is a redis-server
# serving PORT.
is_our_redis() {
  local pid=$1 port=$2 cmd
  pid_alive "$pid" || return 1
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

persistence_of() {
  local f
  f="$(node_dir "$1")/persistence"
  if [[ -f $f ]]; then cat "$f"; else echo none; fi
}

# node_args N MODE: sets NODE_ARGS to redis-server's arguments for node N
# with persistence MODE (always|none); all of them, for `config N`.
node_args() {
  local n=$1 mode=$2 dir
  dir=$(node_dir "$n")
  NODE_ARGS=(--port "$(port_of "$n")" --bind 127.0.0.1 --protected-mode no
             --dir "$dir/data" --logfile "$dir/redis.log"
             --pidfile "$(pidfile_of "$n")")
  if [[ $mode == always ]]; then
    NODE_ARGS+=("${PERSISTENCE_ALWAYS[@]}")
  else
    NODE_ARGS+=("${PERSISTENCE_NONE[@]}")
  fi
}

# start_node N PERSISTENCE(optional: empty = remembered)
start_node() {
  local n=$1 want=${2:-} port dir pid mode
  port=$(port_of "$n")
  dir=$(node_dir "$n")
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
  # First start of this node, on a port no bed has served since boot: no
  # client can hold a lock this master should know of (see clean_start).
  local first=no
  if [[ ! -e $dir && ! -e $LEDGER/$port ]]; then first=yes; fi
  mkdir -p "$dir/data"
  if ! { mkdir -p "$LEDGER" && : >"$LEDGER/$port"; } 2>/dev/null; then
    first=no  # the next start could not see this one
    note "node $n: cannot record port $port in $LEDGER: not marked as a clean start"
  fi
  if [[ -n $want ]]; then echo "$want" >"$dir/persistence"; fi
  mode=$(persistence_of "$n")
  node_args "$n" "$mode"
  if [[ $mode == none ]]; then
    # No persistence means every start is empty: files left by an earlier
    # `always` run (appendonlydir/) or a manual SAVE (dump.rdb) would
    # otherwise be loaded now or by a later `always` start.
    if [[ -n $(find "$dir/data" -mindepth 1 -print -quit) ]]; then
      find "$dir/data" -mindepth 1 -delete
      note "node $n: persistence none: removed leftover data files"
    fi
  fi
  printf '%s\n' "${NODE_ARGS[@]}" >"$dir/started-with"
  rm -f "$(pidfile_of "$n")"
  # Detached: the node outlives this script, in a session of its own.
  if ! start_master --detach "$port" "$dir" "${NODE_ARGS[@]}"; then
    note "node $n: not started"
    return 1
  fi
  local counts=
  if [[ $first == yes ]]; then
    if clean_start "$port" "$MASTER_PID"; then
      counts=", a clean start: counts at once"
    else
      note "node $n: not marked as a clean start (it answered with keys, or not as pid $MASTER_PID)"
    fi
  fi
  note "node $n: up on 127.0.0.1:$port (pid $MASTER_PID, persistence $mode$counts)"
}

# The clean-start marker (docs/design.md §5, "A clean start"; the format is
# the marker script's, src/scripts.hpp): redlock-marker = "EPOCH 0 0" — a
# fresh epoch, no declared quarantine, BORN_MS 0 — and its server key = the
# run id of this master, both only if it holds no key at all (no client has
# reached it: a client's first contact writes a marker). A restart gets
# another run id, a loss takes both keys: neither is then clean.
readonly CLEAN_START_SCRIPT="if redis.call('DBSIZE') ~= 0 then return redis.error_reply('not empty') end
redis.call('SET', KEYS[1], ARGV[1] .. ' 0 0')
redis.call('SET', KEYS[2], ARGV[2])
return 'OK'"

# clean_start PORT PID: writes the clean-start marker on the master on
# 127.0.0.1:PORT if it is process PID and empty; false otherwise.
clean_start() {
  local port=$1 pid=$2 info run_id epoch reply
  info=$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" info server </dev/null 2>/dev/null) || return 1
  info=${info//$'\r'/}
  [[ $'\n'$info$'\n' == *$'\n'"process_id:$pid"$'\n'* ]] || return 1
  run_id=$(sed -n 's/^run_id:\([0-9a-f]\{40\}\)$/\1/p' <<<"$info")
  [[ -n $run_id ]] || return 1
  epoch=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
  reply=$(timeout 2 redis-cli -h 127.0.0.1 -p "$port" eval "$CLEAN_START_SCRIPT" 2 \
            redlock-marker '{redlock-marker}:server' "$epoch" "$run_id" </dev/null 2>&1) || return 1
  [[ $reply == OK ]]
}

# stop_node N SIGNAL: TERM = graceful (SIGKILL after 5 s), KILL = at once.
stop_node() {
  local n=$1 sig=$2 pid
  pid=$(node_pid "$n")
  if [[ -z $pid ]]; then
    note "node $n: not running"
    return 0
  fi
  if [[ $sig == TERM ]]; then
    stop_pid "$pid" || die "node $n: pid $pid did not exit"
    note "node $n: stopped (pid $pid)"
  else
    kill -KILL "$pid" 2>/dev/null || true
    wait_state "$pid" gone || die "node $n: pid $pid did not exit after SIGKILL"
    note "node $n: killed (pid $pid)"
  fi
  rm -f "$(pidfile_of "$n")"
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
  if [[ $sig == STOP ]]; then
    pause_pid "$pid" || die "node $n: pid $pid did not stop"
    note "node $n: paused (pid $pid)"
  else
    resume_pid "$pid" || die "node $n: pid $pid did not continue"
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
  local key='' arg k
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

parse_persistence() {
  [[ $1 == none || $1 == always ]] || bad "bad --persistence value '$1' (expected none or always)"
}

# parse_options COMMAND WIPE_ALLOWED(yes|no) ARG...: the options of up and
# restart; sets persistence (empty: the remembered one) and wipe.
parse_options() {
  local cmd=$1 wipe_allowed=$2
  shift 2
  persistence=
  wipe=no
  while (($#)); do
    case $1 in
      --wipe)
        [[ $wipe_allowed == yes ]] || bad "unexpected argument '$1' for $cmd"
        wipe=yes; shift ;;
      --persistence)
        need_value $# "$1" "a value (none or always)"
        parse_persistence "$2"; persistence=$2; shift 2 ;;
      --persistence=*)
        parse_persistence "${1#*=}"; persistence=${1#*=}; shift ;;
      *) bad "unexpected argument '$1' for $cmd" ;;
    esac
  done
  need_redis
  mkdir -p "$STATE_DIR"
}

# ---- main ----------------------------------------------------------------------

(($# >= 1)) || bad "missing command"
cmd=$1
shift

case $cmd in
  up)
    parse_options up no "$@"
    failed=0
    for n in "${NODES[@]}"; do
      start_node "$n" "$persistence" || failed=1
    done
    exit "$failed"
    ;;
  down)
    no_more_args down "$@"
    for n in "${NODES[@]}"; do
      stop_node "$n" TERM
    done
    ;;
  status)
    no_more_args status "$@"
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
    no_more_args urls "$@"
    out=
    for n in "${NODES[@]}"; do
      out+="${out:+,}redis://127.0.0.1:$(port_of "$n")"
    done
    printf '%s\n' "$out"
    ;;
  kill | pause | resume)
    need_node "$cmd" "$@"
    no_more_args "$cmd" "${@:2}"
    case $cmd in
      kill) stop_node "$1" KILL ;;
      pause) signal_node "$1" STOP ;;
      resume) signal_node "$1" CONT ;;
    esac
    ;;
  restart)
    need_node restart "$@"
    n=$1
    parse_options restart yes "${@:2}"
    stop_node "$n" TERM
    if [[ $wipe == yes ]]; then wipe_node "$n"; fi
    start_node "$n" "$persistence"
    ;;
  config)
    need_node config "$@"
    no_more_args config "${@:2}"
    config_node "$1"
    ;;
  -h | --help | help)
    usage
    ;;
  *)
    bad "unknown command '$cmd'"
    ;;
esac
