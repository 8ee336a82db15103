#!/usr/bin/env bash
# lib.sh — what the scripts share; sourced, never run:
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#
# messages with the script's name (say, log, note, die), usage errors (bad,
# need_value, need_node, no_more_args; usage prints the script's header
# comment unless the script defines its own after sourcing), polling with a
# deadline (wait_until, wait_state), missing Debian packages installed
# (install_packages), free loopback ports, and redis-server masters started,
# checked, paused, resumed and stopped by pid.
#
# Sourcing runs no program (it only defines functions and sets `me`, the
# script's name), so a script may source it before it knows its PATH is
# usable (compose-faults.sh runs with an empty PATH in a test). A function
# called with bad arguments says so, naming itself, and returns 2.
# Processes are signalled by pid only, never by name; masters listen on
# 127.0.0.1 only.

if ! (return 0 2>/dev/null); then
  printf '%s: source this file, do not run it\n' "${0##*/}" >&2
  exit 2
fi

me=${0##*/}
# The sourcing script's path, absolute: usage reads its header after a cd.
script_path=$0
[[ $script_path == /* ]] || script_path=$PWD/$script_path

# Set by start_master for its caller (empty after a failed start).
MASTER_PID=
MASTER_PORT=

# ---- messages and usage errors --------------------------------------------------

say() { printf '%s: %s\n' "$me" "$*"; }   # to stdout
log() { say "$@" >&2; }
note() { printf '%s\n' "$*" >&2; }        # to stderr, without the name
die() {
  log "$@"
  exit 1
}
bad() {  # bad MESSAGE: a usage error: the message, the usage, exit 2
  log "$@"
  usage
  exit 2
}

# usage: the script's header comment (line 2 to the first line that is not
# a comment) without its '# ', on stderr.
usage() {
  local line
  {
    IFS= read -r line  # the #! line
    while IFS= read -r line && [[ $line == '#'* ]]; do
      line=${line#\#}
      printf '%s\n' "${line# }"
    done
  } <"$script_path" >&2
}

# need_value COUNT OPTION [WHAT]: a usage error unless OPTION has a value
# after it; COUNT is the caller's $# (OPTION included). WHAT defaults to
# "a value".
need_value() {
  (($1 >= 2)) || bad "$2 needs ${3:-a value}"
}

# need_node COMMAND [ARG...]: a usage error unless the first ARG is a bed
# node number, 1..5.
need_node() {
  (($# >= 2)) || bad "$1 needs a node number (1..5)"
  [[ $2 =~ ^[1-5]$ ]] || bad "bad node number '$2' (expected 1..5)"
}

# no_more_args COMMAND [ARG...]: a usage error if any ARG is left.
no_more_args() {
  (($# == 1)) || bad "unexpected argument '$2' for $1"
}

# on_exit FUNCTION: runs FUNCTION when the script exits; SIGINT and SIGTERM
# exit (130, 143) through it.
on_exit() {
  # shellcheck disable=SC2064  # FUNCTION's name is meant to be expanded now
  trap "$1" EXIT
  trap 'log "interrupted"; exit 130' INT
  trap 'log "terminated"; exit 143' TERM
}

# with_scratch NAME: SCRATCH is a new directory under $TMPDIR (or /tmp)
# named after NAME; on exit every pid appended to SCRATCH_PIDS is stopped
# (by pid) and the directory removed, and the exit status is kept.
SCRATCH=
SCRATCH_PIDS=()
scratch_cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${SCRATCH_PIDS[@]}"; do
    stop_pid "$pid" 2 2>/dev/null || true
  done
  if [[ -n $SCRATCH ]]; then rm -rf -- "$SCRATCH"; fi
  exit "$rc"
}
with_scratch() {
  SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  on_exit scratch_cleanup
}

# ---- prerequisites ----------------------------------------------------------------

# install_packages PACKAGE...: installs, with apt-get (through sudo when not
# root), the Debian packages among PACKAGE that are not installed; nothing
# when all are. On failure it says what could not be installed and returns
# 1 (not root and no sudo; apt-get failed).
install_packages() {
  local p status missing=() sudo=()
  if (($# == 0)); then
    log "install_packages: expected PACKAGE..., got '$*'"
    return 2
  fi
  for p in "$@"; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    [[ $status == "install ok installed" ]] || missing+=("$p")
  done
  ((${#missing[@]} > 0)) || return 0
  log "installing missing packages: ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    if ! command -v sudo >/dev/null 2>&1; then
      log "not root and sudo is not available: install ${missing[*]} by hand"
      return 1
    fi
    sudo=(sudo)
  fi
  if ! "${sudo[@]}" apt-get update </dev/null >&2 ||
    ! "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" </dev/null >&2; then
    log "could not install ${missing[*]} (apt-get failed)"
    return 1
  fi
}

need_redis() {
  command -v redis-server >/dev/null 2>&1 || die "redis-server not found (scripts/bootstrap.sh installs it)"
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli not found (package redis-tools)"
}

# ---- time and waiting ----------------------------------------------------------------

now_us() {  # the wall clock in unix µs
  local t=$EPOCHREALTIME
  printf '%s' "${t/[.,]/}"
}

is_seconds() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

seconds_to_us() {  # seconds_to_us SECONDS (whole or decimal)
  local whole=${1%%.*} frac=000000
  [[ $1 == *.* ]] && frac=${1#*.}000000
  printf '%d' $((10#$whole * 1000000 + 10#${frac:0:6}))
}

# wait_until [-i INTERVAL] SECONDS COMMAND [ARG...]: runs COMMAND every
# INTERVAL seconds (default 0.05) until it succeeds (true) or SECONDS have
# passed (false). COMMAND runs at least once, and once more at the deadline.
wait_until() {
  local interval=0.05 deadline
  if [[ ${1:-} == -i ]]; then
    interval=${2:-}
    shift 2 || shift
  fi
  if (($# < 2)) || ! is_seconds "$1" || ! is_seconds "$interval"; then
    log "wait_until: expected [-i INTERVAL] SECONDS COMMAND [ARG...], got '$*'"
    return 2
  fi
  deadline=$(($(now_us) + $(seconds_to_us "$1")))
  shift
  until "$@"; do
    (($(now_us) < deadline)) || { "$@"; return; }
    sleep "$interval"
  done
}

# ---- processes --------------------------------------------------------------------------

# proc_state PID: the state letter of /proc/PID/stat (R, S, T, Z...);
# nothing when there is no such process.
proc_state() {
  local stat
  [[ $1 =~ ^[1-9][0-9]*$ ]] || return 0
  IFS= read -r stat 2>/dev/null <"/proc/$1/stat" || return 0
  stat=${stat##*) }  # after the command name, which may hold spaces
  printf '%s' "${stat%% *}"
}

pid_alive() {  # pid_alive PID: it exists and is not a zombie
  local s
  s=$(proc_state "$1")
  [[ -n $s && $s != Z && $s != X ]]
}

state_reached() {  # state_reached PID stopped|running|gone (gone also ends the wait)
  local s
  s=$(proc_state "$1")
  [[ -z $s || $s == Z || $s == X ]] && return 0
  case $2 in
    stopped) [[ $s == T ]] ;;
    running) [[ $s != T ]] ;;
    *) return 1 ;;
  esac
}

# wait_state PID stopped|running|gone [SECONDS]: waits (default 5 s) until
# PID is stopped (a SIGSTOP landed), running (alive and not stopped) or gone
# (exited; a zombie counts as gone). False at the deadline, and as soon as
# PID is gone when it should be stopped or running.
wait_state() {
  local pid=${1:-} want=${2:-} seconds=${3:-5}
  if ! [[ $pid =~ ^[1-9][0-9]*$ && $want =~ ^(stopped|running|gone)$ ]] || ! is_seconds "$seconds"; then
    log "wait_state: expected PID stopped|running|gone [SECONDS], got '$*'"
    return 2
  fi
  wait_until "$seconds" state_reached "$pid" "$want" || return 1
  [[ $want == gone ]] || pid_alive "$pid"
}

pause_pid() { kill -STOP "$1" && wait_state "$1" stopped; }   # pause_pid PID
resume_pid() { kill -CONT "$1" && wait_state "$1" running; }  # resume_pid PID

# stop_pid PID [SECONDS]: SIGTERM (and SIGCONT, so a paused process acts on
# it), SIGKILL when PID is still alive after SECONDS (default 5); reaps PID
# if it is this shell's child. An empty PID or one already gone is done.
# False, with a message, only if PID outlived SIGKILL by SECONDS.
stop_pid() {
  local pid=${1:-} seconds=${2:-5}
  [[ -n $pid ]] || return 0
  if ! [[ $pid =~ ^[1-9][0-9]*$ ]] || ! is_seconds "$seconds"; then
    log "stop_pid: expected PID [SECONDS], got '$*'"
    return 2
  fi
  if pid_alive "$pid"; then
    # CONT first: one after TERM can discard the SIGSTOP with which an ASan
    # build's leak check at exit suspends the process's threads (a hang).
    kill -CONT "$pid" 2>/dev/null || true
    kill -TERM "$pid" 2>/dev/null || true
    if ! wait_state "$pid" gone "$seconds"; then
      log "pid $pid still alive $seconds s after SIGTERM: sending SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      if ! wait_state "$pid" gone "$seconds"; then
        log "pid $pid still alive $seconds s after SIGKILL"
        return 1
      fi
    fi
  fi
  wait "$pid" 2>/dev/null || true
}

# ---- ports and masters -------------------------------------------------------------------

port_busy() {  # port_busy PORT: something accepts TCP connections on 127.0.0.1:PORT
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# free_port: prints a port in 20000..32767 on which nothing accepts
# connections on 127.0.0.1 (so never the bed's 7001..7005). Below Linux's
# default ephemeral range (32768..60999), so an outgoing connection of any
# process cannot take it meanwhile; another caller still may, so
# start_master any then tries another.
free_port() {
  local try port
  for ((try = 0; try < 50; try++)); do
    port=$((20000 + (RANDOM * 32768 + RANDOM) % 12768))
    if ! port_busy "$port"; then
      printf '%s\n' "$port"
      return 0
    fi
  done
  log "free_port: 50 random ports in 20000..32767 were all in use"
  return 1
}

# master_is PORT PID: the redis-server answering on 127.0.0.1:PORT is process
# PID and has loaded its data (while it loads its AOF it answers LOADING).
master_is() {
  local info
  info=$(timeout 2 redis-cli -h 127.0.0.1 -p "$1" info </dev/null 2>/dev/null) || return 1
  info=${info//$'\r'/}
  [[ $'\n'$info$'\n' == *$'\n'"process_id:$2"$'\n'* && $info == *$'\n'loading:0$'\n'* ]]
}

MASTER_START_SECONDS=10

# start_master [--detach] PORT|any DIR [REDIS_ARG...]: starts redis-server on
# 127.0.0.1:PORT (any: a free port, another one should it be taken
# meanwhile) with data in DIR, its log and output appended to DIR/redis.log
# and no persistence; REDIS_ARG come last, so they override these. Waits
# (10 s at most) until the server on that port is this process and has
# loaded its data, then sets MASTER_PID and MASTER_PORT. The master is this
# shell's child (stop it with stop_pid); with --detach it runs in a session
# of its own and outlives the script (testbed.sh). On failure it says why,
# with the new lines of the log, leaves no process behind and returns 1.
start_master() {
  local detach=no want dir try rc
  MASTER_PID=
  MASTER_PORT=
  if [[ ${1:-} == --detach ]]; then
    detach=yes
    shift
  fi
  want=${1:-}
  dir=${2:-}
  if ! [[ $want == any || $want =~ ^[1-9][0-9]*$ ]] || [[ -z $dir ]]; then
    log "start_master: expected [--detach] PORT|any DIR [REDIS_ARG...], got '$*'"
    return 2
  fi
  shift 2
  mkdir -p "$dir" || return 1
  for ((try = 0; try < 5; try++)); do
    if [[ $want == any ]]; then
      start_master_on "$detach" "$(free_port)" "$dir" quiet-if-taken "$@" && return 0
    else
      start_master_on "$detach" "$want" "$dir" report "$@" && return 0
    fi
    rc=$?
    ((rc == 3)) || return 1
  done
  log "start_master: 5 free ports were taken before redis-server could listen on them"
  return 1
}

# start_master_on DETACH PORT DIR report|quiet-if-taken [REDIS_ARG...]: one
# attempt of start_master; 3 when the port was taken and the mode is
# quiet-if-taken.
# shellcheck disable=SC2034  # MASTER_PID, MASTER_PORT: read by the caller
start_master_on() {
  local detach=$1 port=$2 dir=$3 mode=$4 log=$3/redis.log offset=0 pid what
  shift 4
  [[ -n $port ]] || return 1
  [[ -f $log ]] && offset=$(stat -c %s "$log")
  local args=(--port "$port" --bind 127.0.0.1 --dir "$dir" --logfile "$log"
              --save "" --appendonly no "$@")
  # Without job control a background child is no process group leader, so
  # setsid(1) makes it a session leader in place: $! stays its pid.
  local -
  set +m
  if [[ $detach == yes ]]; then
    setsid redis-server "${args[@]}" </dev/null >>"$log" 2>&1 &
  else
    redis-server "${args[@]}" </dev/null >>"$log" 2>&1 &
  fi
  pid=$!
  if wait_until "$MASTER_START_SECONDS" master_started "$port" "$pid" && pid_alive "$pid"; then
    MASTER_PID=$pid
    MASTER_PORT=$port
    return 0
  fi
  if pid_alive "$pid"; then
    what="did not answer as pid $pid within $MASTER_START_SECONDS s"
    stop_pid "$pid" 1 || true
  else
    wait "$pid" 2>/dev/null || true
    if [[ $mode == quiet-if-taken ]] && tail -c +"$((offset + 1))" "$log" | grep -q 'Address already in use'; then
      return 3
    fi
    what="exited while starting"
  fi
  log "redis-server on 127.0.0.1:$port $what; the end of $log:"
  tail -c +"$((offset + 1))" "$log" | tail -n 20 | sed 's/^/  | /' >&2
  return 1
}

master_started() {  # master_started PORT PID: ready, or PID gone (the wait is over)
  master_is "$1" "$2" || ! pid_alive "$2"
}

# make_test_certs DIR: a throw-away CA and, signed by it, a server
# certificate for 127.0.0.1, 127.0.0.2 (the chaos bed's second client
# group) and localhost and a client certificate (P-256,
# valid 2 days), as DIR/{ca,server,client}.{crt,key}. For TLS test beds and
# benchmarks only. 1 (with openssl's output in DIR/openssl.log) on failure.
make_test_certs() {
  local dir=${1:-} who
  local -a new_key=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  if [[ -z $dir ]]; then
    log "make_test_certs: expected DIR"
    return 2
  fi
  mkdir -p "$dir" || return 1
  printf 'subjectAltName=IP:127.0.0.1,IP:127.0.0.2,DNS:localhost\n' >"$dir/san.ext"
  (
    cd "$dir" &&
      openssl req -x509 "${new_key[@]}" -keyout ca.key -out ca.crt -days 2 -subj /CN=redlock-test-ca &&
      for who in server client; do
        openssl req "${new_key[@]}" -keyout "$who.key" -out "$who.csr" -subj "/CN=$who" &&
          openssl x509 -req -in "$who.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
            -out "$who.crt" -extfile san.ext || exit 1
      done
  ) >>"$dir/openssl.log" 2>&1 || {
    log "make_test_certs: openssl failed (see $dir/openssl.log)"
    return 1
  }
}
