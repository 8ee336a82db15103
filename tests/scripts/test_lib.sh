#!/usr/bin/env bash
# test_lib.sh — scripts/lib.sh exercised for real: messages and usage
# errors, waiting with a deadline, process states, installing missing
# packages (against stubs of dpkg-query, id, apt-get and sudo), free ports, and
# redis-server masters started on free loopback ports in a temp dir, paused,
# resumed and stopped by pid. Every process it starts is stopped on exit,
# also when a check fails. Needs redis-server and redis-cli.
# Exit 0 when every check passed, 1 otherwise (each failure is named).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"
lib=$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh

need_redis
with_scratch redlock-test-lib
tmp=$SCRATCH

# shellcheck source-path=SCRIPTDIR source=checks.sh
source "$(dirname "${BASH_SOURCE[0]}")/checks.sh"
not() { ! "$@"; }
matches() { [[ $1 =~ $2 ]]; }  # matches TEXT REGEX
# run COMMAND...: sets rc, out and err of COMMAND, run in a subshell (so an
# exit is its status).
run() {
  rc=0
  ( "$@" ) >"$tmp/out" 2>"$tmp/err" || rc=$?
  out=$(<"$tmp/out")
  err=$(<"$tmp/err")
}
has() { [[ $1 == *"$2"* ]]; }  # has TEXT PART
# redis_procs_on PORT: how many live redis-server processes serve PORT.
redis_procs_on() {
  local f n=0 argv=()
  for f in /proc/[0-9]*/cmdline; do
    mapfile -d '' argv 2>/dev/null <"$f" || continue
    [[ ${argv[*]:-} == redis-server*:"$1"* ]] && n=$((n + 1))
  done
  printf '%s' "$n"
}
# try_start ARG...: start_master ARG... in this shell (so whatever it starts
# is stopped on exit, even by mistake); sets rc and err.
try_start() {
  rc=0
  start_master "$@" 2>"$tmp/err" || rc=$?
  err=$(<"$tmp/err")
  if [[ -n $MASTER_PID ]]; then SCRATCH_PIDS+=("$MASTER_PID"); fi
}
# check_misuse FUNCTION EXPECTED CASE...: FUNCTION given each CASE (a word
# list) is an argument error: exit 2, saying "FUNCTION: expected EXPECTED".
check_misuse() {
  local fn=$1 expected=$2 args
  shift 2
  for args in "$@"; do
    # shellcheck disable=SC2086  # each case is a word list on purpose
    run "$fn" $args
    check "$fn '$args': argument error, exit 2" [ "$rc" = 2 ]
    check "$fn '$args' says what it expects" has "$err" "$fn: expected $expected"
  done
}
# check_took WHAT T0 MIN_MS MAX_MS: what ran since T0 (now_us) took
# MIN_MS or more and less than MAX_MS.
check_took() {
  local ms=$((($(now_us) - $2) / 1000))
  check "$1: $ms ms >= $3 ms" [ "$ms" -ge "$3" ]
  check "$1: $ms ms < $4 ms" [ "$ms" -lt "$4" ]
}
config_get() {  # config_get PORT KEY: the value of KEY
  redis-cli -h 127.0.0.1 -p "$1" --raw config get "$2" </dev/null | sed -n 2p
}

# ---- sourcing, messages, usage errors --------------------------------------------

run bash "$lib"
check "running lib.sh instead of sourcing it exits 2" [ "$rc" = 2 ]
check "... and says to source it" has "$err" "source this file"

