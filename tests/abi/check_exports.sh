#!/usr/bin/env bash
# check_exports.sh — libredlock.so exports only the public API.
#
#   check_exports.sh LIBRARY INCLUDE_DIR
#   check_exports.sh --installed BUILD_DIR
#
# Every symbol `nm -DC --defined-only` lists must be one that a REDLOCK_API
# declaration in INCLUDE_DIR/redlock/*.hpp (and *.hpp.in, the templates of
# generated headers, in the source tree) names: redlock::X or
# redlock::X::member (also its typeinfo or vtable), where X is a class,
# struct or function declared with REDLOCK_API. Nothing in a detail
# namespace, nothing of std:: or nlohmann::, no internal class of redlock::.
# With --installed the build is installed (runtime and devel files) into a
# temporary destdir and the installed library is checked against the
# installed headers. Exits 1 and prints the offending symbols on failure.
set -euo pipefail

fail() { printf 'check_exports: %s\n' "$*" >&2; exit 1; }

if [[ ${1-} == --installed ]]; then
  (($# == 2)) || fail "usage: check_exports.sh --installed BUILD_DIR"
  destdir=$(mktemp -d)
  trap 'rm -rf -- "$destdir"' EXIT
  meson install -C "$2" --destdir "$destdir" --no-rebuild --quiet --tags runtime,devel >/dev/null
  mapfile -t libs < <(find "$destdir" -name 'libredlock.so.*' -type f)
  ((${#libs[@]} == 1)) || fail "expected one installed libredlock.so.*, found: ${libs[*]-none}"
  mapfile -t incs < <(find "$destdir" -path '*/redlock/export.hpp' -printf '%h/..\n')
  ((${#incs[@]} == 1)) || fail "expected one installed redlock/export.hpp, found ${#incs[@]}"
  set -- "${libs[0]}" "${incs[0]}"
fi
(($# == 2)) || fail "usage: check_exports.sh LIBRARY INCLUDE_DIR"
library=$1
shopt -s nullglob
headers=("$2"/redlock/*.hpp "$2"/redlock/*.hpp.in)
shopt -u nullglob

# The names the public headers export: `class REDLOCK_API Client`,
# `struct REDLOCK_API Lock`, `REDLOCK_API Result<Config> config_from_env(`.
mapfile -t public_names < <(
  sed -nE -e 's/^(class|struct) REDLOCK_API ([A-Za-z_][A-Za-z0-9_]*).*/\2/p' \
          -e 's/^REDLOCK_API [^(]*[^A-Za-z0-9_(]([A-Za-z_][A-Za-z0-9_]*)\(.*/\1/p' \
          "${headers[@]}" | sort -u)
((${#public_names[@]} > 0)) || fail "no REDLOCK_API declaration found in $2/redlock"

symbols=$(nm -DC --defined-only "$library" | cut -d' ' -f3-)
[[ -n $symbols ]] || fail "$library exports nothing"

bad=()
while IFS= read -r symbol; do
  name=$symbol
  for prefix in 'typeinfo for ' 'typeinfo name for ' 'vtable for '; do
    name=${name#"$prefix"}
  done
  ok=false
  if [[ $name =~ ^redlock::([A-Za-z_][A-Za-z0-9_]*) && $name != *detail::* ]]; then
    for public in "${public_names[@]}"; do
      [[ ${BASH_REMATCH[1]} == "$public" ]] && ok=true && break
    done
  fi
  $ok || bad+=("$symbol")
done <<<"$symbols"

count=$(wc -l <<<"$symbols")
if ((${#bad[@]} > 0)); then
  printf 'check_exports: %s exports %d symbol(s) outside the public API (of %d):\n' \
    "$library" "${#bad[@]}" "$count" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
printf 'check_exports: %s exports %d symbols, all public API (%d REDLOCK_API names)\n' \
  "$library" "$count" "${#public_names[@]}"
