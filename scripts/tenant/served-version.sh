#!/usr/bin/env bash
# Readiness gate between a tenant's control plane and its workers: poll the tenant's own API
# (`GET /version`, not the TenantControlPlane's spec) until it serves EXPECTED_VERSION on
# SERVED_READS consecutive answers. Kamaji rolls a new version out Blue/Green — new API server
# pods next to the old ones until they are ready (clastix/kamaji 26.8.2-edge
# docs/content/guides/upgrade.md) — so during a rollout the Service answers with both versions,
# and one answer of the new one is not enough. Idempotent: a tenant that already serves the
# version passes after SERVED_READS reads (with the defaults, six reads 5 s apart: about 25 s).
# Nothing to undo on delete.
#
# Environment:
#   TENANT_KUBECONFIG      the tenant's kubeconfig (secret: written to a private temp file, never
#                          printed)
#   EXPECTED_VERSION       e.g. v1.35.0 (the API's gitVersion without a build suffix)
#   SERVED_READS           consecutive answers of that version needed (default 6)
#   WAIT_TIMEOUT_SECONDS   overall deadline (default 1800)
#   WAIT_POLL_SECONDS      pause between two reads (default 5)
# Stdout: the served version, once it is the expected one.
set -euo pipefail

: "${TENANT_KUBECONFIG:?TENANT_KUBECONFIG is required}"
: "${EXPECTED_VERSION:?EXPECTED_VERSION is required}"
reads_needed="${SERVED_READS:-6}"
timeout_seconds="${WAIT_TIMEOUT_SECONDS:-1800}"
poll_seconds="${WAIT_POLL_SECONDS:-5}"
deadline=$(($(date +%s) + timeout_seconds))

log() { printf '[served-version] %s\n' "$*" >&2; }

if ! command -v kubectl >/dev/null 2>&1; then
  log "'kubectl' is not on PATH: install it (see 'make preflight')"
  exit 1
fi

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s\n' "$TENANT_KUBECONFIG" >"$kubeconfig"
unset TENANT_KUBECONFIG

# served: the gitVersion the API answers now, without a build suffix (v1.35.0+k3s1 -> v1.35.0),
# or nothing when it does not answer.
served() {
  kubectl --kubeconfig "$kubeconfig" --request-timeout=20s get --raw /version 2>/dev/null |
    sed -n -E 's/.*"gitVersion"[[:space:]]*:[[:space:]]*"(v[0-9]+\.[0-9]+\.[0-9]+)[^"]*".*/\1/p' |
    head -n 1
}

streak=0
last=""
while :; do
  version="$(served || true)"
  if [[ "$version" == "$EXPECTED_VERSION" ]]; then
    streak=$((streak + 1))
    if ((streak >= reads_needed)); then
      log "the tenant API serves ${EXPECTED_VERSION} (${streak} reads in a row)"
      printf '%s\n' "$version"
      exit 0
    fi
  else
    streak=0
    if [[ "$version" != "$last" ]]; then
      log "the tenant API serves ${version:-nothing yet}; waiting for ${EXPECTED_VERSION}"
      last="$version"
    fi
  fi
  if (($(date +%s) >= deadline)); then
    log "timed out after ${timeout_seconds}s: the tenant API serves ${version:-nothing}, not ${EXPECTED_VERSION}"
    exit 1
  fi
  sleep "$poll_seconds"
done