check "me is the sourcing script's name" [ "$me" = test_lib.sh ]
run say hello
check "say: NAME: MESSAGE on stdout" [ "$out" = "test_lib.sh: hello" ]
run log hello there
check "log: NAME: MESSAGE on stderr only" [ "$err" = "test_lib.sh: hello there" ] && check "log: nothing on stdout" [ -z "$out" ]
run note hello
check "note: MESSAGE on stderr, no name" [ "$err" = hello ]
run die "it broke"
check "die exits 1" [ "$rc" = 1 ]
check "die names the script and the reason" [ "$err" = "test_lib.sh: it broke" ]
run bad "wrong thing"
check "bad exits 2" [ "$rc" = 2 ]
check "bad: the message first" [ "${err%%$'\n'*}" = "test_lib.sh: wrong thing" ]
check "bad: then the usage, the script's header comment" has "$err" $'\ntest_lib.sh — scripts/lib.sh exercised for real'
check "usage stops at the first line that is not a comment" not has "$err" "set -euo"

run need_value 1 --workers
check "need_value without a value: exit 2" [ "$rc" = 2 ]
check "need_value names the option" has "$err" "--workers needs a value"
run need_value 1 --out "a directory"
check "need_value says what is missing" has "$err" "--out needs a directory"
run need_value 2 --workers
check "need_value with a value passes" [ "$rc" = 0 ]

run need_node kill
check "need_node without a number: exit 2" [ "$rc" = 2 ] && check "... naming the command" has "$err" "kill needs a node number (1..5)"
for arg in 0 6 x1 12 -1 ""; do
  run need_node pause "$arg"
  check "need_node '$arg': exit 2" [ "$rc" = 2 ]
  check "need_node '$arg' names it" has "$err" "bad node number '$arg' (expected 1..5)"
done
run need_node restart 5 --wipe
check "need_node 5 passes (later arguments are not its business)" [ "$rc" = 0 ]
run no_more_args status extra
check "no_more_args: exit 2 naming the argument" [ "$rc" = 2 ] && check "... and the command" has "$err" "unexpected argument 'extra' for status"
run no_more_args status
check "no_more_args with none left passes" [ "$rc" = 0 ]

# on_exit: the cleanup runs on exit and on SIGTERM, which exits 143.
cat >"$tmp/trapped.sh" <<EOF
source '$lib'
cleanup() { echo "cleaned \$?" >>'$tmp/cleaned'; }
on_exit cleanup
if [[ \${1:-} == term ]]; then kill -TERM \$\$; fi
exit 0
EOF
run bash "$tmp/trapped.sh"
check "on_exit: the cleanup runs on a normal exit" [ "$(<"$tmp/cleaned")" = "cleaned 0" ]
rm -f "$tmp/cleaned"
run bash "$tmp/trapped.sh" term
check "on_exit: SIGTERM exits 143" [ "$rc" = 143 ]
check "... saying so" [ "$err" = "trapped.sh: terminated" ]
check "... through the cleanup" [ "$(<"$tmp/cleaned")" = "cleaned 143" ]

# ---- time and waiting ----------------------------------------------------------------

check "seconds_to_us 10" [ "$(seconds_to_us 10)" = 10000000 ]
check "seconds_to_us 0.05" [ "$(seconds_to_us 0.05)" = 50000 ]
check "seconds_to_us 1.5" [ "$(seconds_to_us 1.5)" = 1500000 ]
check "seconds_to_us 0.0000009 (below 1 µs)" [ "$(seconds_to_us 0.0000009)" = 0 ]
check "seconds_to_us 08 (not octal)" [ "$(seconds_to_us 08)" = 8000000 ]
check "now_us is whole µs" matches "$(now_us)" '^[0-9]{16}$'

check "wait_until: true at once when the command succeeds" wait_until 0 true
attempts=0
third_time() { attempts=$((attempts + 1)); ((attempts >= 3)); }
check "wait_until polls until the command succeeds" wait_until 5 third_time
check "... running it exactly until then" [ "$attempts" = 3 ]
t0=$(now_us)
wait_until -i 0.05 0.3 false && r=0 || r=$?
check_took "wait_until false 0.3 s: at the deadline" "$t0" 300 1500
check "wait_until false at the deadline" [ "$r" = 1 ]
check_misuse wait_until "[-i INTERVAL] SECONDS COMMAND" "" "1" "x true" "-i" "-i x 1 true" "-1 true"

