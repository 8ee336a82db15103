#!/usr/bin/env bash
# compose-faults.sh — faults for the compose test bed (docker-compose.yml:
# five redis 7 masters node1..node5 on 127.0.0.1:7001..7005).
#
#   scripts/compose-faults.sh kill N      SIGKILL node N's redis (it stays down)
#   scripts/compose-faults.sh pause N     freeze node N (docker compose pause)
#   scripts/compose-faults.sh unpause N   thaw it
#   scripts/compose-faults.sh restart N   restart node N, data kept (its volume)
#   scripts/compose-faults.sh wipe N      remove node N and its volume, start it empty
#   scripts/compose-faults.sh status      the containers and their state
#
# N is 1..5. Exit status: 0 done, 1 a docker command failed, 2 bad arguments,
# 3 docker, its compose plugin or its engine is missing or unreachable.
# Start the bed first with `docker compose up -d --wait` in the source root.
#
# Everything up to the docker checks uses bash builtins only, so the "no
# docker at all" path works with an empty PATH (tests/compose tests it).
set -euo pipefail

case $0 in
  */*) here=${0%/*} ;;
  *) here=. ;;
esac
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"
ROOT=$(cd "$here/.." && pwd)
COMPOSE_FILE=$ROOT/docker-compose.yml
READY_SECONDS=30   # for a (re)started node to answer PING

usage() {  # builtins only (printf), see above
  printf '%s\n' >&2 \
    "usage: $me kill|pause|unpause|restart|wipe N     (N is 1..5)" \
    "       $me status" \
    "  kill     SIGKILL node N (restart: \"no\", so it stays down)" \
    "  pause    freeze node N (docker compose pause); unpause thaws it" \
    "  restart  restart node N keeping its data (AOF with appendfsync always)" \
    "  wipe     remove node N's container and volume, start it again empty" \
    "  status   list the bed's containers" \
    "exit: 0 ok, 1 docker command failed, 2 bad arguments, 3 no docker/compose/engine" \
    "compose file: $COMPOSE_FILE"
}

unavailable() {  # unavailable MESSAGE: no usable docker, exit 3
  log "$1"
  log "the compose bed needs the docker CLI, its compose plugin and a running Docker engine; without them use the local bed: scripts/testbed.sh up --persistence always"
  exit 3
}

# ---- arguments (checked before anything touches docker) ----------------------

(($# >= 1)) || bad "missing command"
cmd=$1
shift
node=
case $cmd in
  kill | pause | unpause | restart | wipe)
    need_node "$cmd" "$@"
    node=$1
    no_more_args "$cmd" "${@:2}"
    ;;
  status)
    no_more_args status "$@"
    ;;
  -h | --help | help)
    usage
    exit 0
    ;;
  *)
    bad "unknown command '$cmd'"
    ;;
esac
service=node${node:-}

# ---- docker, its engine, compose ---------------------------------------------

command -v docker >/dev/null 2>&1 ||
  unavailable "docker not found on PATH (no docker CLI installed)"

# `docker info` answers only if an engine is reachable; bounded in time.
with_timeout=()
if command -v timeout >/dev/null 2>&1; then with_timeout=(timeout 20); fi
if ! engine_err=$("${with_timeout[@]}" docker info --format '{{.ServerVersion}}' 2>&1 >/dev/null); then
  engine_err=${engine_err%%$'\n'*}
  unavailable "the Docker engine is not reachable (docker info: ${engine_err:-no answer})"
fi

# Compose v2 (the docker CLI plugin): the file uses its top-level `name:` and
# this script `ps --all`; the old Python docker-compose 1.x is not enough.
docker compose version >/dev/null 2>&1 ||
  unavailable "docker compose is not available (the docker CLI has no compose v2 plugin)"

[[ -f $COMPOSE_FILE ]] || die "compose file not found: $COMPOSE_FILE"

# The project name is the compose file's top-level `name:` (so the volumes are
# <project>_nodeN-data); passed with -p so this works from any directory.
project=
while IFS= read -r line || [[ -n $line ]]; do
  if [[ $line =~ ^name:[[:space:]]*\"?([A-Za-z0-9_-]+)\"?[[:space:]]*$ ]]; then
    project=${BASH_REMATCH[1]}
    break
  fi
done <"$COMPOSE_FILE"
[[ -n $project ]] || die "no top-level 'name:' in $COMPOSE_FILE"

compose() {
  docker compose -f "$COMPOSE_FILE" -p "$project" "$@"
}

pongs() {  # pongs: node's redis answers PONG inside its container
  local reply
  reply=$(compose exec -T "$service" redis-cli ping 2>/dev/null </dev/null || true)
  [[ $reply == PONG* ]]
}

# wait_ready: bounded wait until node's redis answers PONG.
wait_ready() {
  wait_until -i 0.5 "$READY_SECONDS" pongs ||
    die "$service: no PONG after $READY_SECONDS s (see: docker compose -p $project logs $service)"
  note "$service: answering PING on 127.0.0.1:$((7000 + node))"
}

# volume_of: the docker volume holding node's /data.
volume_of() {
  local vol
  vol=$(docker volume ls -q \
          --filter "label=com.docker.compose.project=$project" \
          --filter "label=com.docker.compose.volume=$service-data" 2>/dev/null || true)
  vol=${vol%%$'\n'*}
  printf '%s' "${vol:-${project}_$service-data}"
}

case $cmd in
  kill)
    compose kill -s SIGKILL "$service" || die "$service: docker compose kill failed"
    note "$service: killed (SIGKILL); it stays down until: $me restart $node"
    ;;
  pause)
    compose pause "$service" || die "$service: docker compose pause failed"
    note "$service: paused"
    ;;
  unpause)
    compose unpause "$service" || die "$service: docker compose unpause failed"
    note "$service: unpaused"
    ;;
  restart)
    compose restart "$service" || die "$service: docker compose restart failed"
    wait_ready
    note "$service: restarted, data kept"
    ;;
  wipe)
    vol=$(volume_of)
    compose rm -s -f "$service" || die "$service: docker compose rm failed"
    if docker volume inspect "$vol" >/dev/null 2>&1; then
      docker volume rm "$vol" >/dev/null || die "$service: docker volume rm $vol failed"
      note "$service: volume $vol removed"
    else
      note "$service: volume $vol did not exist"
    fi
    compose up -d --no-deps "$service" || die "$service: docker compose up failed"
    wait_ready
    note "$service: started empty"
    ;;
  status)
    compose ps --all || die "docker compose ps failed"
    ;;
esac
