#!/usr/bin/env bash
# Set a worker's status capacity (and allocatable) of the GPU count resource: the mock device
# plugin reports the node's cards only while it is > 0, and HAMi's scheduler keeps the node
# healthy while allocatable is > 0. A node *status* patch (kubectl --subresource=status); the
# kubelet keeps extended resources it does not manage and derives allocatable from capacity.
# Idempotent (a merge patch to the same value).
#
# Environment: NODE_NAME, TENANT_KUBECONFIG (secret), GPU_RESOURCE (nvidia.com/gpu),
#   GPU_CAPACITY (cards x slots), NODE_TIMEOUT (seconds to wait for the node, default 180).
# Stdout: the capacity set.
set -euo pipefail

: "${NODE_NAME:?NODE_NAME is required}"
: "${TENANT_KUBECONFIG:?TENANT_KUBECONFIG is required}"
: "${GPU_RESOURCE:?GPU_RESOURCE is required}"
: "${GPU_CAPACITY:?GPU_CAPACITY is required}"
timeout_seconds="${NODE_TIMEOUT:-180}"

log() { printf '[gpu-capacity %s] %s\n' "$NODE_NAME" "$*" >&2; }

if [[ ! "$GPU_CAPACITY" =~ ^[1-9][0-9]*$ ]]; then
  log "GPU_CAPACITY must be a positive integer, got '${GPU_CAPACITY}'"
  exit 1
fi

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s' "$TENANT_KUBECONFIG" >"$kubeconfig"
tenant() { kubectl --kubeconfig "$kubeconfig" --request-timeout=30s "$@"; }

deadline=$((SECONDS + timeout_seconds))
until tenant get node "$NODE_NAME" >/dev/null 2>&1; do
  if ((SECONDS >= deadline)); then
    log "node not registered within ${timeout_seconds}s"
    exit 1
  fi
  sleep 2
done

patch="$(printf '{"status":{"capacity":{"%s":"%s"},"allocatable":{"%s":"%s"}}}' \
  "$GPU_RESOURCE" "$GPU_CAPACITY" "$GPU_RESOURCE" "$GPU_CAPACITY")"
tenant patch node "$NODE_NAME" --subresource=status --type=merge --patch "$patch" >&2
log "${GPU_RESOURCE} capacity is ${GPU_CAPACITY}"
printf '%s\n' "$GPU_CAPACITY"
