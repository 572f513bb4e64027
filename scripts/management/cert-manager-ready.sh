#!/usr/bin/env bash
# Readiness gate of an adopted cert-manager (management.existing.certManager: existing): the
# program installs nothing of cert-manager, so before Kamaji and the cluster-api-operator (whose
# charts create cert-manager Certificates and Issuers) it proves the cluster's own cert-manager
# serves: its CRDs present and Established, and an Issuer through its admission webhook by a
# server-side dry run (nothing is persisted). Read-only, so running it again changes nothing.
# Parameters come from components.management_values.cert_manager_gate_env.
#
# Environment:
#   KUBECONFIG_CONTENT     the management cluster's kubeconfig (secret: written to a private temp
#                          file, never printed)
#   CERT_MANAGER_CRDS      space-separated CRD names that must exist and be Established
#   PROBE_MANIFEST         JSON object the dry run creates (an Issuer)
#   WAIT_TIMEOUT_SECONDS   overall deadline (default 600)
#   WAIT_POLL_SECONDS      pause between two attempts (default 5)
set -euo pipefail

: "${KUBECONFIG_CONTENT:?KUBECONFIG_CONTENT is required}"
: "${CERT_MANAGER_CRDS:?CERT_MANAGER_CRDS is required}"
: "${PROBE_MANIFEST:?PROBE_MANIFEST is required}"
timeout_seconds="${WAIT_TIMEOUT_SECONDS:-600}"
poll_seconds="${WAIT_POLL_SECONDS:-5}"
deadline=$(($(date +%s) + timeout_seconds))
attempt_timeout=60s
choice="management.existing.certManager is existing"
fix="install cert-manager on the management cluster first, or set management.existing.certManager: install"

if ! command -v kubectl >/dev/null 2>&1; then
  echo "cert-manager-ready: 'kubectl' is not on PATH: install it (see 'make preflight')" >&2
  exit 1
fi

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s\n' "$KUBECONFIG_CONTENT" >"$kubeconfig"
unset KUBECONFIG_CONTENT
export KUBECONFIG="$kubeconfig"

# give_up WHAT OUTPUT: fail once the deadline has passed.
give_up() {
  if (($(date +%s) >= deadline)); then
    echo "cert-manager-ready: timed out after ${timeout_seconds}s waiting for $1: $2" >&2
    exit 1
  fi
  sleep "$poll_seconds"
}

read -r -a crds <<<"$CERT_MANAGER_CRDS"

for crd in "${crds[@]}"; do
  # An absent CRD is not a slow start: nothing will install it (the program does not).
  until output="$(kubectl get "customresourcedefinitions.apiextensions.k8s.io/$crd" -o name 2>&1)"; do
    if grep -q "NotFound" <<<"$output"; then
      echo "cert-manager-ready: CRD $crd is not on the management cluster, so cert-manager is not installed there ($choice): $fix" >&2
      exit 1
    fi
    give_up "the management cluster's API server" "$output"
  done
  until output="$(kubectl wait --for=condition=Established --timeout="$attempt_timeout" \
    "customresourcedefinitions.apiextensions.k8s.io/$crd" 2>&1)"; do
    give_up "CRD $crd to be Established" "$output"
  done
  echo "cert-manager-ready: CRD $crd is Established"
done

# The webhook must accept the probe: "denied the request" from cert-manager itself would refuse
# the charts' Issuers too (no point in waiting); anything else (no endpoints, a CA bundle not
# injected yet: "failed calling webhook", x509) may be a cert-manager still starting.
until output="$(printf '%s\n' "$PROBE_MANIFEST" | kubectl create --dry-run=server -f - 2>&1)"; do
  if grep -q "denied the request" <<<"$output" && ! grep -q "failed calling webhook" <<<"$output"; then
    echo "cert-manager-ready: cert-manager's webhook refused a self-signed Issuer: $output" >&2
    exit 1
  fi
  give_up "cert-manager's webhook (server-side dry run of an Issuer)" "$output"
done
echo "$output"
echo "cert-manager-ready: cert-manager's CRDs and webhook serve"
