#!/usr/bin/env bash
# fake_docker.sh — a recording stand-in for the docker CLI, used by
# tests/compose/test_compose_faults.cpp to check which docker commands
# scripts/compose-faults.sh issues where no Docker engine exists. It does not
# imitate docker's behaviour beyond what the script reads back.
#
# Every call appends one line to $FAKE_DOCKER_LOG: the arguments joined by '|'.
# Answers:
#   info ...            prints 28.0.0; fails like docker if FAKE_DOCKER_ENGINE=down
#   compose version     succeeds; fails like docker if FAKE_DOCKER_COMPOSE=missing
#   compose ... exec ... redis-cli ping     prints PONG
#   volume ls ... --filter label=com.docker.compose.volume=V   prints labelled-V
#   anything else       succeeds silently
set -u
(IFS='|'; printf '%s\n' "$*") >>"${FAKE_DOCKER_LOG:?FAKE_DOCKER_LOG is not set}"

case ${1:-} in
  info)
    if [[ ${FAKE_DOCKER_ENGINE:-up} == down ]]; then
      echo "Cannot connect to the Docker daemon at unix:///fake/docker.sock. Is the docker daemon running?" >&2
      exit 1
    fi
    echo 28.0.0
    ;;
  compose)
    if [[ ${FAKE_DOCKER_COMPOSE:-present} == missing ]]; then
      echo "docker: unknown command: docker compose" >&2
      exit 1
    fi
    [[ " $* " == *" exec "*" redis-cli ping "* ]] && echo PONG
    ;;
  volume)
    if [[ ${2:-} == ls ]]; then
      for arg in "$@"; do
        [[ $arg == label=com.docker.compose.volume=* ]] && echo "labelled-${arg#label=com.docker.compose.volume=}"
      done
    fi
    ;;
esac
exit 0
