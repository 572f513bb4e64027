#!/usr/bin/env bash
# Readiness gate: poll the management cluster (kubectl wait, rollout status, a server-side dry
# run; never a fixed sleep) until it serves what the next resources need. Parameters come from
# components.management_values.gate_env.
#
# Environment:
#   KUBECONFIG_CONTENT     the management cluster's kubeconfig (secret: written to a private temp
#                          file, never printed)
#   WAIT_TIMEOUT_SECONDS   overall deadline (default 900)
#   WAIT_POLL_SECONDS      pause between two attempts (default 5)
#   WAIT_CRDS              CRD names that must exist and be Established
#   WAIT_ROLLOUTS          <namespace>/<kind>/<name> that must finish rolling out
#   WAIT_CONDITIONS        <namespace or ->/<resource>/<name>/<kubectl wait --for value>
#   DRY_RUN_MANIFEST       JSON object (or v1 List of objects) a server-side dry run must get
#                          through admission with (accepted, or denied by a webhook: either way
#                          the webhooks answer; a webhook that cannot be called fails it even
#                          when another object of the List was denied)
# Lists are space-separated. Objects that do not exist yet are waited for too.
set -euo pipefail

: "${KUBECONFIG_CONTENT:?KUBECONFIG_CONTENT is required}"
timeout_seconds="${WAIT_TIMEOUT_SECONDS:-900}"
poll_seconds="${WAIT_POLL_SECONDS:-5}"
deadline=$(($(date +%s) + timeout_seconds))
attempt_timeout=60s

if ! command -v kubectl >/dev/null 2>&1; then
  echo "wait-ready: 'kubectl' is not on PATH: install it (see 'make preflight')" >&2
  exit 1
fi

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s\n' "$KUBECONFIG_CONTENT" >"$kubeconfig"
unset KUBECONFIG_CONTENT
export KUBECONFIG="$kubeconfig"

# retry DESCRIPTION COMMAND...: run COMMAND until it succeeds or the deadline passes.
retry() {
  local what="$1" output
  shift
  until output="$("$@" 2>&1)"; do
    if (($(date +%s) >= deadline)); then
      echo "wait-ready: timed out after ${timeout_seconds}s waiting for $what: $output" >&2
      return 1
    fi
    sleep "$poll_seconds"
  done
  if [[ -n "$output" ]]; then
    echo "$output"
  fi
  echo "wait-ready: $what is ready"
}

read -r -a crds <<<"${WAIT_CRDS:-}"
read -r -a rollouts <<<"${WAIT_ROLLOUTS:-}"
read -r -a conditions <<<"${WAIT_CONDITIONS:-}"

for crd in "${crds[@]}"; do
  retry "CRD $crd" kubectl wait --for=condition=Established --timeout="$attempt_timeout" \
    "customresourcedefinitions.apiextensions.k8s.io/$crd"
done

for rollout in "${rollouts[@]}"; do
  IFS=/ read -r namespace kind name <<<"$rollout"
  retry "$kind $namespace/$name" kubectl rollout status --namespace "$namespace" \
    --timeout="$attempt_timeout" "$kind/$name"
done

for condition in "${conditions[@]}"; do
  IFS=/ read -r namespace resource name wait_for <<<"$condition"
  scope=()
  if [[ "$namespace" != "-" ]]; then
    scope=(--namespace "$namespace")
  fi
  retry "$resource $name ($wait_for)" kubectl wait "${scope[@]}" --for="$wait_for" \
    --timeout="$attempt_timeout" "$resource/$name"
done

# dry_run: succeed when the API server and its admission webhooks answered.
dry_run() {
  local output
  if output="$(printf '%s\n' "$DRY_RUN_MANIFEST" | kubectl apply --dry-run=server -f - 2>&1)"; then
    echo "$output"
    return 0
  fi
  if grep -q "denied the request" <<<"$output" && ! grep -q "failed calling webhook" <<<"$output"; then
    echo "wait-ready: the webhook answered (and denied the probe): $output"
    return 0
  fi
  echo "$output"
  return 1
}

if [[ -n "${DRY_RUN_MANIFEST:-}" ]]; then
  retry "admission webhooks (server-side dry run)" dry_run
fi
