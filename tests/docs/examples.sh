#!/usr/bin/env bash
# examples.sh — runs the command examples of the docs against five
# redis-server masters of its own, and fails if one is broken.
#
#   tests/docs/examples.sh REDLOCK_BINARY FILE.md...
#
# Which blocks run (the convention the docs follow):
#   ```sh       a script: the whole block runs in one `bash -e -o pipefail`,
#               which must exit 0.
#   ```console  a transcript, as is a ``` block whose first line starts
#   (or ``` + $) with "$ ": each "$ COMMAND" line runs in a bash of its own;
#               the lines after it, up to the next "$ ", are its output
#               (stdout and stderr together), which must match: "…" stands
#               for any text, a line of "…" alone for any lines. Each
#               command must exit 0.
# Other blocks (json, cpp, cmake, a synopsis) are not commands. A comment
# on the line right before a block changes it:
#   <!-- example: skip (REASON) -->  not run; counted and named, with REASON
#   <!-- example: exit N -->         every command (or the script) exits N
#   <!-- example: no-nodes -->       run without REDLOCK_NODES/REDLOCK_CONFIG
#   <!-- example: any-output -->     a transcript whose output is a sample of
#                                    another bed (tokens, times, ports): only
#                                    the exit status is checked
#   <!-- example: needs CMD -->      skipped, and named, when CMD is missing
# (words combine: <!-- example: exit 2, no-nodes -->).
#
# What the examples find: REDLOCK_NODES names the five masters (on free
# loopback ports, in a temp dir) and REDLOCK_CONFIG a file with the same
# nodes and "quarantine": false, as the CLI's integration tests run
# (--no-quarantine): the masters are seconds old, and a new bed sits out
# about 61 s. The built `redlock` is first on PATH. The working directory
# holds stand-ins that exit 0 for the scripts the examples name
# (./report.sh, ./job.sh, ./deploy.sh, ./apply-batch.sh), and PATH stand-ins
# for the commands a test cannot run for real (make, vi, run-backup-step-N);
# scripts/testbed.sh is a stand-in too (`up`, `down`: nothing to do; `urls`:
# the five masters' URLs), as the real one takes the fixed ports 7001-7005.
# HOME is a temp dir. Each file starts on empty masters (FLUSHALL).
# Every process it starts is stopped by pid on exit.
# Exit 0 when every block that ran passed, 1 otherwise (each failure shown).
set -euo pipefail
# shellcheck source-path=SCRIPTDIR/../../scripts source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

(($# >= 2)) || bad "expected REDLOCK_BINARY FILE.md..."
redlock_bin=$(realpath "$1")
shift
[[ -x $redlock_bin ]] || die "$redlock_bin: not an executable"
need_redis

with_scratch redlock-doc-examples
tmp=$SCRATCH

# ---- the bed: five masters, the stand-ins ----------------------------------------------

ports=()
for n in 1 2 3 4 5; do
  start_master any "$tmp/master$n" || die "could not start master $n"
  SCRATCH_PIDS+=("$MASTER_PID")
  ports+=("$MASTER_PORT")
done
urls=$(printf 'redis://127.0.0.1:%s,' "${ports[@]}")
urls=${urls%,}

mkdir -p "$tmp/bin" "$tmp/work/scripts" "$tmp/home"
ln -s "$redlock_bin" "$tmp/bin/redlock"
stand_in() {  # stand_in PATH: an executable that does nothing and exits 0
  printf '#!/bin/sh\n# a stand-in for the docs examples (tests/docs/examples.sh)\nexit 0\n' >"$1"
  chmod +x "$1"
}
for f in report.sh job.sh deploy.sh apply-batch.sh; do stand_in "$tmp/work/$f"; done
for f in make vi run-backup-step-1 run-backup-step-2; do stand_in "$tmp/bin/$f"; done
cat >"$tmp/work/scripts/testbed.sh" <<EOF
#!/bin/sh
# A stand-in for scripts/testbed.sh: the test's own five masters.
case \${1:-} in
  up|down) exit 0 ;;
  urls) echo '$urls' ;;
  *) echo "testbed.sh stand-in: '\$*' is not supported (tests/docs/examples.sh)" >&2; exit 2 ;;
esac
EOF
chmod +x "$tmp/work/scripts/testbed.sh"
nodes_json=$(printf '"redis://127.0.0.1:%s",' "${ports[@]}")
printf '{"nodes": [%s], "quarantine": false}\n' "${nodes_json%,}" >"$tmp/config.json"

# example_env COMMAND...: COMMAND in the examples' environment (no-nodes:
# without REDLOCK_NODES and REDLOCK_CONFIG), in the working directory.
no_nodes=no
any_output=no
example_env() {
  local env=(env -u REDLOCK_NODES -u REDLOCK_CONFIG -u REDLOCK_PASSWORD -u REDLOCK_PASSWORD_FILE -u REDLOCK_USER
             -u REDLOCK_TLS_CA -u REDLOCK_TLS_CERT -u REDLOCK_TLS_KEY
             "PATH=$tmp/bin:$PATH" "HOME=$tmp/home")
  [[ $no_nodes == yes ]] || env+=("REDLOCK_NODES=$urls" "REDLOCK_CONFIG=$tmp/config.json")
  (cd "$tmp/work" && timeout 20 "${env[@]}" "$@")
}

# ---- the blocks ----------------------------------------------------------------------------

ran=0
failed=0
skipped=()
failures=()

fail() {  # fail WHERE WHY OUTPUT
  failed=$((failed + 1))
  failures+=("$1")
  log "FAIL $1: $2"
  [[ -z $3 ]] || printf '%s\n' "$3" | sed 's/^/  | /' >&2
}