# ---- processes ----------------------------------------------------------------------------

check "proc_state of this shell is a state letter" matches "$(proc_state $$)" '^[RS]$'
check "proc_state of no pid is empty" [ -z "$(proc_state 99999999)" ]
check "proc_state of a bad pid is empty" [ -z "$(proc_state '1/../self')" ]
check "pid_alive of this shell" pid_alive $$

sleep 30 &
sleeper=$!
SCRATCH_PIDS+=("$sleeper")
check "pause_pid: stopped" pause_pid "$sleeper"
check "... state T" [ "$(proc_state "$sleeper")" = T ]
check "resume_pid: running" resume_pid "$sleeper"
# Running again: asleep in its sleep (S), or still runnable (R) just after
# the SIGCONT on a busy machine — anything but stopped.
check "... state S or R" matches "$(proc_state "$sleeper")" '^[RS]$'
check "stop_pid ends a child" stop_pid "$sleeper"
check "... and reaps it (no zombie left)" [ -z "$(proc_state "$sleeper")" ]
check "stop_pid of a pid that is gone is done" stop_pid "$sleeper"
check "stop_pid of no pid is done" stop_pid ""
run wait_state "$sleeper" stopped
check "wait_state stopped: false at once for a pid that is gone" [ "$rc" = 1 ]
check "wait_state gone: true for a pid that is gone" wait_state "$sleeper" gone

# A process that ignores SIGTERM (the ignored disposition survives exec).
(trap '' TERM; exec sleep 30) &
stubborn=$!
SCRATCH_PIDS+=("$stubborn")
wait_until 2 [ "$(tr '\0' ' ' </proc/"$stubborn"/cmdline)" = "sleep 30 " ] || true
t0=$(now_us)
rc=0
stop_pid "$stubborn" 0.3 2>"$tmp/err" || rc=$?  # here: only this shell can reap it
err=$(<"$tmp/err")
check_took "stop_pid PID 0.3: SIGKILL after the grace time" "$t0" 300 3000
check "stop_pid escalates to SIGKILL" [ "$rc" = 0 ]
check "... saying so" has "$err" "pid $stubborn still alive 0.3 s after SIGTERM: sending SIGKILL"
check "... and the process is gone (reaped)" [ -z "$(proc_state "$stubborn")" ]

check_misuse stop_pid "PID [SECONDS]" "abc" "12 x" "0"
check_misuse wait_state "PID stopped|running|gone" "" "abc gone" "1 asleep" "1 gone x"

# ---- prerequisites ----------------------------------------------------------------------

# install_packages against stubs of dpkg-query (STUB_INSTALLED lists what
# is installed), id (-u prints STUB_UID), apt-get (logs its arguments, exits
# STUB_APT_RC) and sudo (logs "sudo ", runs the rest).
stubs=$tmp/pkg/stubs
mkdir -p "$stubs" "$tmp/pkg/sudo"
cat >"$stubs/dpkg-query" <<'EOF'
#!/bin/sh
for p; do :; done
case " $STUB_INSTALLED " in *" $p "*) printf 'install ok installed' ;; *) exit 1 ;; esac
EOF
cat >"$stubs/id" <<'EOF'
#!/bin/sh
echo "$STUB_UID"
EOF
cat >"$stubs/apt-get" <<'EOF'
#!/bin/sh
echo "apt-get $*" >>"$STUB_LOG"
exit "${STUB_APT_RC:-0}"
EOF
cat >"$tmp/pkg/sudo/sudo" <<'EOF'
#!/bin/sh
printf 'sudo ' >>"$STUB_LOG"
exec "$@"
EOF
chmod +x "$stubs/"* "$tmp/pkg/sudo/sudo"
export STUB_LOG=$tmp/pkg/log STUB_INSTALLED="pkg-a pkg-b"
: >"$STUB_LOG"
PATH=$stubs:$PATH STUB_UID=0 run install_packages pkg-a pkg-b
check "install_packages, all installed: true" [ "$rc" = 0 ]
check "... without apt-get" [ ! -s "$STUB_LOG" ]
check "... and without a word" [ -z "$err$out" ]
PATH=$stubs:$PATH STUB_UID=0 run install_packages pkg-a pkg-c pkg-b pkg-d
check "install_packages as root: true" [ "$rc" = 0 ]
check "... apt-get update, then install of the missing ones only" \
  [ "$(<"$STUB_LOG")" = $'apt-get update\napt-get install -y pkg-c pkg-d' ]
