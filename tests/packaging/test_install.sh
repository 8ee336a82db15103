#!/usr/bin/env bash
# test_install.sh — a C++ project outside this one can use what `meson
# install` installs: the build is installed into a DESTDIR in a temp dir,
# consumer/consumer.cpp is built from it twice — with pkg-config (redlock.pc,
# PKG_CONFIG_SYSROOT_DIR) and with CMake (find_package(redlock), target
# redlock::redlock) — and both binaries take a fenced lock on three
# redis-servers, write with its fence to a fourth (the fenced store), and
# release the lock; this test starts the servers on free loopback ports
# (stopped by pid, also on failure). Also checks that the man page, the bash completion, the
# CMake package and the redlock command were installed.
#
#   test_install.sh BUILD_DIR
#
#   REDLOCK_SANITIZE  the build's b_sanitize (e.g. address,undefined): the
#                     consumer is built with the same -fsanitize, as the
#                     installed library needs its runtime
#   CXX               the compiler (default c++)
# Exit 0 when both consumers ran, 1 otherwise (saying which step failed).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

(($# == 1)) || die "usage: test_install.sh BUILD_DIR"
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
need_redis
for tool in cmake pkg-config ldd "${CXX:-c++}"; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (scripts/bootstrap.sh installs cmake, pkg-config and g++)"
done
san_flags=()
if [[ -n ${REDLOCK_SANITIZE:-} && ${REDLOCK_SANITIZE} != none ]]; then
  san_flags=("-fsanitize=$REDLOCK_SANITIZE")
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-install-test.XXXXXX")
master_pids=()
cleanup() {
  local pid
  for pid in "${master_pids[@]}"; do stop_pid "$pid" || true; done
  rm -rf -- "$work"
}
on_exit cleanup

# step NAME LOG COMMAND...: runs COMMAND with its output in LOG; on failure
# prints the end of LOG and fails the test, naming the step.
step() {
  local name=$1 out=$2
  shift 2
  if ! "$@" >"$out" 2>&1; then
    log "$name failed: $*"
    tail -n 40 "$out" | sed 's/^/  | /' >&2
    exit 1
  fi
}

# ---- install ----
destdir=$work/destdir
step "meson install" "$work/install.log" meson install -C "$build" --destdir "$destdir" --no-rebuild
mapfile -t pcs < <(find "$destdir" -name redlock.pc)
((${#pcs[@]} == 1)) || die "expected one installed redlock.pc, found ${#pcs[@]}"
prefix=$(sed -n 's/^prefix=//p' "${pcs[0]}")
version=$(sed -n 's/^Version: //p' "${pcs[0]}")
[[ -n $prefix && -n $version ]] || die "${pcs[0]} has no prefix or Version"
root=$destdir$prefix

# installed FIND_ARGS...: exactly one installed file under the prefix matches.
installed() {
  local found
  found=$(find "$root" "$@" | wc -l)
  ((found == 1)) || die "installed files matching '$*': expected 1, found $found"
}
installed -path '*/bin/redlock' -type f
installed -path '*/man1/redlock.1'
installed -path '*/share/bash-completion/completions/redlock' -type f
installed -path '*/cmake/redlock/redlockConfig.cmake'
installed -path '*/cmake/redlock/redlockConfigVersion.cmake'
installed -name 'libredlock.so.*' -type f
installed -path '*/include/redlock/fenced_store.hpp'
libdir=$(dirname "$(find "$root" -name 'libredlock.so.*' -type f)")
log "installed redlock $version into $root"

# runs_installed NAME BINARY: BINARY resolves libredlock from the DESTDIR
# (never a copy installed elsewhere), locks on the masters, writes to the
# store and unlocks.
runs_installed() {
  local name=$1 binary=$2 lib
  lib=$(LD_LIBRARY_PATH=$libdir ldd "$binary" | awk '$1 ~ /^libredlock\.so/ { print $3 }')
  [[ $lib == "$libdir"/* ]] || die "$name: $binary resolves libredlock to '${lib:-nothing}', not $libdir"
  step "$name: run" "$work/$name-run.log" env LD_LIBRARY_PATH="$libdir" "$binary" "$nodes" "$store"
  log "$name: $(cat "$work/$name-run.log")"
}

# ---- the masters ----
urls=()
for i in 1 2 3; do
  start_master any "$work/redis-$i" || die "could not start redis-server $i"
  master_pids+=("$MASTER_PID")
  urls+=("redis://127.0.0.1:$MASTER_PORT")
done
nodes=$(IFS=,; printf '%s' "${urls[*]}")
start_master any "$work/redis-store" || die "could not start the fenced store's redis-server"
master_pids+=("$MASTER_PID")
store="redis://127.0.0.1:$MASTER_PORT"

# ---- pkg-config ----
pc_dir=$(dirname "${pcs[0]}")
pc_flags=$(PKG_CONFIG_PATH=$pc_dir${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH} PKG_CONFIG_SYSROOT_DIR=$destdir \
  pkg-config --cflags --libs redlock) || die "pkg-config --cflags --libs redlock failed with $pc_dir"
[[ $pc_flags == *"-I$root/"* ]] || die "pkg-config's flags do not point into the DESTDIR: $pc_flags"
# shellcheck disable=SC2086  # pkg-config's output is a word list
step "pkg-config: build" "$work/pkgconfig-build.log" \
  "${CXX:-c++}" -std=c++20 "${san_flags[@]}" "$here/consumer/consumer.cpp" -o "$work/consumer-pkgconfig" $pc_flags
runs_installed pkgconfig "$work/consumer-pkgconfig"

# ---- CMake ----
step "cmake: configure" "$work/cmake-configure.log" \
  cmake -S "$here/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$root" \
  -DREDLOCK_VERSION_WANTED="$version" -DCMAKE_CXX_COMPILER="${CXX:-c++}" \
  -DCMAKE_CXX_FLAGS="${san_flags[*]}"
found_dir=$(sed -n 's/^redlock_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")
[[ $found_dir == "$root"/* ]] || die "cmake found redlock in '$found_dir', not under $root"
step "cmake: build" "$work/cmake-build.log" cmake --build "$work/cmake-build"
runs_installed cmake "$work/cmake-build/consumer"

log "pkg-config and CMake consumers built from the DESTDIR and ran: ok"
