#!/usr/bin/env bash
# bench.sh — the benchmarks: redlock vs node-redlock vs the raw floor, on five
# redis-server masters of its own (docs/benchmarks.md, bench/CONTRACT.md).
#
#   scripts/bench.sh [--quick] [--rounds N] [--seconds S] [--locks N]
#                    [--concurrency C] [--leases N] [--hold S]
#                    [--failovers N] [--failover-ttl MS]
#                    [--scenarios LIST] [--no-build]
#
#   --quick         1 round, 1 s per run, 10000 locks for memory, 2000
#                   leases held 5 s, 3 failovers with a 500 ms TTL
#   --rounds N      rounds (default 5); every round runs every scenario, and
#                   inside a scenario the systems back to back (interleaved:
#                   redlock, node-redlock, floor), so drift of the machine
#                   hits all three alike
#   --seconds S     seconds per run (default 3)
#   --locks N       locks held in the memory scenario (default 100000)
#   --concurrency C workers of the throughput scenario (default 64)
#   --leases N      leases held in the leases scenarios (default 100000)
#   --hold S        seconds the leases are held (default 60; at least 1)
#   --failovers N   leaders killed per run of the failover scenario
#                   (default 5)
#   --failover-ttl MS  the candidates' lease TTL in the failover scenario
#                   (default 1000; 100..60000)
#   --scenarios L   comma-separated subset of: latency, throughput, handoff,
#                   memory, degraded-1-paused, degraded-2-paused,
#                   degraded-proxy-0ms, degraded-slow-2ms, latency-tls,
#                   latency-semaphore, latency-shared, handoff-semaphore,
#                   handoff-crowd-1, handoff-crowd-8, handoff-crowd-64,
#                   handoff-crowd-256, handoff-crowd-1-fair,
#                   handoff-crowd-8-fair, handoff-crowd-64-fair,
#                   handoff-crowd-256-fair, leases-100k,
#                   leases-100k-unbatched, leases-100k-spread,
#                   cli-crowd-32, failover, latency-primaries,
#                   latency-replicated, latency-wait, latency-cluster
#                   (default: all)
#   --no-build      skip scripts/bootstrap.sh (build/ must be up to date)
#
# The degraded scenarios are the latency scenario under a fault: one master
# (degraded-1-paused) or two (degraded-2-paused) SIGSTOPped for the whole run
# (stopped before the program starts, SIGCONT right after it ends), or one
# master reached through faultproxy with every request delayed 2 ms
# (degraded-slow-2ms: `SET * delay_up=2`). degraded-proxy-0ms is the same
# topology with no delay: the proxy process itself takes CPU on the shared
# cores, so the slow master's own cost is slow-2ms against proxy-0ms.
# latency-tls is the latency scenario over rediss:// to the same masters'
# TLS ports (certificates made by openssl for the run; the programs get
# --tls-ca), for redlock and the floor (its own rediss://: OpenSSL through
# memory BIOs, one SSL_write per loop turn, as the library's transport);
# node-redlock is not run there.
#
# latency-semaphore is the latency scenario on a semaphore of 3 permits
# (the program's --permits 3: each acquire takes a permit, each release
# gives it back). redlock only: the peers have no multi-master semaphore,
# the floor no permits; the report sets it against redlock's own mutex
# latency of the same run. latency-shared is the same with read locks (the
# program's --shared: read_acquire, read_release), redlock only as well.
# handoff-semaphore is the handoff scenario on a semaphore of 2 permits
# (--permits 2): the holder takes both, the waiter waits for one, the
# holder gives one back — the handoff between permits; against redlock's
# own mutex handoff of the same run.
#
# latency-primaries, latency-replicated and latency-wait: the latency
# scenario on five other masters, each a primary with one replica of its
# own (ten more redis-servers, started only for these three), redlock
# only. latency-primaries names them plainly; latency-replicated declares
# them `?replicated=1` (INFO replication behind each acquire); latency-wait
# `?wait_replicas=1&wait_timeout=25` (WAIT for the replica too). The
# ratios are what each check costs, on the same servers and replication
# traffic (docs/operations.md, "Replicated masters and failover").
#
# latency-cluster: the latency scenario on five other servers, each a
# one-node Redis Cluster (every slot its own) named as a cluster member
# (`redis+cluster://`), redlock only: the cost of routing by slot and of
# the slot marker read behind each acquire, against the five lone masters
# of `latency` in the same run (docs/operations.md, "Redis Cluster").
#
# handoff: a holder and a waiter on one resource; the sample is the holder's
# release returning → the waiter's acquire returning. The floor does the
# physical minimum: the waiter is SUBSCRIBEd (its own connection per master)
# before the holder releases, and on the first notification sends SET NX to
# all masters, decided at majority (bench/floor/floor.cpp).
#
# handoff-crowd-K: K waiters contend for ONE resource, spread over
# P = min(K, 4) processes of the system's program (`--scenario handoff-crowd
# --waiters K/P`, the first K mod P processes one more); whoever holds it
# keeps it 1–5 ms and waits again, for S seconds. The processes start
# together: each writes "ready PID" to a FIFO after its warm-up and waits for
# "go" on its stdin (its own FIFO); between the last "ready" and the "go"
# every master's INFO commandstats + cpu is saved, and again once every
# process has exited. bench_crowd_merge turns the processes' event files and
# the two snapshots into one result (handoff latency, commands and master CPU
# per handoff, fairness) and exits 3 on a SAFETY VIOLATION (two holders at
# once): the run then fails loudly. Raw files: build/bench-out/crowd/. The
# floor has no waiting acquire: reported as unsupported. With --quick the
# crowds run 1 s each like everything else.
#
# handoff-crowd-K-fair: the same crowd with every acquire in fair order
# (AcquireOptions::fair: a queue on every master, a release wakes the next
# waiter only; the program's --fair). redlock only, like latency-tls: the
# peers have no fair order and the floor no waiting acquire, so they are not
# run (no line). bench_crowd_merge's order measure (order_inversions: handoffs
# to a waiter that began waiting ≥ 1 ms after another still waiting) is ~0
# in fair order and shows the default mode's barging. Each adds one crowd run
# of redlock per round (S s + ~2 s of start-up, warm-up and merge).
#
# cli-crowd-32: the crowd of cron jobs: 32 shell loops on ONE resource,
# each starting `redlock run --wait 120 --no-quarantine RESOURCE -- true`
# twice, a fresh process every time (64 handoffs). Every master's INFO
# commandstats before and after: commands_per_handoff = all calls between
# (each process's handshake, subscription, attempts, release; the runner's
# one INFO per master taken out) / 64. What a process start costs the
# masters, which the library's own crowds (one process, many waiters) do
# not show. redlock only; no latency samples.
#
# leases-100k: one redlock_bench process takes --leases leases (TTL
# min(30 s, hold/2)) and holds them --hold seconds while the library's
# watchdogs extend them (`--scenario leases`); leases-100k-unbatched is the
# same with --extend-batch-max 1 (one extension call per lease per master);
# leases-100k-spread takes them at an even pace over one TTL (--spread), so
# their extensions fall due spread in time, as a service's do, instead of in
# the bunches one burst of acquires leaves (its hold starts once all are held).
# Its gate: "held PID" on a FIFO once all are held, "done PID" once the hold
# is over, each answered with "go" after every master's INFO commandstats +
# cpu was saved; the program reads the two snapshots itself and reports
# client CPU, commands, requests and master CPU per lease-second, the
# extensions' latency, bytes per lease and leases lost. A lost lease fails
# the run (exit 3) loudly. redlock only: the peers have no lease scenario.
# Raw files: build/bench-out/leases/.
#
# failover: leader election. redlock_bench --scenario failover starts a
# leader process (itself, --scenario failover-leader) that campaigns with
# TTL --failover-ttl and leads, and SIGKILLs it at a random moment while a
# standby (campaigning, waiting) and an observer of its own run; per kill:
# kill → standby elected, kill → observer told, against the floor = what
# the dead leader's lock still had to live at the kill (read on the masters
# once the leader is reaped). --failovers kills per run, each a few hundred
# ms to one TTL. redlock only: the peers have no election.
#
# Programs (override with the environment variables):
#   REDLOCK_BENCH   build/bench/redlock_bench   (skipped with a warning if absent)
#   FLOOR_BIN       build/bench/floor/floor     (skipped with a warning if absent)
#   REPORT_BIN      build/bench/report/bench_report (required)
#   CROWD_MERGE_BIN build/bench/report/bench_crowd_merge (handoff-crowd-K only)
#   (the handoff-crowd and leases scenarios also need redis-cli)
#   FAULTPROXY_BIN  build/tools/faultproxy/faultproxy (degraded-slow-2ms only)
#   node bench/peers/node/bench.js              (node + npm required)
#
# Output: progress on stderr; the raw JSON lines, samples, the programs'
# stderr and the table in build/bench-out/; the report program writes
# docs/benchmarks/latest.json and the SVG plots (BENCH_DOCS_DIR to change)
# and prints the table. Masters live on free loopback ports (never the
# 7001-7005 test bed) in a temp dir; every process started here is stopped by
# its pid on exit, paused masters are always resumed first. Exit 0 when every
# run succeeded, 1 when any run failed (the report is still written) or a
# prerequisite is missing, 2 on a usage error.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
REDLOCK_BENCH=${REDLOCK_BENCH:-$BUILD_DIR/bench/redlock_bench}
REDLOCK_CLI=${REDLOCK_CLI:-$BUILD_DIR/cli/redlock}
FLOOR_BIN=${FLOOR_BIN:-$BUILD_DIR/bench/floor/floor}
REPORT_BIN=${REPORT_BIN:-$BUILD_DIR/bench/report/bench_report}
CROWD_MERGE_BIN=${CROWD_MERGE_BIN:-$BUILD_DIR/bench/report/bench_crowd_merge}
FAULTPROXY_BIN=${FAULTPROXY_BIN:-$BUILD_DIR/tools/faultproxy/faultproxy}
NODE_DIR=bench/peers/node
DOCS_DIR=${BENCH_DOCS_DIR:-docs/benchmarks}
OUT=$BUILD_DIR/bench-out

