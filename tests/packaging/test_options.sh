#!/usr/bin/env bash
# test_options.sh — the packagers' configuration: `meson setup` with
# -Dtests=false -Dtools=false -Dbench=false succeeds and defines only the
# library and the CLI (libredlock.so, the redlock command, and the two
# static archives they are made of), needs none of the test or tool
# dependencies (doctest, yaml-cpp, Lua), and still installs the headers,
# redlock.pc, the CMake package, the man page and the completion. A
# contradictory choice (-Dtests=true -Dtools=false) fails with a message
# that says which options to use. Configures only: nothing is compiled.
#
#   test_options.sh SOURCE_DIR
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

(($# == 1)) || die "usage: test_options.sh SOURCE_DIR"
src=$1
command -v python3 >/dev/null 2>&1 || die "python3 not found (meson needs it too)"
work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-options-test.XXXXXX")
cleanup() { rm -rf -- "$work"; }
on_exit cleanup

if ! meson setup "$work/lean" "$src" -Dtests=false -Dtools=false -Dbench=false >"$work/lean.log" 2>&1; then
  tail -n 30 "$work/lean.log" >&2
  die "meson setup -Dtests=false -Dtools=false -Dbench=false failed"
fi
targets=$(meson introspect --targets "$work/lean" |
  python3 -c 'import json, sys; print("\n".join(sorted(t["type"] + ":" + t["name"] for t in json.load(sys.stdin))))')
want=$'executable:redlock\nshared library:redlock\nstatic library:redlock_internal\nstatic library:redlock_process'
[[ $targets == "$want" ]] || die "the lean build defines other targets than lib + CLI:"$'\n'"$targets"
deps=$(meson introspect --dependencies "$work/lean" |
  python3 -c 'import json, sys; print(" ".join(sorted(d["name"] for d in json.load(sys.stdin))))')
for dep in doctest yaml-cpp lua5.1; do
  [[ " $deps " != *" $dep "* ]] || die "the lean build looks up $dep (dependencies: $deps)"
done
! grep -q 'doctest' "$work/lean.log" || die "the lean build checks for doctest"
installed=$(meson introspect --installed "$work/lean" |
  python3 -c 'import json, sys; print("\n".join(sorted(json.load(sys.stdin).values())))')
for path in /bin/redlock /include/redlock/redlock.hpp /include/redlock/version.hpp /pkgconfig/redlock.pc \
  /cmake/redlock/redlockConfig.cmake /cmake/redlock/redlockConfigVersion.cmake /man1/redlock.1 \
  /bash-completion/completions/redlock; do
  grep -q -e "$path\$" <<<"$installed" || die "the lean build does not install *$path; it installs:"$'\n'"$installed"
done
log "-Dtests=false -Dtools=false -Dbench=false: lib + CLI only ($(wc -l <<<"$targets") targets; dependencies: $deps)"

if meson setup "$work/bad" "$src" -Dtests=true -Dtools=false >"$work/bad.log" 2>&1; then
  die "meson setup -Dtests=true -Dtools=false succeeded; it should say that the tests need the tools"
fi
grep -q -e '-Dtests=true needs -Dtools=true' "$work/bad.log" ||
  die "meson setup -Dtests=true -Dtools=false failed without saying why: $(tail -n 5 "$work/bad.log")"
log "-Dtests=true -Dtools=false: refused with the hint"
