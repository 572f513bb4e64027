#!/usr/bin/env bash
# Join one kindest/node worker container to its tenant with kubeadm (lab). Idempotent: a worker
# that is already a node of the tenant is left alone.
#
# Runs on the lab host as the create/update of the pool's join Command.
# Environment:
#   NODE_NAME          the worker container (its hostname, so the tenant's node name)
#   TENANT_KUBECONFIG  the tenant admin kubeconfig (secret: handed to the container on stdin)
#   NODE_JOIN_SCRIPT   the in-container part (scripts/worker/node-join-inside.sh)
#   SYSTEMD_TIMEOUT    seconds to wait for systemd in the container (default 180)
# Stdout: the node name, once joined, and nothing else. The join command and its bootstrap token
# are created and used inside the container and never printed; progress goes to stderr.
set -euo pipefail

: "${NODE_NAME:?NODE_NAME is required}"
: "${TENANT_KUBECONFIG:?TENANT_KUBECONFIG is required}"
: "${NODE_JOIN_SCRIPT:?NODE_JOIN_SCRIPT is required}"
timeout_seconds="${SYSTEMD_TIMEOUT:-180}"

log() { printf '[join %s] %s\n' "$NODE_NAME" "$*" >&2; }

system_state() {
  docker exec "$NODE_NAME" systemctl is-system-running 2>/dev/null || true
}

# systemd is PID 1 in kindest/node; kubeadm needs it and containerd up. "degraded" is normal for
# a node container (some units cannot start in a container).
deadline=$((SECONDS + timeout_seconds))
while :; do
  state="$(system_state)"
  case "$state" in
    running | degraded) break ;;
  esac
  if ((SECONDS >= deadline)); then
    log "systemd did not come up within ${timeout_seconds}s (state: ${state:-unknown})"
    exit 1
  fi
  sleep 2
done
log "systemd is ${state}"

printf '%s' "$TENANT_KUBECONFIG" |
  docker exec --interactive --env NODE_NAME="$NODE_NAME" "$NODE_NAME" \
    bash -c "$NODE_JOIN_SCRIPT" >&2

printf '%s\n' "$NODE_NAME"
