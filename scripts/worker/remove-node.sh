#!/usr/bin/env bash
# Remove one worker node from its tenant (delete of the pool's join Command): drain (best
# effort), then delete the Node. Idempotent: a node that is not registered is a no-op. When the
# tenant API is unreachable (its control plane is already gone) there is nothing to remove from,
# and the destroy goes on to remove the container.
#
# Environment: NODE_NAME, TENANT_KUBECONFIG (secret). Needs kubectl on the lab host.
set -euo pipefail

: "${NODE_NAME:?NODE_NAME is required}"
: "${TENANT_KUBECONFIG:?TENANT_KUBECONFIG is required}"

log() { printf '[remove %s] %s\n' "$NODE_NAME" "$*" >&2; }

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s' "$TENANT_KUBECONFIG" >"$kubeconfig"
tenant() { kubectl --kubeconfig "$kubeconfig" --request-timeout=30s "$@"; }

if ! tenant get --raw /version >/dev/null 2>&1; then
  log "tenant API unreachable: no node to remove from it"
  exit 0
fi
if ! tenant get node "$NODE_NAME" >/dev/null 2>&1; then
  log "not a node of the tenant: nothing to do"
  exit 0
fi
tenant drain "$NODE_NAME" --ignore-daemonsets --delete-emptydir-data --force --timeout=60s >&2 ||
  log "drain did not finish (best effort); deleting the node anyway"
tenant delete node "$NODE_NAME" --ignore-not-found >&2
log "removed from the tenant"
