#!/usr/bin/env bash
# Which of the tenant namespaces the program adopts (managementNamespace.existing) are missing on
# the management cluster: one name per line on stdout, nothing when all exist. Read-only. Run by
# components.cluster_checks before anything is registered (in preview too).
#
# Environment:
#   KUBECONFIG_CONTENT  the management cluster's kubeconfig (secret: written to a private temp
#                       file, never printed)
#   NAMESPACES          space-separated namespace names
# Exit status: 0 when the API server answered for every namespace; 1 (with kubectl's message on
# stderr) when it could not be asked.
set -euo pipefail

: "${KUBECONFIG_CONTENT:?KUBECONFIG_CONTENT is required}"
: "${NAMESPACES:?NAMESPACES is required}"

if ! command -v kubectl >/dev/null 2>&1; then
  echo "'kubectl' is not on PATH: install it (the prod stack's gates need it too)" >&2
  exit 1
fi

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s\n' "$KUBECONFIG_CONTENT" >"$kubeconfig"
unset KUBECONFIG_CONTENT
export KUBECONFIG="$kubeconfig"

read -r -a namespaces <<<"$NAMESPACES"
for namespace in "${namespaces[@]}"; do
  if output="$(kubectl get namespace "$namespace" -o name --request-timeout=30s 2>&1)"; then
    continue
  fi
  if grep -q "NotFound" <<<"$output"; then
    echo "$namespace"
    continue
  fi
  echo "$output" >&2
  exit 1
done
