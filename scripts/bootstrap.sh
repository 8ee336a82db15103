#!/usr/bin/env bash
# bootstrap.sh — install the Debian packages the build and the tests need
# (only the missing ones), configure the meson build dir once, and build
# what the caller runs: by default the library and the `redlock` command
# (cli/redlock); the whole tree (tests, simulator, chaos and fault tools,
# benchmarks: six times as many compile steps) only with --all, which
# scripts/test.sh and the tools' scripts (bench, chaos, simulate) pass.
#
#   scripts/bootstrap.sh [--all | TARGET...]
#
#   TARGET      ninja targets to build instead of the default, as paths in
#               the build dir (scripts/demo.sh: cli/redlock
#               examples/fenced_increment tools/demo/demo_report)
#   --all       every target (what `ninja -C build` builds)
# Node.js and npm (for the benchmark's node-redlock peer, which
# scripts/test.sh runs once as a smoke test) are installed only when `node`
# or `npm` is missing, so a Node.js from elsewhere (nodesource) is kept.
# At the end it says where the built `redlock` command is: it is not on
# PATH unless LINK_DIR is given or the build is installed
# (`meson install -C build`, then `ldconfig`).
#   BUILD_DIR   build directory (default: build)
#   MESON_ARGS  extra arguments for `meson setup` (word-split), e.g.
#               MESON_ARGS="-Db_sanitize=address,undefined -Dbuildtype=debug"
#   LINK_DIR    also make LINK_DIR/redlock a symlink to the built command,
#               e.g. LINK_DIR=~/.local/bin (a directory on your PATH)
# Idempotent: a second run installs nothing, reuses the configured build
# dir and only runs ninja (which rebuilds what changed).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
MESON_ARGS=${MESON_ARGS:-}
LINK_DIR=${LINK_DIR:-}

# The library is built as cli/redlock's dependency (libredlock.so).
targets=(cli/redlock)
all=no
if (($#)); then
  targets=()
  for arg in "$@"; do
    case $arg in
      --all) all=yes ;;
      -h | --help) usage; exit 0 ;;
      -*) bad "unknown option '$arg'" ;;
      *) targets+=("$arg") ;;
    esac
  done
  if [[ $all == yes ]] && ((${#targets[@]} > 0)); then bad "--all builds every target: name no TARGET with it"; fi
fi

# cmake, man-db: the packaging tests build a consumer with CMake and render
# redlock(1) with `man -l`.
packages=(g++ meson ninja-build pkg-config libhiredis-dev libuv1-dev
          nlohmann-json3-dev doctest-dev redis-server libcli11-dev liblua5.1-0-dev
          libyaml-cpp-dev shellcheck libssl-dev openssl cmake man-db)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  packages+=(nodejs npm)
fi

install_packages "${packages[@]}" || exit 1

if [[ -f $BUILD_DIR/build.ninja && -d $BUILD_DIR/meson-info ]]; then
  log "$BUILD_DIR already configured"
else
  log "meson setup $BUILD_DIR ${MESON_ARGS}"
  # shellcheck disable=SC2086  # MESON_ARGS is a word list on purpose
  meson setup "$BUILD_DIR" ${MESON_ARGS}
fi

if [[ $all == yes ]]; then
  log "ninja -C $BUILD_DIR   (every target)"
  ninja -C "$BUILD_DIR"
else
  log "ninja -C $BUILD_DIR ${targets[*]}   (scripts/test.sh builds the rest)"
  ninja -C "$BUILD_DIR" "${targets[@]}"
fi

build_path=$BUILD_DIR
[[ $build_path == /* ]] || build_path=$PWD/$build_path
redlock_cmd=$build_path/cli/redlock
if [[ -n $LINK_DIR ]]; then
  mkdir -p "$LINK_DIR" || die "could not create $LINK_DIR"
  ln -sfn "$redlock_cmd" "$LINK_DIR/redlock" || die "could not link $LINK_DIR/redlock to $redlock_cmd"
  log "linked $LINK_DIR/redlock -> $redlock_cmd"
fi
on_path=$(command -v redlock 2>/dev/null || true)
if [[ -z $on_path ]]; then
  log "the redlock command is $redlock_cmd; it is not on your PATH. Either of:"
elif ! [[ $on_path -ef $redlock_cmd ]]; then
  log "the redlock command is $redlock_cmd; \`redlock\` on your PATH is another one, $on_path. Either of:"
fi
if [[ -z $on_path || ! $on_path -ef $redlock_cmd ]]; then
  note "  export PATH=\"$build_path/cli:\$PATH\"   # for this shell"
  note "  LINK_DIR=~/.local/bin scripts/bootstrap.sh   # a symlink in a directory on your PATH"
  note "  meson install -C $BUILD_DIR && ldconfig   # lib, headers, redlock(1), completion into /usr/local"
fi
log "done"