ALL_SCENARIOS=(latency throughput handoff memory degraded-1-paused degraded-2-paused degraded-proxy-0ms degraded-slow-2ms latency-tls
               latency-semaphore latency-shared handoff-semaphore
               handoff-crowd-1 handoff-crowd-8 handoff-crowd-64 handoff-crowd-256
               handoff-crowd-1-fair handoff-crowd-8-fair handoff-crowd-64-fair handoff-crowd-256-fair
               leases-100k leases-100k-unbatched leases-100k-spread cli-crowd-32 failover
               latency-primaries latency-replicated latency-wait latency-cluster)
SYSTEMS=(redlock node-redlock floor)

rounds=5
seconds=3
locks=100000
concurrency=64
leases=100000
hold=60
failovers=5
failover_ttl=1000
scenarios=("${ALL_SCENARIOS[@]}")
build=1
quick=0

while (($# > 0)); do
  case $1 in
    --quick) quick=1; rounds=1; seconds=1; locks=10000; leases=2000; hold=5; failovers=3; failover_ttl=500 ;;
    --rounds) need_value $# "$1"; rounds=$2; shift ;;
    --seconds) need_value $# "$1"; seconds=$2; shift ;;
    --locks) need_value $# "$1"; locks=$2; shift ;;
    --concurrency) need_value $# "$1"; concurrency=$2; shift ;;
    --leases) need_value $# "$1"; leases=$2; shift ;;
    --hold) need_value $# "$1"; hold=$2; shift ;;
    --failovers) need_value $# "$1"; failovers=$2; shift ;;
    --failover-ttl) need_value $# "$1"; failover_ttl=$2; shift ;;
    --scenarios) need_value $# "$1" "a list"; IFS=, read -r -a scenarios <<<"$2"; shift ;;
    --no-build) build=0 ;;
    -h | --help) usage; exit 0 ;;
    *) bad "unknown argument '$1'" ;;
  esac
  shift
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || bad "--rounds must be a positive integer, got '$rounds'"
[[ $seconds =~ ^[0-9]+(\.[0-9]+)?$ && $seconds =~ [1-9] ]] || bad "--seconds must be a positive number, got '$seconds'"
[[ $locks =~ ^[1-9][0-9]*$ ]] || bad "--locks must be a positive integer, got '$locks'"
[[ $concurrency =~ ^[1-9][0-9]*$ ]] || bad "--concurrency must be a positive integer, got '$concurrency'"
[[ $leases =~ ^[1-9][0-9]*$ ]] || bad "--leases must be a positive integer, got '$leases'"
[[ $hold =~ ^[1-9][0-9]*(\.[0-9]+)?$ ]] || bad "--hold must be a number of seconds of at least 1, got '$hold'"
if [[ ! $failovers =~ ^[1-9][0-9]{0,3}$ ]] || ((failovers > 1000)); then
  bad "--failovers must be an integer in 1..1000, got '$failovers'"
