#!/usr/bin/env bash
# simulate.sh — the deterministic simulator (docs/simulation.md): seeded
# fault schedules against the real engine, node sessions and Lua scripts,
# checked for mutual exclusion, fence order, leaked keys and liveness.
#
#   scripts/simulate.sh [--seconds S] [--seed N] [--workload W] [--sabotage NAME[,NAME]] [ARGS...]
#
#   --seconds S     run schedules for S seconds (default 10)
#   --seed N        the first schedule's seed (default: 1); schedule i runs N+i
#   --workload W    all (default: swarm testing, each schedule its own
#                   workload, fault kinds and shape), plain, fenced, multi,
#                   lease, leases, crowd, fair, mixed or survey
#   --sabotage N    run a deliberately broken variant of the library
#                   (src/sabotage.hpp); exit 1 means the simulator caught it
#   ARGS            passed on: --schedules K, --clients C, --swarm, --beyond,
#                   --first, --verbose, --trace-commands, --shrink
# Builds the simulator if needed (BUILD_DIR, default build). Progress on
# stderr (rounds per second so far, every 2 s), one JSON line on stdout
# (rounds_per_s: acquire rounds per wall-clock second of the run;
# rounds_per_cpu_s: per second of the process's own CPU time, user +
# system, which other processes on the machine do not move). Exit
# status: the simulator's (0 no violation, 1 violation found, 2 usage
# error).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}

seconds=10
args=()
sabotage=
while (($# > 0)); do
  case $1 in
    --seconds | --seed | --workload)
      need_value $# "$1"
      if [[ $1 == --seconds ]]; then seconds=$2; else args+=("$1" "$2"); fi
      shift 2 ;;
    --sabotage)
      need_value $# "$1" "a name"
      sabotage=$2
      shift 2 ;;
    *)
      args+=("$1")
      shift ;;
  esac
done

program=redlock-sim
if [[ -n $sabotage ]]; then
  program=redlock-sim-sabotaged
  args+=(--sabotage "$sabotage")
fi

if [[ -f $BUILD_DIR/build.ninja ]]; then
  ninja -C "$BUILD_DIR" "tools/sim/$program" >&2
else
  bash scripts/bootstrap.sh --all >&2
fi

status=0
"$BUILD_DIR/tools/sim/$program" --seconds "$seconds" "${args[@]}" || status=$?
exit "$status"
