#!/usr/bin/env bash
# Remove the GPU count resource from a worker's status (delete of the pool's capacity Command).
# Idempotent and best effort: an unreachable tenant API or a node that is gone is a no-op.
#
# Environment: NODE_NAME, TENANT_KUBECONFIG (secret), GPU_RESOURCE (nvidia.com/gpu).
set -euo pipefail

: "${NODE_NAME:?NODE_NAME is required}"
: "${TENANT_KUBECONFIG:?TENANT_KUBECONFIG is required}"
: "${GPU_RESOURCE:?GPU_RESOURCE is required}"

log() { printf '[gpu-capacity %s] %s\n' "$NODE_NAME" "$*" >&2; }

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s' "$TENANT_KUBECONFIG" >"$kubeconfig"
tenant() { kubectl --kubeconfig "$kubeconfig" --request-timeout=30s "$@"; }

if ! tenant get node "$NODE_NAME" >/dev/null 2>&1; then
  log "node not reachable or gone: nothing to remove"
  exit 0
fi
patch="$(printf '{"status":{"capacity":{"%s":null},"allocatable":{"%s":null}}}' \
  "$GPU_RESOURCE" "$GPU_RESOURCE")"
tenant patch node "$NODE_NAME" --subresource=status --type=merge --patch "$patch" >&2
log "${GPU_RESOURCE} removed from the node status"
