#!/usr/bin/env bash
# Wire node containers (the kind node, or a kindest/node worker) to the lab's registry caches:
# put each cache on the nodes' docker network, write one containerd hosts.toml per registry
# (the cache first, the upstream as fallback; containerd reads them at every pull, no restart),
# then pull the given images through them ahead of the pods that need them. Idempotent.
# Run by pulumi-command as create and update (components/lab/registry_cache.py mirrors_env).
#
# Environment:
#   NODES             node containers, space-separated
#   CACHE_CONTAINERS  the cache containers, space-separated
#   DOCKER_NETWORK    the kind docker network
#   CERTS_DIR         containerd's registry config directory in the node
#   MIRRORS           one line per registry: `registry base64(hosts.toml)`
#   PREPULL_IMAGES    images to pull into each node, space-separated (may be empty)
#   CONTAINERD_TIMEOUT  seconds to wait for containerd in a node (default 180)
# A missing cache or a pre-pull that fails is reported and skipped: containerd falls back to the
# registry, and the kubelet pulls the image again when a pod needs it. Stdout: the node names.
set -euo pipefail

: "${NODES:?NODES is required}"
: "${DOCKER_NETWORK:?DOCKER_NETWORK is required}"
: "${CERTS_DIR:?CERTS_DIR is required}"
: "${MIRRORS:?MIRRORS is required}"
timeout_seconds="${CONTAINERD_TIMEOUT:-180}"

log() { printf '[node-mirrors] %s\n' "$*" >&2; }

read -r -a caches <<<"${CACHE_CONTAINERS:-}"
for cache in "${caches[@]}"; do
  attached="$(docker inspect --format \
    "{{if index .NetworkSettings.Networks \"$DOCKER_NETWORK\"}}yes{{end}}" "$cache" \
    2>/dev/null || true)"
  if [[ "$attached" != "yes" ]]; then
    if docker network connect "$DOCKER_NETWORK" "$cache"; then
      log "cache $cache connected to network $DOCKER_NETWORK"
    else
      # containerd falls back to the registry itself: slower, not broken.
      log "WARNING: cache $cache is not there (removed by 'make clean-caches' while the" \
        "stack was up?): the nodes pull from the registries until 'make destroy && make lab'"
    fi
  fi
done

read -r -a nodes <<<"$NODES"
read -r -a images <<<"${PREPULL_IMAGES:-}"
for node in "${nodes[@]}"; do
  deadline=$((SECONDS + timeout_seconds))
  until docker exec "$node" crictl info >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "$node: containerd did not answer within ${timeout_seconds}s"
      exit 1
    fi
    sleep 2
  done
  while read -r registry encoded; do
    [[ -n "$registry" ]] || continue
    printf '%s' "$encoded" | base64 -d |
      docker exec -i "$node" sh -c "mkdir -p '$CERTS_DIR/$registry' &&
        cat > '$CERTS_DIR/$registry/hosts.toml'"
  done <<<"$MIRRORS"
  log "$node: containerd pulls through the caches"
  for image in "${images[@]}"; do
    if docker exec "$node" crictl pull "$image" >/dev/null 2>&1; then
      log "$node: pulled $image"
    else
      log "$node: could not pull $image ahead (the kubelet will try again)"
    fi
  done
  printf '%s\n' "$node"
done
