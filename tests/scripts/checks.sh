# shellcheck shell=bash
# checks.sh — the shell tests' checks, sourced after scripts/lib.sh:
# `check WHAT COMMAND...` counts a check and names it when COMMAND fails;
# `checks_done` ends the test: exit 1 with the count of failures (after
# running the command CHECKS_ON_FAIL names, if any), else a line saying all
# passed.

failures=0
checks=0
check() {  # check WHAT COMMAND...: COMMAND must succeed
  local what=$1
  shift
  checks=$((checks + 1))
  if ! "$@"; then
    failures=$((failures + 1))
    log "FAIL: $what"
  fi
}

CHECKS_ON_FAIL=
checks_done() {
  if ((failures > 0)); then
    if [[ -n $CHECKS_ON_FAIL ]]; then "$CHECKS_ON_FAIL"; fi
    die "$failures of $checks checks failed"
  fi
  log "all $checks checks passed"
}
