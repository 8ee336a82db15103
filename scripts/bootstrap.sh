#!/usr/bin/env bash
# bootstrap.sh — install the Debian packages the build needs (only the missing
# ones), configure the meson build dir once, and build it.
#   BUILD_DIR   build directory (default: build)
#   MESON_ARGS  extra arguments for `meson setup` (word-split), e.g.
#               MESON_ARGS="-Db_sanitize=address,undefined -Dbuildtype=debug"
# Idempotent: a second run installs nothing and only runs ninja.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD_DIR=${BUILD_DIR:-build}
MESON_ARGS=${MESON_ARGS:-}

packages=(g++ meson ninja-build pkg-config libhiredis-dev libuv1-dev
          nlohmann-json3-dev doctest-dev redis-server libcli11-dev liblua5.1-0-dev
          libyaml-cpp-dev shellcheck libssl-dev openssl)

install_packages "${packages[@]}" || exit 1

if [[ -f $BUILD_DIR/build.ninja && -d $BUILD_DIR/meson-info ]]; then
  log "$BUILD_DIR already configured"
else
  log "meson setup $BUILD_DIR ${MESON_ARGS}"
  # shellcheck disable=SC2086  # MESON_ARGS is a word list on purpose
  meson setup "$BUILD_DIR" ${MESON_ARGS}
fi

log "ninja -C $BUILD_DIR"
ninja -C "$BUILD_DIR"
log "done"
