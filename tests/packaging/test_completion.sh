#!/usr/bin/env bash
# test_completion.sh — the bash completion (completion/redlock) loads in a
# plain bash and completes the built redlock: `redlock <TAB>` gives the
# subcommands, `redlock run --<TAB>` run's options and the global ones (not
# another subcommand's), option values (files for --config, nothing to
# complete for --ttl), and after `run RESOURCE --` a command. The file is
# also checked with shellcheck.
#
#   test_completion.sh COMPLETION_FILE REDLOCK_BINARY
#
# Exit 0 when every case completes as expected; 1 names the cases that did
# not, with what they gave.
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

(($# == 2)) || die "usage: test_completion.sh COMPLETION_FILE REDLOCK_BINARY"
completion=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
redlock_bin=$2
[[ -f $completion ]] || die "no completion file $completion"
[[ -x $redlock_bin ]] || die "$redlock_bin is not an executable"
command -v shellcheck >/dev/null 2>&1 || die "shellcheck not found (scripts/bootstrap.sh installs it)"
shellcheck -s bash "$completion" || die "shellcheck found problems in $completion"

work=$(mktemp -d "${TMPDIR:-/tmp}/redlock-completion-test.XXXXXX")
cleanup() { rm -rf -- "$work"; }
on_exit cleanup
mkdir "$work/bin" "$work/files"
ln -s "$(cd "$(dirname "$redlock_bin")" && pwd)/$(basename "$redlock_bin")" "$work/bin/redlock"
touch "$work/files/nodes.json" "$work/files/notes.txt"

# complete_line LINE: what a TAB at the end of LINE offers, one per line,
# sorted — in a new bash (no rc files) that sourced only the completion, with
# redlock on PATH, by the function `complete -p redlock` names, with the
# words split as readline splits them (COMP_WORDBREAKS).
complete_line() {
  PATH=$work/bin:$PATH bash --norc --noprofile -c '
    set -u
    source "$1"
    spec=$(complete -p redlock) || { echo "no completion for redlock" >&2; exit 3; }
    [[ $spec =~ -F\ ([^ ]+) ]] || { echo "not a function completion: $spec" >&2; exit 3; }
    func=${BASH_REMATCH[1]}
    COMP_LINE=$2
    COMP_POINT=${#COMP_LINE}
    read -r -a COMP_WORDS <<<"$COMP_LINE"
    [[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
    COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
    "$func" redlock "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}" 2>/dev/null
    printf "%s\n" "${COMPREPLY[@]}" | sort -u
  ' complete_line "$completion" "$1"
}

failures=()
# expect LINE [+WORD...] [-WORD...]: completing LINE offers every +WORD and
# no -WORD; "=N" as the only check: exactly N candidates.
expect() {
  local line=$1 got check
  shift
  got=$(cd "$work/files" && complete_line "$line") || { failures+=("'$line': the completion failed"); return; }
  for check in "$@"; do
    case $check in
      +*) grep -qxF -e "${check#+}" <<<"$got" || failures+=("'$line' lacks ${check#+}; got: ${got//$'\n'/ }") ;;
      -*) ! grep -qxF -e "${check#-}" <<<"$got" || failures+=("'$line' offers ${check#-}; got: ${got//$'\n'/ }") ;;
      =*) (($(grep -c . <<<"$got" || true) == ${check#=})) || failures+=("'$line': expected ${check#=} candidates; got: ${got//$'\n'/ }") ;;
    esac
  done
}

subcommands=(acquire extend release run status nodes leader)
expect "redlock " "${subcommands[@]/#/+}" =${#subcommands[@]}
expect "redlock r" +release +run -acquire
expect "redlock leader --" +--watch +--json -run
expect "redlock --nodes redis://127.0.0.1:7001 " +run +nodes
expect "redlock --" +--nodes +--config +--json +--help +--version -run
expect "redlock run --" +--ttl +--wait +--no-wait +--fence +--fair +--conflict-exit-code +--lost-exit-code \
  +--kill-after +--max-hold +--help +--nodes +--config +--no-quarantine +--json -nodes -run -acquire -extend -release -status -nodes
expect "redlock run --" ---token
expect "redlock acquire --" +--token +--ttl +--wait +--fair ---fence
expect "redlock run --no-" +--no-wait +--no-quarantine ---nodes
expect "redlock run --config " +nodes.json +notes.txt
expect "redlock run --config no" +nodes.json +notes.txt
expect "redlock --config nodes.json run --t" +--ttl ---token
expect "redlock run --ttl " =0
expect "redlock run job -- ech" +echo
expect "redlock run --ttl 5000ms job -- " ---ttl
# Without "--": run's command starts at the first word after RESOURCE.
expect "redlock run -w 10 job ech" +echo
expect "redlock run -w 10 job echo --" ---ttl ---wait
expect "redlock run -c 'true' job --" +--ttl
expect "redlock run --" +--kill-after +--nonblock +--timeout +--command +--quiet
expect "redlock run -k " =0
expect "redlock run --ca" +--campaign ---identity
expect "redlock run --campaign --" +--identity +--value +--kill-after
expect "redlock run --campaign --value " =0
expect "redlock acquire --" +--quiet +--timeout
expect "redlock nodes --" +--watch +--interval +--json ---ttl
expect "redlock nodes --watch --interval " =0

if ((${#failures[@]} > 0)); then
  printf '%s\n' "${failures[@]/#/test_completion: }" >&2
  die "${#failures[@]} completion case(s) failed"
fi
log "every completion case passed"
