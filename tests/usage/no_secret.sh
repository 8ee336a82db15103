#!/usr/bin/env bash
# no_secret.sh REDLOCK [FLOOR] — no password in what `redlock` prints
# (nor the benchmark's floor program, FLOOR, given a URL by mistake). Node URLs in
# every spelling, well-formed or not, each holding a distinctive password,
# reach redlock through --nodes, REDLOCK_NODES, a --config file (also as
# wrong JSON values and in JSON syntax errors), stray arguments and option
# values; well-formed ones go to 127.0.0.1:1 (nothing listens: refused at
# once) for `nodes --json` and `acquire --json`. Passes when neither
# stdout nor stderr holds the password, its percent-decoded form, or any
# 4-character slice of either.
set -uo pipefail
redlock=$1
floor=${2:-}
dir=$(mktemp -d)
trap 'rm -rf -- "$dir"' EXIT
failures=0
runs=0

# check PASSWORD DESCRIPTION CMD...: run CMD (stdin closed) and look for
# the password in its output.
check() {
  local password=$1 what=$2
  shift 2
  local out
  out=$("$@" 2>&1 </dev/null)
  runs=$((runs + 1))
  if [[ -z $out ]]; then
    echo "no_secret: $what: no output at all" >&2
    failures=$((failures + 1))
    return
  fi
  local form i
  for form in "$password" "${password//%2F//}"; do
    for ((i = 0; i + 4 <= ${#form}; i++)); do
      if [[ $out == *"${form:i:4}"* ]]; then
        printf 'no_secret: %s: the output holds "%s" of the password %s:\n%s\n' "$what" "${form:i:4}" "$password" "$out" >&2
        failures=$((failures + 1))
        return
      fi
    done
  done
}

passwords=('S3cr/et@pw' 'p%2Fw0rdZ' 'aB3+xY/9kL==')
# A host after the password: any password fits.
with_host=(
  'redis://user:{pw}@host:6379' 'redis://:{pw}@host:6379' 'redis://{pw}@host' 'redis://user:{pw}@host:99999'
  'redis://user:{pw}@host:bad' 'redis://user:{pw}@ho!st' 'redis://user:{pw}@host/abc' 'redis://user:{pw}@host@o:1'
  'rediss://user:{pw}@[zz]:1' 'redis://u%zz:{pw}@host' 'redis://user:{pw}%@host' 'redis://user:{pw}@'
  'user:{pw}@host:6379' ':{pw}@host' '//:{pw}@host' 'redis:/:{pw}@host' 'http://user:{pw}@host'
  'user:{pw}@redis://host' 'unix://:{pw}@/tmp/r.sock?db=x' 'unix://:{pw}@tmp/r.sock'
)
# "@host" forgotten: only for passwords without '@' (with one, the part
# after it reads as the host).
without_host=('redis://user:{pw}' 'redis://:{pw}' 'redis://user:{pw}/0' 'user:{pw}' 'unix://:{pw}' 'redis://[::1]:{pw}')
# Good URLs, to a port where nothing listens.
reachable=('redis://user:{pw}@127.0.0.1:1' 'redis://:{pw}@127.0.0.1:1/2' 'rediss://:{pw}@127.0.0.1:1')
configs=(
  '{"nodes": {"a": "redis://:{pw}@h"}}' '{"nodes": [["redis://:{pw}@h"]]}' '{"nodes": [123, "redis://:{pw}@h"]}'
  '{"nodes": "redis://:{pw}@h"}' '{"nodes": [{"url": "redis://h", "password": "{pw}"}]}'
  '{"nodes": ["redis://h"], "default_ttl_ms": "redis://:{pw}@h"}' '{"nodes": ["redis://h"], "redis://:{pw}@h": 1}'
  '{"nodes": ["redis://:{pw}@h"' '{"nodes": ["redis://:{pw}@h"] x}' '{"nodes": [redis://:{pw}@h]}'
  '{"nodes": ["redis://h"], "user": "{pw}' '{"nodes": ["redis://:{pw}\q@h"]}' '{pw}'
)

for pw in "${passwords[@]}"; do
  urls=("${with_host[@]}")
  [[ $pw == *@* ]] || urls+=("${without_host[@]}")
  # Each process costs tens of ms: every URL by the node sources, the
  # first few also as stray words and option values (one mask covers
  # every usage error, cli/main.cpp).
  n=0
  for template in "${urls[@]}" "${reachable[@]}"; do
    url=${template//\{pw\}/$pw}
    check "$pw" "--nodes $url" "$redlock" --nodes "$url" nodes --json
    check "$pw" "REDLOCK_NODES=$url" env REDLOCK_NODES="$url" "$redlock" nodes
    printf '{"nodes": ["%s"]}' "$url" >"$dir/config.json"
    check "$pw" "config with $url" "$redlock" --config "$dir/config.json" nodes --json
    check "$pw" "--bogus=$url" "$redlock" --nodes redis://127.0.0.1:1 --bogus="$url" nodes
    ((n++ < 5)) || continue
    check "$pw" "stray argument $url" "$redlock" --nodes redis://127.0.0.1:1 status job "$url"
    check "$pw" "--json=$url" "$redlock" --nodes redis://127.0.0.1:1 --json="$url" nodes
    check "$pw" "--ttl=$url" "$redlock" --nodes redis://127.0.0.1:1 acquire job --ttl="$url"
    check "$pw" "--interval $url" "$redlock" --nodes redis://127.0.0.1:1 nodes --interval "$url"
  done
  for template in "${reachable[@]}"; do
    url=${template//\{pw\}/$pw}
    check "$pw" "acquire on $url" "$redlock" --nodes "redis://127.0.0.1:1,$url" acquire job --json
    check "$pw" "REDLOCK_NODES=$url acquire" env REDLOCK_NODES="$url" "$redlock" acquire job
  done
  for template in "${configs[@]}"; do
    printf '%s' "${template//\{pw\}/$pw}" >"$dir/config.json"
    check "$pw" "config ${template//\{pw\}/$pw}" "$redlock" --config "$dir/config.json" nodes
  done
  check "$pw" "REDLOCK_CONFIG" env REDLOCK_CONFIG="$dir/config.json" "$redlock" nodes
  # The password from elsewhere, never in a URL: not shown either.
  printf '\n%s\n' "$pw" >"$dir/password"  # an empty first line: refused
  check "$pw" "--password-file (empty first line)" "$redlock" --nodes redis://127.0.0.1:1 --password-file "$dir/password" nodes
  printf '%s\n' "$pw" >"$dir/password"
  check "$pw" "--password-file" "$redlock" --nodes redis://127.0.0.1:1 --password-file "$dir/password" nodes --json
  check "$pw" "REDLOCK_PASSWORD" env REDLOCK_PASSWORD="$pw" "$redlock" --nodes redis://127.0.0.1:1 nodes --json
  if [[ -n $floor ]]; then
    for url in "redis://:$pw@127.0.0.1:x" "redis://user:$pw@10.0.0.1:1" "http://:$pw@127.0.0.1:1" "redis://$pw@host"; do
      check "$pw" "floor --nodes $url" "$floor" --nodes "$url" --scenario latency
    done
  fi
done

echo "no_secret: $runs runs, $failures leaking"
((failures == 0))
