#!/usr/bin/env bash
# The update of a lab pool's version gate: before the pool's workers are replaced with a new
# Kubernetes version, wait until the tenant's own API serves that version (the control plane is
# upgraded first, in the same `pulumi up`). Its create is a no-op (a first deployment has no
# workers to protect, and its workers start at once, while the control plane comes up), so this
# runs only when the tenant's version changes.
#
# It depends on nothing the control plane produces (that would hold the pool's first containers
# back until the control plane exists): the tenant's kubeconfig is read here, from Kamaji's
# admin Secret in the kind management cluster (super-admin.conf: system:masters, no RBAC).
#
# Environment:
#   KIND_CLUSTER_NAME     the lab's kind cluster (its kubeconfig from `kind get kubeconfig`)
#   TENANT_NAMESPACE      the tenant's namespace in the management cluster
#   TENANT_SECRET         Kamaji's admin kubeconfig Secret of the tenant
#   EXPECTED_VERSION      the version to wait for (e.g. v1.35.0)
#   SERVED_VERSION_SCRIPT scripts/tenant/served-version.sh (reads TENANT_KUBECONFIG,
#                         EXPECTED_VERSION, SERVED_READS, WAIT_TIMEOUT_SECONDS, WAIT_POLL_SECONDS)
set -euo pipefail

: "${KIND_CLUSTER_NAME:?KIND_CLUSTER_NAME is required}"
: "${TENANT_NAMESPACE:?TENANT_NAMESPACE is required}"
: "${TENANT_SECRET:?TENANT_SECRET is required}"
: "${EXPECTED_VERSION:?EXPECTED_VERSION is required}"
: "${SERVED_VERSION_SCRIPT:?SERVED_VERSION_SCRIPT is required}"

umask 077
management="$(mktemp)"
trap 'rm -f "$management"' EXIT
kind get kubeconfig --name "$KIND_CLUSTER_NAME" >"$management"
TENANT_KUBECONFIG="$(kubectl --kubeconfig "$management" --request-timeout=30s \
  --namespace "$TENANT_NAMESPACE" get secret "$TENANT_SECRET" \
  -o 'jsonpath={.data.super-admin\.conf}' | base64 -d)"
export TENANT_KUBECONFIG
bash -c "$SERVED_VERSION_SCRIPT"
