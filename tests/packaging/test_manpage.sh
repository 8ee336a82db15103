#!/usr/bin/env bash
# test_manpage.sh — man/redlock.1 renders with man-db without a warning
# (`MANWIDTH=80 man --warnings -l`), fits 80 columns (in ASCII), carries the project's
# version, and names every subcommand and option the built redlock lists in
# its --help (read by the bash completion's parser, completion/redlock), so
# a new option without its man page entry fails here.
#
#   test_manpage.sh MANPAGE REDLOCK_BINARY COMPLETION_FILE VERSION
#
# Exit 0 when all holds; 1 says what does not.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

(($# == 4)) || die "usage: test_manpage.sh MANPAGE REDLOCK_BINARY COMPLETION_FILE VERSION"
page=$1 redlock_bin=$2 completion=$3 version=$4
[[ -f $page ]] || die "no man page $page"
command -v man >/dev/null 2>&1 || die "man not found (Debian packages man-db and groff-base; scripts/bootstrap.sh installs them)"

problems=()
err=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null) || problems+=("man -l failed: $err")
[[ -z $err ]] || problems+=("man --warnings -l printed: $err")
wide=$(LC_ALL=C MANWIDTH=80 man -l "$page" 2>/dev/null | awk 'length > 80' | head -n 3)
[[ -z $wide ]] || problems+=("lines wider than 80 columns: $wide")
grep -q "^\.TH REDLOCK 1 \"[^\"]*\" \"redlock $version\"" "$page" ||
  problems+=("the .TH line does not name redlock $version: $(grep '^\.TH' "$page")")

# The CLI's subcommands and options, as the completion reads them.
# shellcheck source-path=SCRIPTDIR/../../completion source=redlock
source "$completion"
top=$(_redlock_help "$redlock_bin")
[[ -n $top ]] || die "$redlock_bin --help printed nothing"
mapfile -t subs < <(_redlock_subcommands "$top")
((${#subs[@]} > 0)) || die "no subcommands found in $redlock_bin --help"
options=$(_redlock_options "$top")
for sub in "${subs[@]}"; do
  grep -qx "\.B $sub" "$page" || problems+=("subcommand $sub is not in the SYNOPSIS (.B $sub)")
  options+=$'\n'$(_redlock_options "$(_redlock_help "$redlock_bin" "$sub")")
done
while read -r option _; do
  [[ -n $option ]] || continue
  roff=${option//-/\\-}
  grep -qF -e "$roff" "$page" || problems+=("option $option (written $roff) is not in the page")
done < <(sort -u <<<"$options")

if ((${#problems[@]} > 0)); then
  printf 'test_manpage: %s\n' "${problems[@]}" >&2
  die "${#problems[@]} problem(s) with $page"
fi
log "$page renders without warnings and names all ${#subs[@]} subcommands and $(sort -u <<<"$options" | grep -c .) options"
