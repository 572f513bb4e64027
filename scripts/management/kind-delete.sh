#!/usr/bin/env bash
# Delete the lab's kind management cluster (pulumi-command `delete`; `pulumi destroy`).
# Idempotent: a cluster that is already gone is not an error. Every tenant control plane, the
# DataStore and everything else inside the cluster go with it.
#
# Environment:
#   KIND_CLUSTER_NAME   the cluster's name
set -euo pipefail

: "${KIND_CLUSTER_NAME:?KIND_CLUSTER_NAME is required}"

if ! command -v kind >/dev/null 2>&1; then
  echo "kind-delete: 'kind' is not on PATH, so cluster $KIND_CLUSTER_NAME cannot be deleted:" \
    "install kind and run 'pulumi destroy' again" >&2
  exit 1
fi

if ! clusters="$(kind get clusters 2>&1)"; then
  echo "kind-delete: cannot list kind clusters ($clusters): start Docker and run" \
    "'pulumi destroy' again" >&2
  exit 1
fi
if grep -Fxq -- "$KIND_CLUSTER_NAME" <<<"$clusters"; then
  kind delete cluster --name "$KIND_CLUSTER_NAME"
else
  echo "kind-delete: cluster $KIND_CLUSTER_NAME does not exist: nothing to delete"
fi
