#!/usr/bin/env bash
# Start the lab's pull-through registry caches (one CNCF Distribution registry in proxy mode per
# upstream registry), each with its storage in a named volume, and put them on the kind docker
# network when it exists. Idempotent: a running cache with the same configuration is left alone,
# a stopped one is started, one with another configuration is recreated (its volume, the cached
# images, is kept). Nothing here deletes a volume: the caches outlive `make destroy`
# (scripts/management/registry-caches-remove.sh, `make clean-caches`, removes them).
# Run by pulumi-command as create and update of the management cluster's registry caches.
#
# Environment (components/lab/registry_cache.py caches_env):
#   REGISTRY_IMAGE      the pinned registry image
#   CACHES              one line per cache: container volume registry config-hash KEY=value...
#   DOCKER_NETWORK      the kind docker network (connected to when it exists)
#   CACHE_LABEL, CACHE_CONFIG_LABEL, LAB_ONLY_LABEL   the labels the caches carry
# Stdout: one line per cache, `registry container`.
set -euo pipefail

: "${REGISTRY_IMAGE:?REGISTRY_IMAGE is required}"
: "${CACHES:?CACHES is required}"
: "${DOCKER_NETWORK:?DOCKER_NETWORK is required}"
: "${CACHE_LABEL:?CACHE_LABEL is required}"
: "${CACHE_CONFIG_LABEL:?CACHE_CONFIG_LABEL is required}"
: "${LAB_ONLY_LABEL:?LAB_ONLY_LABEL is required}"

log() { printf '[registry-caches] %s\n' "$*" >&2; }

if ! command -v docker >/dev/null 2>&1; then
  log "'docker' is not on PATH: install it (see 'make preflight')"
  exit 1
fi

while read -r container volume registry config settings; do
  [[ -n "$container" ]] || continue
  if ! docker volume inspect "$volume" >/dev/null 2>&1; then
    docker volume create --label "$CACHE_LABEL=$registry" --label "$LAB_ONLY_LABEL=true" \
      "$volume" >/dev/null
    log "$registry: volume $volume created"
  fi
  have="$(docker inspect --format "{{index .Config.Labels \"$CACHE_CONFIG_LABEL\"}}" \
    "$container" 2>/dev/null || true)"
  if [[ -n "$have" && "$have" != "$config" ]]; then
    log "$registry: $container has another configuration ($have, not $config): recreating it"
    docker rm -f "$container" >/dev/null
    have=""
  fi
  if [[ -z "$have" ]]; then
    env_args=()
    read -r -a pairs <<<"$settings"
    for pair in "${pairs[@]}"; do
      env_args+=(--env "$pair")
    done
    docker run --detach --name "$container" --restart always \
      --label "$CACHE_LABEL=$registry" --label "$CACHE_CONFIG_LABEL=$config" \
      --label "$LAB_ONLY_LABEL=true" \
      --volume "$volume:/var/lib/registry" "${env_args[@]}" \
      "$REGISTRY_IMAGE" >/dev/null
    log "$registry: cache $container started"
  elif [[ "$(docker inspect --format '{{.State.Running}}' "$container")" != "true" ]]; then
    docker start "$container" >/dev/null
    log "$registry: cache $container started again"
  fi
  if docker network inspect "$DOCKER_NETWORK" >/dev/null 2>&1; then
    attached="$(docker inspect --format \
      "{{if index .NetworkSettings.Networks \"$DOCKER_NETWORK\"}}yes{{end}}" "$container")"
    if [[ "$attached" != "yes" ]]; then
      docker network connect "$DOCKER_NETWORK" "$container"
      log "$registry: $container connected to network $DOCKER_NETWORK"
    fi
  fi
  printf '%s %s\n' "$registry" "$container"
done <<<"$CACHES"