fi
if [[ ! $failover_ttl =~ ^[1-9][0-9]{2,4}$ ]] || ((failover_ttl > 60000)); then
  bad "--failover-ttl must be milliseconds in 100..60000, got '$failover_ttl'"
fi
((${#scenarios[@]} > 0)) || bad "--scenarios needs at least one scenario (known: ${ALL_SCENARIOS[*]})"
for s in "${scenarios[@]}"; do
  [[ " ${ALL_SCENARIOS[*]} " == *" $s "* ]] || bad "unknown scenario '$s' (known: ${ALL_SCENARIOS[*]})"
done

# ---- prerequisites ---------------------------------------------------------------

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  # Debian bookworm's nodejs is 18.x, enough for the peer.
  log "node or npm is missing: installing Debian's nodejs and npm"
  install_packages nodejs npm || die "node and npm are needed for the node-redlock peer"
fi
command -v node >/dev/null 2>&1 || die "node is not installed (Node.js >= 18 is needed for the node-redlock peer)"
command -v npm >/dev/null 2>&1 || die "npm is not installed (needed to install the node-redlock peer's packages)"
node_major=$(node -p 'process.versions.node.split(".")[0]')
((node_major >= 18)) || die "node $(node --version) is too old: Node.js >= 18 is needed"

if ((build)); then
  bash scripts/bootstrap.sh --all >&2
fi
need_redis

if [[ ! -d $NODE_DIR/node_modules ]]; then
  log "installing the node-redlock peer's packages (npm ci in $NODE_DIR)"
  if [[ -f $NODE_DIR/package-lock.json ]]; then
    (cd "$NODE_DIR" && npm ci --no-audit --no-fund >&2) || die "npm ci failed in $NODE_DIR"
  else
    (cd "$NODE_DIR" && npm install --no-audit --no-fund >&2) || die "npm install failed in $NODE_DIR"
  fi
fi

[[ -x $REPORT_BIN ]] || die "$REPORT_BIN is missing: is bench/report wired into the build (bench/meson.build: subdir('report'))?"
if [[ " ${scenarios[*]} " == *" handoff-crowd-"* ]]; then
  [[ -x $CROWD_MERGE_BIN ]] || die "$CROWD_MERGE_BIN is missing (the handoff-crowd scenarios need it): build bench/report"
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli is missing (the handoff-crowd scenarios read the masters' INFO with it)"
fi
if [[ " ${scenarios[*]} " == *" leases-"* ]]; then
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli is missing (the leases scenarios read the masters' INFO with it)"
fi
if [[ " ${scenarios[*]} " == *" cli-crowd-"* ]]; then
  [[ -x $REDLOCK_CLI ]] || die "$REDLOCK_CLI is missing (the cli-crowd scenario runs it): build cli/redlock"
  command -v redis-cli >/dev/null 2>&1 || die "redis-cli is missing (the cli-crowd scenario reads the masters' INFO with it)"
fi

declare -A PROGRAM=()
if [[ -x $REDLOCK_BENCH ]]; then
  PROGRAM[redlock]=$REDLOCK_BENCH
else
  log "warning: $REDLOCK_BENCH is missing: the redlock system is skipped"
fi
PROGRAM[node-redlock]="node $NODE_DIR/bench.js"
if [[ -x $FLOOR_BIN ]]; then
  PROGRAM[floor]=$FLOOR_BIN
else
  log "warning: $FLOOR_BIN is missing: the floor system is skipped"
fi

# ---- masters (and the fault proxy), stopped by pid on exit ------------------------

WORK=$(mktemp -d "${TMPDIR:-/tmp}/redlock-bench.XXXXXX")
MASTER_PIDS=()
MASTER_PORTS=()
RUN_PIDS=()  # the programs of a crowd or leases run, running in the background
PAUSED=()
FP_PID=
FP_LISTEN=
FP_CONTROL=

REPLICATED_PIDS=()  # the primaries and replicas of latency-replicated and latency-wait
CLUSTER_PIDS=()     # the one-node clusters of latency-cluster

cleanup() {
  local rc=$? pid
  trap - EXIT INT TERM
  for pid in "${RUN_PIDS[@]}"; do
    stop_pid "$pid"
  done
  stop_pid "$FP_PID"
  for pid in "${MASTER_PIDS[@]}" "${REPLICATED_PIDS[@]}" "${CLUSTER_PIDS[@]}"; do
    stop_pid "$pid"  # resumes a paused one first
  done
  rm -rf -- "$WORK"
  exit "$rc"
}
on_exit cleanup

want_tls=0
[[ " ${scenarios[*]} " == *" latency-tls "* ]] && want_tls=1
TLS_ARGS=()
if ((want_tls)); then
  make_test_certs "$WORK/tls" || die "could not make the certificates of latency-tls"
fi
NODES_TLS=
for i in 0 1 2 3 4; do
  # The TLS port is drawn anew for each try: start_master retries only its
  # plain port, so a TLS port taken meanwhile would fail every one of them.
  for ((try = 0; try < 3; try++)); do
    if ((want_tls)); then
      TLS_PORTS[i]=$(free_port)
      TLS_ARGS=(--tls-port "${TLS_PORTS[i]}" --tls-cert-file "$WORK/tls/server.crt"
                --tls-key-file "$WORK/tls/server.key" --tls-ca-cert-file "$WORK/tls/ca.crt" --tls-auth-clients no)
    fi
    start_master any "$WORK/master$i" "${TLS_ARGS[@]}" && break
    if ! ((want_tls)) || ((try == 2)); then
      die "could not start redis-server master $((i + 1)) (see $WORK/master$i/redis.log)"
    fi
  done
  if ((want_tls)); then
    NODES_TLS+="rediss://127.0.0.1:${TLS_PORTS[i]},"
  fi
  MASTER_PIDS[i]=$MASTER_PID
  MASTER_PORTS[i]=$MASTER_PORT
done
NODES_TLS=${NODES_TLS%,}
NODES_OK=$(for p in "${MASTER_PORTS[@]}"; do printf 'redis://127.0.0.1:%s,' "$p"; done)
NODES_OK=${NODES_OK%,}
log "masters on 127.0.0.1 ports ${MASTER_PORTS[*]} (pids ${MASTER_PIDS[*]}), data in $WORK"

fp_command() {  # fp_command LINE: send one control line, require OK
  local fd reply
  exec {fd}<>"/dev/tcp/${FP_CONTROL%:*}/${FP_CONTROL##*:}" || die "cannot reach the faultproxy control socket $FP_CONTROL"
  printf '%s\n' "$1" >&"$fd"
  IFS= read -r -t 5 reply <&"$fd" || reply="(no reply)"
  exec {fd}>&-
  [[ $reply == OK* ]] || die "faultproxy: '$1' → $reply"
}

faultproxy_settled() {  # it printed its listeners, or it exited
  grep -qs '"listeners"' "$WORK/faultproxy.out" || ! pid_alive "$FP_PID"
}

NODES_SLOW=
want_slow=0
[[ " ${scenarios[*]} " == *" degraded-slow-2ms "* || " ${scenarios[*]} " == *" degraded-proxy-0ms "* ]] && want_slow=1
if ((want_slow)) && [[ ! -x $FAULTPROXY_BIN ]]; then
  log "warning: $FAULTPROXY_BIN is missing: degraded-proxy-0ms and degraded-slow-2ms are skipped"
  want_slow=0
fi
if ((want_slow)); then
  "$FAULTPROXY_BIN" --target "127.0.0.1:${MASTER_PORTS[4]}" --listen 127.0.0.1:0 --control 127.0.0.1:0 \
    </dev/null >"$WORK/faultproxy.out" 2>"$WORK/faultproxy.err" &
  FP_PID=$!
  wait_until 5 faultproxy_settled || true
  fp_line=$(head -n1 "$WORK/faultproxy.out" 2>/dev/null || true)
  FP_LISTEN=$(sed -n 's/.*"listeners":\["\([^"]*\)".*/\1/p' <<<"$fp_line")
  FP_CONTROL=$(sed -n 's/.*"control":"\([^"]*\)".*/\1/p' <<<"$fp_line")
  [[ $FP_LISTEN == 127.0.0.1:* && $FP_CONTROL == 127.0.0.1:* ]] ||
    die "faultproxy did not start: $(cat "$WORK/faultproxy.err" 2>/dev/null) $fp_line"
  NODES_SLOW=$(for p in "${MASTER_PORTS[@]:0:4}"; do printf 'redis://127.0.0.1:%s,' "$p"; done)
  NODES_SLOW+="redis://$FP_LISTEN"
  log "faultproxy (pid $FP_PID) in front of master 5: $FP_LISTEN (0 ms or 2 ms per request, per scenario)"
fi

replica_acks() {  # replica_acks PORT: a write on this primary reaches its replica (WAIT answers 1)
  local out
  out=$(printf 'SET bench-wait-probe 1\nWAIT 1 100\n' | timeout 2 redis-cli -h 127.0.0.1 -p "$1" 2>/dev/null) || return 1
  [[ $(tail -n 1 <<<"$out") == 1 ]]
}

NODES_PRIMARIES=
NODES_REPLICATED=
NODES_WAIT=
if [[ " ${scenarios[*]} " =~ \ latency-(primaries|replicated|wait)\  ]]; then
  for i in 0 1 2 3 4; do
    start_master any "$WORK/primary$i" --repl-diskless-sync-delay 0 ||
      die "could not start the primary $((i + 1)) of latency-wait (see $WORK/primary$i/redis.log)"
    REPLICATED_PIDS+=("$MASTER_PID")
    primary_port=$MASTER_PORT
    start_master any "$WORK/replica$i" --replicaof 127.0.0.1 "$primary_port" ||
      die "could not start the replica $((i + 1)) of latency-wait (see $WORK/replica$i/redis.log)"
    REPLICATED_PIDS+=("$MASTER_PID")
    # A replica just attached is streamed nothing before its first
    # acknowledgement (up to a second after a diskless sync).
    wait_until 10 replica_acks "$primary_port" || die "the replica of 127.0.0.1:$primary_port did not acknowledge within 10 s"
    NODES_PRIMARIES+="redis://127.0.0.1:$primary_port,"
    NODES_REPLICATED+="redis://127.0.0.1:$primary_port?replicated=1,"
    NODES_WAIT+="redis://127.0.0.1:$primary_port?wait_replicas=1&wait_timeout=25,"
  done
  NODES_PRIMARIES=${NODES_PRIMARIES%,}
  NODES_REPLICATED=${NODES_REPLICATED%,}
  NODES_WAIT=${NODES_WAIT%,}
  log "latency-primaries/-replicated/-wait: five primaries with a replica each (pids ${REPLICATED_PIDS[*]})"
fi

cluster_ok() {  # cluster_ok PORT: the node serves every slot (cluster_state:ok)
  timeout 2 redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | grep -q '^cluster_state:ok'
}

NODES_CLUSTERS=
if [[ " ${scenarios[*]} " =~ \ latency-cluster\  ]]; then
  for i in 0 1 2 3 4; do
    start_master any "$WORK/cluster$i" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-port "$(free_port)" ||
      die "could not start the cluster node $((i + 1)) of latency-cluster (see $WORK/cluster$i/redis.log)"
    CLUSTER_PIDS+=("$MASTER_PID")
    timeout 5 redis-cli -h 127.0.0.1 -p "$MASTER_PORT" cluster addslotsrange 0 16383 >/dev/null ||
      die "CLUSTER ADDSLOTSRANGE failed on 127.0.0.1:$MASTER_PORT"
    wait_until 10 cluster_ok "$MASTER_PORT" || die "the cluster node 127.0.0.1:$MASTER_PORT is not ok within 10 s"
    NODES_CLUSTERS+="redis+cluster://127.0.0.1:$MASTER_PORT,"
  done
  NODES_CLUSTERS=${NODES_CLUSTERS%,}
  log "latency-cluster: five one-node clusters (pids ${CLUSTER_PIDS[*]})"
fi

# ---- the runs ------------------------------------------------------------------------

rm -rf -- "$OUT"
mkdir -p "$OUT/samples"
RESULTS=$OUT/results.jsonl
PROGRAM_LOG=$OUT/programs.log
: >"$RESULTS"
: >"$PROGRAM_LOG"
SAMPLE_ARGS=()
failed_runs=0

pause_masters() {  # pause_masters IDX...: SIGSTOP these masters, wait until stopped
  local i pid
  for i in "$@"; do
    pid=${MASTER_PIDS[i]}
    PAUSED+=("$pid")
    pause_pid "$pid" || die "master $((i + 1)) (pid $pid) did not stop"
  done
}

resume_masters() {  # resume every paused master, wait until each answers again
  local pid i
  for pid in "${PAUSED[@]}"; do
    resume_pid "$pid" 2>/dev/null || true
  done
  PAUSED=()
  for i in 0 1 2 3 4; do
    wait_until 5 master_is "${MASTER_PORTS[i]}" "${MASTER_PIDS[i]}" || true
  done
  sleep 0.3  # let a resumed master drain what queued up while it was stopped
}

json_field() {  # json_field LINE NAME: a number field of a one-line JSON object ("" if absent)
  sed -n "s/.*\"$2\": *\([-0-9.eE+]*\).*/\1/p" <<<"$1"
}

run_one() {  # run_one SYSTEM SCENARIO LABEL ROUND NODES
  local sys=$1 scen=$2 label=$3 round=$4 nodes=$5
  local -a cmd args
  local samples="" out="" rc=0 line limit summary
  read -r -a cmd <<<"${PROGRAM[$sys]}"
  args=(--nodes "$nodes" --scenario "$scen" --seconds "$seconds")
  [[ $nodes == rediss://* ]] && args+=(--tls-ca "$WORK/tls/ca.crt")
  case $scen in
    throughput) args+=(--concurrency "$concurrency") ;;
    memory) args+=(--locks "$locks") ;;
    failover) args+=(--failovers "$failovers" --lease-ttl "$failover_ttl") ;;
    handoff) [[ $label == handoff-semaphore ]] && args+=(--permits 2) ;;
    latency)
      samples=$OUT/samples/$sys.$label.r$round.txt
      args+=(--samples "$samples")
      [[ $label == latency-semaphore ]] && args+=(--permits 3)
      [[ $label == latency-shared ]] && args+=(--shared)
      ;;
  esac
  limit=$(awk -v s="$seconds" -v n="$locks" -v m="$scen" -v f="$failovers" -v t="$failover_ttl" \
    'BEGIN { printf "%d", s + 120 + (m == "memory" ? n / 200 : 0) + (m == "failover" ? f * (3 * t / 1000 + 5) : 0) }')
  printf '[round %d/%d] %s: %s… ' "$round" "$rounds" "$label" "$sys" >&2
  printf '==== round %d %s %s: %s %s\n' "$round" "$label" "$sys" "${cmd[*]}" "${args[*]}" >>"$PROGRAM_LOG"
  if out=$(timeout --kill-after=5 "$limit" "${cmd[@]}" "${args[@]}" 2>>"$PROGRAM_LOG" </dev/null); then
    rc=0
  else
    rc=$?
  fi
  line=$(printf '%s\n' "$out" | tail -n 1)
  if ((rc == 0)) && [[ $line == \{*\} ]]; then
    printf '{"round": %d, "label": "%s", %s\n' "$round" "$label" "${line#\{}" >>"$RESULTS"
    if [[ $line == *'"unsupported"'* ]]; then
      summary="unsupported"
    elif [[ $scen == failover ]]; then
      summary="$(json_field "$line" failovers) failovers, TTL $(json_field "$line" ttl_ms) ms: elected p50"
      summary+=" $(json_field "$line" failover_p50_ms) ms (floor $(json_field "$line" floor_p50_ms) ms,"
      summary+=" overhead p50 $(json_field "$line" overhead_p50_ms) / max $(json_field "$line" overhead_max_ms) ms),"
      summary+=" observer told p50 $(json_field "$line" told_p50_ms) ms (overhead max $(json_field "$line" told_overhead_max_ms) ms)"
      [[ $(json_field "$line" errors) != 0 ]] && summary+=", $(json_field "$line" errors) errors"
    else
      summary="$(json_field "$line" ops_per_s) ops/s"
      [[ -n $(json_field "$line" p50_us) ]] && summary+=", p50 $(json_field "$line" p50_us) µs, p99 $(json_field "$line" p99_us) µs"
      [[ -n $(json_field "$line" cpu_us_per_op) ]] && summary+=", $(json_field "$line" cpu_us_per_op) µs CPU/op"
      [[ -n $(json_field "$line" bytes_per_lock) ]] && summary+=", $(json_field "$line" bytes_per_lock) B/lock"
      [[ -n $(json_field "$line" failed_attempts_per_handoff) ]] && summary+=", $(json_field "$line" failed_attempts_per_handoff) failed attempts/handoff"
      [[ -n $(json_field "$line" errors) && $(json_field "$line" errors) != 0 ]] && summary+=", $(json_field "$line" errors) errors"
      if [[ -n $samples && -s $samples ]]; then
        SAMPLE_ARGS+=(--samples "$sys:$label=$samples")
      fi
    fi
    printf '%s\n' "$summary" >&2
  else
    ((failed_runs += 1))
    local why="exit $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${limit}s"
    ((rc == 0)) && why="no JSON line on stdout"
    printf 'FAILED (%s)\n' "$why" >&2
    printf '{"round": %d, "label": "%s", "system": "%s", "scenario": "%s", "failed": "%s"}\n' \
      "$round" "$label" "$sys" "$scen" "$why" >>"$RESULTS"
    stderr_tail "$round" "$label" "$sys"
  fi
}

stderr_tail() {  # stderr_tail ROUND LABEL SYSTEM: the last lines a run wrote to $PROGRAM_LOG
  log "last lines of its stderr ($PROGRAM_LOG):"
  awk -v m="==== round $1 $2 $3:" 'index($0, m) == 1 { p = 1; next } /^==== / { p = 0 } p' \
    "$PROGRAM_LOG" | tail -n 5 >&2
}

master_stats() {  # master_stats FILE: INFO commandstats + cpu of every master, appended to FILE
  local port
  : >"$1"
  for port in "${MASTER_PORTS[@]}"; do
    redis-cli -h 127.0.0.1 -p "$port" INFO commandstats cpu >>"$1" ||
      { log "redis-cli INFO on 127.0.0.1:$port failed"; return 1; }
  done
}

all_calls() {  # all_calls FILE: the calls of every command in a master_stats FILE, summed
  awk -F'[:=,]' '/^cmdstat_/ { n += $3 } END { print n + 0 }' "$1"
}

run_failed() {  # run_failed SYSTEM LABEL ROUND WHY: record a failed crowd or leases run
  ((failed_runs += 1))
  printf 'FAILED (%s)\n' "$4" >&2
  printf '{"round": %d, "label": "%s", "system": "%s", "scenario": "%s", "failed": "%s"}\n' \
    "$3" "$2" "$1" "$2" "$4" >>"$RESULTS"
}

# run_crowd SYSTEM LABEL ROUND: one handoff-crowd-K or handoff-crowd-K-fair
# run (see the header).
run_crowd() {
  local sys=$1 label=$2 round=$3 k procs dir resource limit p w line rc=0 why="" ready=0 pid
  local -a cmd pids=() go_fds=() events=() mode=()
  local ready_fd fd
  k=${label#handoff-crowd-}
  if [[ $k == *-fair ]]; then
    k=${k%-fair}
    mode=(--fair)
  fi
  if [[ $sys == floor ]]; then
    printf '{"round": %d, "label": "%s", "system": "floor", "scenario": "%s", "unsupported": "no lock library: the floor has no waiting acquire"}\n' \
      "$round" "$label" "$label" >>"$RESULTS"
    return 0
  fi
  read -r -a cmd <<<"${PROGRAM[$sys]}"
  procs=$((k < 4 ? k : 4))
  dir=$OUT/crowd/$label.$sys.r$round
  resource=bench-crowd-$sys-r$round-$label-$$
  limit=$(awk -v s="$seconds" 'BEGIN { printf "%d", s + 120 }')
  mkdir -p "$dir"
  printf '[round %d/%d] %s: %s (%d processes)… ' "$round" "$rounds" "$label" "$sys" "$procs" >&2
  mkfifo "$dir/ready"
  exec {ready_fd}<>"$dir/ready"
  for ((p = 0; p < procs; p++)); do
    w=$((k / procs + (p < k % procs ? 1 : 0)))
    mkfifo "$dir/go.$p"
    exec {fd}<>"$dir/go.$p"
    go_fds[p]=$fd
    events+=("$dir/events.$p")
    printf '==== round %d %s %s process %d: %s --nodes %s --scenario handoff-crowd --waiters %d %s\n' \
      "$round" "$label" "$sys" "$p" "${cmd[*]}" "$NODES_OK" "$w" "${mode[*]}" >>"$PROGRAM_LOG"
    timeout --kill-after=5 "$limit" "${cmd[@]}" --nodes "$NODES_OK" --scenario handoff-crowd --seconds "$seconds" \
      --waiters "$w" "${mode[@]}" --resource "$resource" --events "$dir/events.$p" --gate "$dir/ready" \
      <"$dir/go.$p" >"$dir/out.$p" 2>>"$PROGRAM_LOG" &
    pids+=($!)
    RUN_PIDS+=($!)
  done
  # Every process warmed up (a line each; one that exits first fails the run).
  while ((ready < procs)) && [[ -z $why ]]; do
    if IFS= read -r -t 1 -u "$ready_fd" line; then
      [[ $line == ready\ * ]] && ((ready += 1))
    else
      for pid in "${pids[@]}"; do
        pid_alive "$pid" || why="a process exited before it was ready"
      done
    fi
  done
  [[ -n $why ]] || master_stats "$dir/stats.before" || why="INFO before the run failed"
  for ((p = 0; p < procs; p++)); do
    [[ -n $why ]] || printf 'go\n' >&"${go_fds[p]}"
    fd=${go_fds[p]}
    exec {fd}>&-  # stdin ends: a process still at the gate exits
  done
  exec {ready_fd}>&-
  for pid in "${pids[@]}"; do
    wait "$pid" || rc=$?
  done
  RUN_PIDS=()
  if [[ -n $why ]]; then
    run_failed "$sys" "$label" "$round" "$why"
    return 0
  fi
  if ((rc != 0)); then
    why="exit $rc"
    ((rc == 124 || rc == 137)) && why="timed out after ${limit}s"
    run_failed "$sys" "$label" "$round" "a process failed: $why"
    return 0
  fi
  master_stats "$dir/stats.after" || { run_failed "$sys" "$label" "$round" "INFO after the run failed"; return 0; }
  rc=0
  line=$("$CROWD_MERGE_BIN" --system "$sys" --label "$label" --waiters "$k" --stats-before "$dir/stats.before" \
    --stats-after "$dir/stats.after" "${events[@]}" 2>>"$PROGRAM_LOG") || rc=$?
  if ((rc == 0 || rc == 3)) && [[ $line == \{*\} ]]; then
    printf '{"round": %d, "label": "%s", %s\n' "$round" "$label" "${line#\{}" >>"$RESULTS"
    printf '%s handoffs/s, p50 %s µs, p99 %s µs, %s commands/handoff, max wait %s µs, %s starved, order inversions %s\n' \
      "$(json_field "$line" ops_per_s)" "$(json_field "$line" p50_us)" "$(json_field "$line" p99_us)" \
      "$(json_field "$line" commands_per_handoff)" "$(json_field "$line" max_wait_us)" \
      "$(json_field "$line" starved_waiters)" "$(json_field "$line" order_inversion_share)" >&2
    if ((rc == 3)); then
      ((failed_runs += 1))
      log "SAFETY VIOLATION: $label, $sys, round $round: $(json_field "$line" safety_violations) acquisitions overlapped the previous holder (see $PROGRAM_LOG and $dir)"
    fi
  else
    run_failed "$sys" "$label" "$round" "bench_crowd_merge exit $rc"
    grep '^bench_crowd_merge' "$PROGRAM_LOG" | tail -n 3 >&2 || true
  fi
}

# run_cli_crowd LABEL ROUND: one cli-crowd-K run (see the header).
run_cli_crowd() {
  local label=$1 round=$2 k dir resource i pid failed=0 t0 t1 commands handoffs
  local -a pids=()
  k=${label#cli-crowd-}
  dir=$OUT/cli-crowd/$label.r$round
  resource=bench-cli-crowd-r$round-$$
  mkdir -p "$dir"
  printf '[round %d/%d] %s: redlock (%d processes, 2 runs each)… ' "$round" "$rounds" "$label" "$k" >&2
  master_stats "$dir/stats.before" || { run_failed redlock "$label" "$round" "INFO before the run failed"; return 0; }
  t0=$(date +%s%N)
  for ((i = 0; i < k; i++)); do
    (for _ in 1 2; do
      "$REDLOCK_CLI" --nodes "$NODES_OK" --no-quarantine run --wait 120 "$resource" -- true || exit 1
    done) 2>>"$PROGRAM_LOG" &
    pids+=($!)
    RUN_PIDS+=($!)
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || ((failed += 1))
  done
  RUN_PIDS=()
  t1=$(date +%s%N)
  ((failed == 0)) || { run_failed redlock "$label" "$round" "$failed of $k loops failed"; return 0; }
  master_stats "$dir/stats.after" || { run_failed redlock "$label" "$round" "INFO after the run failed"; return 0; }
  commands=$(($(all_calls "$dir/stats.after") - $(all_calls "$dir/stats.before") - ${#MASTER_PORTS[@]}))
  handoffs=$((2 * k))
  line=$(awk -v c="$commands" -v h="$handoffs" -v ns="$((t1 - t0))" -v k="$k" 'BEGIN {
    s = ns / 1e9
    printf "{\"system\": \"redlock\", \"scenario\": \"cli-crowd\", \"processes\": %d, \"ops\": %d, \"seconds\": %.3f, \"ops_per_s\": %.1f, \"commands_per_handoff\": %.1f, \"errors\": 0}", 2 * k, h, s, h / s, c / h }')
  printf '{"round": %d, "label": "%s", %s\n' "$round" "$label" "${line#\{}" >>"$RESULTS"
  printf '%s handoffs/s, %s commands/handoff\n' "$(json_field "$line" ops_per_s)" \
    "$(json_field "$line" commands_per_handoff)" >&2
}

# run_leases LABEL ROUND: one leases-100k, leases-100k-unbatched or
# leases-100k-spread run of redlock (see the header).
run_leases() {
  local label=$1 round=$2 dir limit line rc=0 why="" pid stage want got ready_fd go_fd summary
  local -a cmd args
  read -r -a cmd <<<"${PROGRAM[redlock]}"
  dir=$OUT/leases/$label.r$round
  limit=$(awk -v h="$hold" -v n="$leases" 'BEGIN { printf "%d", 1.5 * h + 120 + n / 200 }')
  args=(--nodes "$NODES_OK" --scenario leases --leases "$leases" --hold "$hold" --gate "$dir/ready"
        --stats-before "$dir/stats.before" --stats-after "$dir/stats.after")
  [[ $label == *-unbatched ]] && args+=(--extend-batch-max 1)
  [[ $label == *-spread ]] && args+=(--spread)
  mkdir -p "$dir"
  mkfifo "$dir/ready" "$dir/go"
  exec {ready_fd}<>"$dir/ready"
  exec {go_fd}<>"$dir/go"
  printf '[round %d/%d] %s: redlock (%d leases, %s s)… ' "$round" "$rounds" "$label" "$leases" "$hold" >&2
  printf '==== round %d %s redlock: %s %s\n' "$round" "$label" "${cmd[*]}" "${args[*]}" >>"$PROGRAM_LOG"
  timeout --kill-after=5 "$limit" "${cmd[@]}" "${args[@]}" <"$dir/go" >"$dir/out" 2>>"$PROGRAM_LOG" &
  pid=$!
  RUN_PIDS+=("$pid")
  # "held" → the INFO before; "done" → the INFO after; each answered "go".
  for stage in held:before done:after; do
    want=${stage%%:*}
    got=0
    while ((got == 0)) && [[ -z $why ]]; do
      if IFS= read -r -t 1 -u "$ready_fd" line; then
        [[ $line == "$want "* ]] && got=1
      else
        pid_alive "$pid" || why="it exited before \"$want\""
      fi
    done
    [[ -z $why ]] || break
    master_stats "$dir/stats.${stage#*:}" || { why="INFO at \"$want\" failed"; break; }
    printf 'go\n' >&"$go_fd"
  done
  exec {go_fd}>&-  # stdin ends: a program still at the gate exits
  exec {ready_fd}>&-
  wait "$pid" || rc=$?
  RUN_PIDS=()
  line=$(tail -n 1 "$dir/out" 2>/dev/null || true)
  if [[ -z $why ]] && ((rc == 0 || rc == 3)) && [[ $line == \{*\} ]]; then
    printf '{"round": %d, "label": "%s", %s\n' "$round" "$label" "${line#\{}" >>"$RESULTS"
    summary="$(json_field "$line" ops_per_s) extensions/s, p99 $(json_field "$line" p99_us) µs"
    summary+=", $(json_field "$line" cpu_us_per_lease_s) µs CPU and $(json_field "$line" requests_per_lease_s)"
    summary+=" requests per lease-second, $(json_field "$line" bytes_per_lease) B/lease"
    summary+=", $(json_field "$line" leases_lost) lost"
    printf '%s\n' "$summary" >&2
    if ((rc == 3)); then
      ((failed_runs += 1))
      log "LEASES LOST: $label, round $round: $(json_field "$line" leases_lost) of $(json_field "$line" leases) (see $PROGRAM_LOG)"
    fi
  else
    if [[ -z $why ]]; then
      why="exit $rc"
      ((rc == 124 || rc == 137)) && why="timed out after ${limit}s"
      ((rc == 0)) && why="no JSON line on stdout"
    fi
    run_failed redlock "$label" "$round" "$why"
    stderr_tail "$round" "$label" redlock
  fi
}

for ((round = 1; round <= rounds; round++)); do
  for label in "${scenarios[@]}"; do
    scen=$label
    nodes=$NODES_OK
    case $label in
      degraded-1-paused) scen=latency ;;
      degraded-2-paused) scen=latency ;;
      latency-tls)
        scen=latency
        nodes=$NODES_TLS
        ;;
      latency-semaphore | latency-shared) scen=latency ;;
      latency-primaries)
        scen=latency
        nodes=$NODES_PRIMARIES
        ;;
      latency-replicated)
        scen=latency
        nodes=$NODES_REPLICATED
        ;;
      latency-wait)
        scen=latency
        nodes=$NODES_WAIT
        ;;
      latency-cluster)
        scen=latency
        nodes=$NODES_CLUSTERS
        ;;
      handoff-semaphore) scen=handoff ;;
      degraded-proxy-0ms | degraded-slow-2ms)
        ((want_slow)) || continue
        scen=latency
        nodes=$NODES_SLOW
        if [[ $label == degraded-slow-2ms ]]; then fp_command "SET * delay_up=2"; else fp_command "SET * delay_up=0"; fi
        ;;
    esac
    for sys in "${SYSTEMS[@]}"; do
      [[ -n ${PROGRAM[$sys]:-} ]] || continue
      [[ $label == latency-tls && $sys == node-redlock ]] && continue  # the floor has its own TLS
      [[ $label == latency-semaphore && $sys != redlock ]] && continue  # semaphores: redlock's alone
      [[ $label == latency-shared && $sys != redlock ]] && continue  # read locks: redlock's alone
      [[ $label == handoff-semaphore && $sys != redlock ]] && continue  # semaphores: redlock's alone
      [[ $label == handoff-crowd-*-fair && $sys != redlock ]] && continue  # fair order: redlock's alone
      [[ $label == failover && $sys != redlock ]] && continue  # elections: redlock's alone
      [[ $label =~ ^latency-(primaries|replicated|wait|cluster)$ && $sys != redlock ]] && continue  # members as deployed: redlock's alone
      if [[ $label == leases-* ]]; then
        [[ $sys == redlock ]] && run_leases "$label" "$round"
        continue
      fi
      if [[ $label == cli-crowd-* ]]; then
        [[ $sys == redlock ]] && run_cli_crowd "$label" "$round"
        continue
      fi
      if [[ $label == handoff-crowd-* ]]; then
        run_crowd "$sys" "$label" "$round"
        continue
      fi
      case $label in
        degraded-1-paused) pause_masters 4 ;;
        degraded-2-paused) pause_masters 3 4 ;;
      esac
      run_one "$sys" "$scen" "$label" "$round" "$nodes"
      ((${#PAUSED[@]} == 0)) || resume_masters
    done
  done
done

# ---- the report ------------------------------------------------------------------------

log "report: $REPORT_BIN --input $RESULTS --out-dir $DOCS_DIR"
"$REPORT_BIN" --input "$RESULTS" --out-dir "$DOCS_DIR" "${SAMPLE_ARGS[@]}" | tee "$OUT/table.md"
if ((quick)); then
  log "note: this was a --quick run (1 round of ${seconds} s, $locks locks, $leases leases held ${hold} s, $failovers failovers): indicative only"
fi
if ((failed_runs > 0)); then
  log "$failed_runs run(s) failed: see $PROGRAM_LOG"
  exit 1
fi
