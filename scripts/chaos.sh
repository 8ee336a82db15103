#!/usr/bin/env bash
# chaos.sh — the fault-injection suite: every scenario (or the ones named)
# against its own freshly started masters, checked by the history checker.
#
#   scripts/chaos.sh [--long] [--seconds N] [--scenario NAME[,NAME...]] [--acquisitions N] [--tls]
#                    [--json FILE] [--list]
#
#   --long          60 s per scenario (default 3 s each)
#   --seconds N     N s per scenario (the time limit of one with a target)
#   --scenario ...  only these (see --list); soak-1m runs only when named
#   --acquisitions N  the target of a scenario with one (soak-1m: 1,000,000)
#   --tls           the clients reach the masters over TLS (rediss://)
#   --json FILE     all results as one JSON array
# Per-scenario JSON and SVG timelines go to build/chaos-out/. Exit 0 when
# every scenario showed what it must (docs/chaos.md), 1 otherwise.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR=${BUILD_DIR:-build}
bash scripts/bootstrap.sh --all >&2
exec "$BUILD_DIR/tools/chaos/chaos" --out "$BUILD_DIR/chaos-out" "$@"
