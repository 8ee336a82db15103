#!/usr/bin/env bash
# run_shellcheck.sh — every shell script of the project through shellcheck
# (Debian package shellcheck): scripts/*.sh, tests/**/*.sh and the files in
# .ci/ that start with a sh or bash #! line. The list is found when the test
# runs, so a new script is checked without a change here. Sourced files are
# followed (-x): each script's `# shellcheck source=` directive names them.
# Exit 0 when every script is clean, 1 otherwise (or if shellcheck is missing).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

cd "${REDLOCK_SOURCE_ROOT:-$(dirname "${BASH_SOURCE[0]}")/../..}"
command -v shellcheck >/dev/null 2>&1 ||
  die "shellcheck not found on PATH (Debian package shellcheck; scripts/bootstrap.sh installs it)"

shopt -s globstar nullglob
files=(scripts/*.sh tests/**/*.sh)
for f in .ci/*; do
  [[ -f $f ]] || continue
  first=
  IFS= read -r first <"$f" || true
  if [[ $first =~ ^#!.*[/[:space:]](ba)?sh([[:space:]]|$) ]]; then files+=("$f"); fi
done
((${#files[@]} > 0)) || die "no shell scripts found under $PWD"

if shellcheck --external-sources "${files[@]}"; then
  log "${#files[@]} scripts clean: ${files[*]}"
else
  die "shellcheck found the problems above (${#files[@]} scripts checked)"
fi
