#!/usr/bin/env bash
# test.sh — runs every test: installs what is missing and builds
# (scripts/bootstrap.sh), runs `meson test` on the normal build, then again on
# an ASan+UBSan build (build-asan). Ends with one line "N passed, N failed"
# summed over both runs; exits non-zero if anything failed. Skipped tests
# count as failures. After the normal build's tests it runs the benchmark
# suite once as a smoke test (`scripts/bench.sh --quick`: every program and
# scenario must run; no timing is asserted), counted as one more test; its
# report goes to build/bench-smoke/, not docs/.
#   --quick   skip the sanitizer build
set -euo pipefail
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  echo "usage: $me [--quick]" >&2
}

quick=no
for arg in "$@"; do
  case $arg in
    --quick) quick=yes ;;
    -h | --help) usage; exit 0 ;;
    *) bad "unknown argument '$arg'" ;;
  esac
done

total_passed=0
total_failed=0
problems=()
failure_reports=()

# summary_value LOG KEY: the number on meson's last "KEY: N" summary line
# (empty if there is none).
summary_value() {
  awk -v key="$2:" '
    index($0, key) == 1 {
      rest = substr($0, length(key) + 1)
      gsub(/[ \t\r]/, "", rest)
      if (rest ~ /^[0-9]+$/) v = rest
    }
    END { print v }' "$1"
}

# count_results LOG LABEL: add meson's summary in LOG to the totals.
count_results() {
  local file=$1 label=$2 ok xfail fail xpass skipped timeout
  ok=$(summary_value "$file" "Ok")
  xfail=$(summary_value "$file" "Expected Fail")
  fail=$(summary_value "$file" "Fail")
  xpass=$(summary_value "$file" "Unexpected Pass")
  skipped=$(summary_value "$file" "Skipped")
  timeout=$(summary_value "$file" "Timeout")
  if [[ -z $ok && -z $fail ]]; then
    if grep -q '^No tests defined' "$file"; then
      problems+=("$label: meson found no tests to run")
    else
      problems+=("$label: no meson test summary found in $file (build or test run broken)")
    fi
    total_failed=$((total_failed + 1))
    return
  fi
  local passed=$((${ok:-0} + ${xfail:-0}))
  local failed=$((${fail:-0} + ${timeout:-0} + ${xpass:-0} + ${skipped:-0}))
  if ((passed + failed == 0)); then
    problems+=("$label: no tests ran")
    failed=1
  fi
  if ((${fail:-0} > 0)); then problems+=("$label: ${fail} failed"); fi
  if ((${timeout:-0} > 0)); then problems+=("$label: ${timeout} timed out"); fi
  if ((${xpass:-0} > 0)); then problems+=("$label: ${xpass} unexpectedly passed"); fi
  if ((${skipped:-0} > 0)); then
    problems+=("$label: ${skipped} skipped (counted as failed: every test must run)")
  fi
  log "$label: $passed passed, $failed failed"
  total_passed=$((total_passed + passed))
  total_failed=$((total_failed + failed))
}

# run_suite BUILD_DIR LABEL MESON_ARGS [ENV=VALUE...]: build via bootstrap,
# then meson test with the given environment.
run_suite() {
  local dir=$1 label=$2 meson_args=$3
  shift 3
  local out="$dir/test-run.log"
  log "$label: bootstrap + build ($dir)"
  if ! BUILD_DIR=$dir MESON_ARGS=$meson_args bash scripts/bootstrap.sh --all </dev/null; then
    problems+=("$label: bootstrap/build failed")
    total_failed=$((total_failed + 1))
    return
  fi
  log "$label: meson test -C $dir"
  local rc=0
  env "$@" meson test -C "$dir" --print-errorlogs </dev/null 2>&1 | tee "$out" || rc=$?
  if ((rc != 0)); then log "$label: meson test exited with status $rc"; fi
  count_results "$out" "$label"
  collect_failures "$dir" "$label"
}

# collect_failures BUILD_DIR LABEL: for each test that did not pass in
# BUILD_DIR's meson-logs/testlog.json, keep its name and the part of its output
# that says why (doctest's failure blocks, else the last lines), so the end of
# this script's output names them even when only that end is read.
collect_failures() {
  local json="$1/meson-logs/testlog.json" report
  [[ -f $json ]] || return 0
  report=$(python3 - "$json" "$2" <<'PY'
import json, sys
path, label = sys.argv[1], sys.argv[2]
for line in open(path, encoding="utf-8", errors="replace"):
    try:
        test = json.loads(line)
    except ValueError:
        continue
    if test.get("result") in ("OK", "EXPECTEDFAIL"):
        continue
    out = (test.get("stdout") or "").splitlines()
    blocks, cur = [], []
    for text in out:
        if text.startswith("=" * 20):
            if any("ERROR" in t or "FATAL" in t for t in cur):
                blocks.append(cur)
            cur = []
        else:
            cur.append(text)
    shown = [t for b in blocks[:4] for t in b[:25]] or out[-40:]
    print(f"--- {label}: {test.get('name')}: {test.get('result')} "
          f"(exit {test.get('returncode')}, {test.get('duration', 0):.1f} s)")
    for t in shown[:80]:
        print("    " + t[:300])
PY
) || return 0
  if [[ -n $report ]]; then failure_reports+=("$report"); fi
}

run_suite build "build" "${MESON_ARGS:-}"

# bench_smoke: scripts/bench.sh --quick on the normal build; pass = exit 0.
bench_smoke() {
  local out=build/bench-smoke attempt why
  mkdir -p "$out"
  for attempt in 1 2; do
    log "bench smoke: scripts/bench.sh --quick --no-build (log: $out/bench.log)"
    if BUILD_DIR=build BENCH_DOCS_DIR=$out bash scripts/bench.sh --quick --no-build </dev/null >"$out/bench.log" 2>&1; then
      log "bench smoke: 1 passed, 0 failed"
      total_passed=$((total_passed + 1))
      return
    fi
    # Why, in one line for the summary: the failed runs, or bench.sh's own
    # last word when it stopped before any run.
    why=$(grep -E 'FAILED \(' "$out/bench.log" | head -n 3 | tr '\n' ';')
    [[ -n $why ]] || why=$(tail -n 1 "$out/bench.log")
    log "bench smoke: failed ($why); the end of $out/bench.log:"
    tail -n 30 "$out/bench.log" >&2
    cp "$out/bench.log" "$out/bench.$attempt.log"
    # A timed smoke on a shared machine can miss a deadline (a run killed by
    # its time limit, a process not ready in time); it is run once more. A
    # run that exits 3 found a SAFETY VIOLATION or a lost lease: never
    # retried.
    if ((attempt == 1)) && ! grep -q -E 'FAILED \(.*exit 3\)' "$out/bench.log"; then
      problems+=("bench smoke: failed once, run again: $why (see $out/bench.1.log)")
      continue
    fi
    problems+=("bench smoke: scripts/bench.sh --quick failed: $why (see $out/bench.log)")
    total_failed=$((total_failed + 1))
    return
  done
}
bench_smoke

if [[ $quick == no ]]; then
  run_suite build-asan "build-asan" \
    "-Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug" \
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  log "--quick: sanitizer build skipped"
fi

for r in "${failure_reports[@]}"; do
  printf '%s\n' "$r"
done
for p in "${problems[@]}"; do
  log "problem: $p"
done
echo "$total_passed passed, $total_failed failed"
if ((total_failed > 0)); then
  exit 1
fi