check "... saying which" has "$err" "installing missing packages: pkg-c pkg-d"
: >"$STUB_LOG"
PATH=$tmp/pkg/sudo:$stubs:$PATH STUB_UID=1000 run install_packages pkg-c
check "install_packages, not root: through sudo" [ "$rc" = 0 ]
check "... sudo apt-get update, sudo apt-get install" \
  [ "$(<"$STUB_LOG")" = $'sudo apt-get update\nsudo apt-get install -y pkg-c' ]
: >"$STUB_LOG"
PATH=$stubs STUB_UID=1000 run install_packages pkg-a pkg-c
check "install_packages, not root and no sudo: false" [ "$rc" = 1 ]
check "... saying what to install by hand" has "$err" "not root and sudo is not available: install pkg-c by hand"
check "... without apt-get" [ ! -s "$STUB_LOG" ]
PATH=$stubs:$PATH STUB_UID=0 STUB_APT_RC=100 run install_packages pkg-c
check "install_packages, apt-get fails: false" [ "$rc" = 1 ]
check "... saying so" has "$err" "could not install pkg-c (apt-get failed)"
check_misuse install_packages "PACKAGE..." ""

# ---- ports and masters ----------------------------------------------------------------------

port=$(free_port)
check "free_port: a port in 20000..32767 ($port)" [ "$port" -ge 20000 ] && check "... below the ephemeral range" [ "$port" -lt 32768 ]
check "free_port: nobody listens on it" not port_busy "$port"

try_start "$port" "$tmp/a"
check "start_master on the free port" [ "$rc" = 0 ]
a=$MASTER_PID
check "MASTER_PORT is that port" [ "$MASTER_PORT" = "$port" ]
check "MASTER_PID is a live process" pid_alive "$a"
check "... that is redis-server on that port" has "$(tr '\0' ' ' </proc/"$a"/cmdline)" "redis-server 127.0.0.1:$port"
check "it is this shell's child" [ "$(ps -o ppid= -p "$a" | tr -d ' ')" = $$ ]
check "port_busy sees it" port_busy "$port"
check "master_is PORT PID" master_is "$port" "$a"
check "master_is is false for another pid" not master_is "$port" $$
check "it answers PING" [ "$(redis-cli -h 127.0.0.1 -p "$port" ping </dev/null)" = PONG ]
check "it listens on loopback only" [ "$(config_get "$port" bind)" = 127.0.0.1 ]
check "no AOF" [ "$(config_get "$port" appendonly)" = no ]
check "no RDB snapshots" [ -z "$(config_get "$port" save)" ]
check "its data dir is DIR" [ "$(config_get "$port" dir)" = "$tmp/a" ]
check "its log is DIR/redis.log" grep -q "Ready to accept connections" "$tmp/a/redis.log"

check "pause_pid pauses the master" pause_pid "$a"
check "a paused master does not answer" not master_is "$port" "$a"
check "resume_pid resumes it" resume_pid "$a"
check "it answers again" wait_until 5 master_is "$port" "$a"

