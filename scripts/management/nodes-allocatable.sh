#!/usr/bin/env bash
# The management cluster's nodes as `kubectl get nodes -o json` prints them (their allocatable
# CPU and memory, taints and cordons), for the capacity check made before anything is registered
# (components.capacity, in preview too). Read-only.
#
# Environment (one of):
#   KUBECONFIG_CONTENT  the management cluster's kubeconfig (secret: written to a private temp
#                       file, never printed)
#   KIND_CLUSTER_NAME   the lab's kind cluster: its kubeconfig from `kind get kubeconfig`; prints
#                       nothing when kind or that cluster does not exist yet
# Exit status: 0 with the JSON on stdout (or nothing, see KIND_CLUSTER_NAME); 1 (with the message
# on stderr) when the cluster could not be asked.
set -euo pipefail

if ! command -v kubectl >/dev/null 2>&1; then
  echo "'kubectl' is not on PATH: install it (the stack's gates need it too)" >&2
  exit 1
fi

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
if [[ -n "${KUBECONFIG_CONTENT:-}" ]]; then
  printf '%s\n' "$KUBECONFIG_CONTENT" >"$kubeconfig"
  unset KUBECONFIG_CONTENT
elif [[ -n "${KIND_CLUSTER_NAME:-}" ]]; then
  if ! command -v kind >/dev/null 2>&1; then
    exit 0
  fi
  if ! kind get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER_NAME"; then
    exit 0
  fi
  kind get kubeconfig --name "$KIND_CLUSTER_NAME" >"$kubeconfig"
else
  echo "KUBECONFIG_CONTENT or KIND_CLUSTER_NAME is required" >&2
  exit 1
fi
export KUBECONFIG="$kubeconfig"
kubectl get nodes -o json --request-timeout=30s