# glob_of TEXT: TEXT as a bash pattern that matches it literally, but "…"
# matches anything.
glob_of() {
  local p=$1
  p=${p//\\/\\\\}
  p=${p//\*/\\*}
  p=${p//\?/\\?}
  p=${p//\[/\\[}
  p=${p//…/*}
  printf '%s' "$p"
}

# run_script WHERE BODY EXIT: the block as one script.
run_script() {
  local where=$1 body=$2 want=$3 rc=0 out
  printf '%s\n' "$body" >"$tmp/block.sh"
  out=$(example_env bash -e -o pipefail "$tmp/block.sh" 2>&1 </dev/null) || rc=$?
  ran=$((ran + 1))
  if [[ $rc != "$want" ]]; then
    fail "$where" "the script exited $rc, not $want" "$out"
  else
    log "ok $where (script, exit $rc)"
  fi
}

# run_transcript WHERE BODY EXIT: each "$ " command, its output checked
# (unless any_output is yes).
run_transcript() {
  local where=$1 want=$3 line cmd='' expected='' have=no
  local -a cmds=() outs=()
  while IFS= read -r line; do
    if [[ $line == '$ '* ]]; then
      if [[ $have == yes ]]; then cmds+=("$cmd"); outs+=("$expected"); fi
      cmd=${line#'$ '}
      expected=
      have=yes
    elif [[ $have == yes ]]; then
      expected+=${expected:+$'\n'}$line
    fi
  done <<<"${2%$'\n'}"
  if [[ $have == yes ]]; then cmds+=("$cmd"); outs+=("$expected"); fi
  local i rc out pattern
  for i in "${!cmds[@]}"; do
    rc=0
    out=$(example_env bash -c "${cmds[i]}" 2>&1 </dev/null) || rc=$?
    ran=$((ran + 1))
    pattern=$(glob_of "${outs[i]}")
    # shellcheck disable=SC2053  # the right side is a pattern on purpose
    if [[ $rc != "$want" ]]; then
      fail "$where: \$ ${cmds[i]}" "exited $rc, not $want" "$out"
    elif [[ $any_output == no && $out != $pattern ]]; then
      fail "$where: \$ ${cmds[i]}" "the output differs from the doc's" \
        "$(printf 'doc:\n%s\nactual:\n%s' "${outs[i]}" "$out")"
    else
      log "ok $where: \$ ${cmds[i]}"
    fi
  done
}

fence_open='^```([a-z]*)[[:space:]]*$'
fence_close='^```[[:space:]]*$'
directive_line='^<!-- example: (.*) -->$'

# run_file FILE: every block of FILE, in order.
run_file() {
  local file=$1 n=0 line prev='' in=no lang='' start=0 body='' directive='' word want reason needs
  local p
  for p in "${ports[@]}"; do redis-cli -h 127.0.0.1 -p "$p" flushall </dev/null >/dev/null; done
  while IFS= read -r line || [[ -n $line ]]; do
    n=$((n + 1))
    if [[ $in == no ]]; then
      if [[ $line =~ $fence_open ]]; then
        in=yes
        lang=${BASH_REMATCH[1]}
        start=$n
        body=
        directive=
        [[ $prev =~ $directive_line ]] && directive=${BASH_REMATCH[1]}
      fi
      prev=$line
      continue
    fi
    if [[ ! $line =~ $fence_close ]]; then
      body+=$line$'\n'
      continue
    fi
    in=no
    prev=$line
    local where="${file##*/}:$start"
    local kind=
    if [[ $lang == sh ]]; then
      kind=script
    elif [[ $lang == console || ($lang == "" && $body == '$ '*) ]]; then
      kind=transcript
    fi
    if [[ -z $kind ]]; then
      [[ -z $directive ]] || fail "$where" "<!-- example: $directive --> before a block that is not a command" ""
      continue
    fi
    want=0
    no_nodes=no
    any_output=no
    reason=
    if [[ $directive =~ ^skip\ \((.+)\)$ ]]; then
      reason=${BASH_REMATCH[1]}
    elif [[ -n $directive ]]; then
      local -a words
      IFS=, read -ra words <<<"$directive"
      for word in "${words[@]}"; do
        word=${word# }
        case $word in
          exit\ [0-9]*) want=${word#exit } ;;
          no-nodes) no_nodes=yes ;;
          any-output) any_output=yes ;;
          needs\ *)
            needs=${word#needs }
            command -v "$needs" >/dev/null 2>&1 || reason="needs $needs, which is not installed"
            ;;
          *) fail "$where" "unknown directive '$word' in <!-- example: $directive -->" "" ;;
        esac
      done
    fi
    if [[ -n $reason ]]; then
      skipped+=("$where ($reason)")
      log "skip $where: $reason"
      continue
    fi
    if [[ $kind == script ]]; then
      run_script "$where" "$body" "$want"
    else
      run_transcript "$where" "$body" "$want"
    fi
  done <"$file"
  [[ $in == no ]] || fail "${file##*/}:$start" "a block that is never closed" ""
}

for f in "$@"; do
  [[ -r $f ]] || die "$f: cannot read it"
  run_file "$f"
done

log "${#skipped[@]} blocks skipped:"
for s in "${skipped[@]}"; do note "  $s"; done
if ((failed > 0)); then
  log "$failed of $ran examples failed:"
  for s in "${failures[@]}"; do note "  $s"; done
  exit 1
fi
((ran > 0)) || die "no example ran"
log "all $ran examples passed (${#skipped[@]} blocks skipped, named above)"