# The port is taken: start_master PORT fails fast, says why, leaves nothing.
t0=$(now_us)
try_start "$port" "$tmp/b"
check_took "start_master on a taken port: fails fast" "$t0" 0 5000
check "start_master on a taken port fails" [ "$rc" = 1 ]
check "... naming the address" has "$err" "redis-server on 127.0.0.1:$port exited while starting"
check "... with the log's reason" has "$err" "Address already in use"
check "... and no process of its own left" [ "$(redis_procs_on "$port")" = 1 ]
check "the first master still answers" master_is "$port" "$a"

# A bad argument: redis-server refuses it, start_master says so at once.
try_start any "$tmp/c" --no-such-directive 1
check "start_master with an argument redis-server refuses fails" [ "$rc" = 1 ]
check "... showing redis-server's complaint" has "$err" "no-such-directive"

try_start any "$tmp/d" --appendonly yes
check "start_master any" [ "$rc" = 0 ]
d=$MASTER_PID
check "... on another port" [ "$MASTER_PORT" != "$port" ]
check "REDIS_ARG override the defaults (--appendonly yes)" [ "$(config_get "$MASTER_PORT" appendonly)" = yes ]
check "stop_pid stops a master" stop_pid "$d"
check "... it is gone" [ -z "$(proc_state "$d")" ]

try_start --detach any "$tmp/e"
check "start_master --detach any" [ "$rc" = 0 ]
e=$MASTER_PID
e_port=$MASTER_PORT
stat=()
read -r -a stat 2>/dev/null <"/proc/$e/stat" || true
check "a detached master leads a session of its own" [ "${stat[5]:-}" = "$e" ]
check "... and answers as that pid" master_is "$e_port" "$e"
check "stop_pid stops it" stop_pid "$e"
check "... its port is free again" wait_until 5 not port_busy "$e_port"

check "stop_pid stops a paused master" pause_pid "$a"
check "... (paused first)" [ "$(proc_state "$a")" = T ]
check "... and it is gone" stop_pid "$a"
check "... without SIGKILL (it shut down cleanly)" grep -q "Redis is now ready to exit" "$tmp/a/redis.log"
check "... its port is free again" wait_until 5 not port_busy "$port"

# A redis-server that never answers: stopped at the deadline, by its pid.
mkdir -p "$tmp/fakebin"
printf '#!/bin/sh\nexec sleep 30\n' >"$tmp/fakebin/redis-server"
chmod +x "$tmp/fakebin/redis-server"
t0=$(now_us)
PATH=$tmp/fakebin:$PATH MASTER_START_SECONDS=1 try_start any "$tmp/f"
check_took "start_master, a server that never answers: fails at the deadline" "$t0" 1000 4000
check "start_master fails for a server that never answers" [ "$rc" = 1 ]
check "... saying so" matches "$err" 'redis-server on 127\.0\.0\.1:[0-9]+ did not answer as pid [0-9]+ within 1 s'
[[ $err =~ as\ pid\ ([0-9]+) ]] && silent=${BASH_REMATCH[1]} || silent=
check "... and the process is stopped" [ -n "$silent" ] && check "... gone" [ -z "$(proc_state "$silent")" ]
check "MASTER_PID is empty after a failed start" [ -z "$MASTER_PID" ]

check_misuse start_master "[--detach] PORT|any DIR" "" "x dir" "1234" "any" "--detach" "0 dir"

# make_test_certs: a CA, and server and client certificates it signed.
check "make_test_certs makes the certificates" make_test_certs "$tmp/tls"
check "... the server certificate verifies against the CA for 127.0.0.1" \
  openssl verify -CAfile "$tmp/tls/ca.crt" -verify_ip 127.0.0.1 "$tmp/tls/server.crt"
check "... and for localhost" openssl verify -CAfile "$tmp/tls/ca.crt" -verify_hostname localhost "$tmp/tls/client.crt"
check "... each key matches its certificate" \
  [ "$(openssl pkey -in "$tmp/tls/server.key" -pubout)" = "$(openssl x509 -in "$tmp/tls/server.crt" -noout -pubkey)" ]
check_misuse make_test_certs "DIR" ""

checks_done
