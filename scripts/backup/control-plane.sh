#!/bin/sh
# Stops or starts a tenant's API server around a datastore restore (docs/backups.md).
#
#   control-plane.sh stop   pause what rewrites the TenantControlPlane (prod: the Cluster API
#                           Cluster of the same name, PAUSE_OWNER, spec.paused), pause the
#                           TenantControlPlane so that Kamaji leaves its Deployment alone (any
#                           value of kamaji.clastix.io/paused: clastix/kamaji 26.8.2-edge
#                           controllers/utils/is_paused.go:12-18,
#                           controllers/tenantcontrolplane_controller.go:124-128; the Deployment is
#                           named like the TCP, internal/resources/k8s_deployment_resource.go:54-57),
#                           remember the Deployment's replicas on the TenantControlPlane, scale the
#                           Deployment to 0 and wait until no API server pod is left
#   control-plane.sh start  scale back to the remembered replicas, drop the note and both pauses,
#                           and wait for the rollout
#
# Both are idempotent: a second stop keeps the first count; a start without a note scales nothing.
# Runs in the kubectl image with the restore's ServiceAccount.
set -eu
: "${CONTROL_PLANE:?the TenantControlPlane (and its Deployment) name}"
: "${CONTROL_PLANE_POD_LABEL:?the label selecting its pods}"
: "${KAMAJI_PAUSED_ANNOTATION:?the pause annotation of Kamaji}"
TCP="tenantcontrolplanes.kamaji.clastix.io"
NOTE="gpu-platform.io/replicas-before-restore"
STOP_TIMEOUT_SECONDS="${STOP_TIMEOUT_SECONDS:-300}"

note_jsonpath() {
  # kubectl jsonpath escapes the dots and slash of an annotation key.
  printf '{.metadata.annotations.%s}' "$(printf '%s' "$NOTE" | sed 's/[./]/\\&/g')"
}

stop() {
  if [ -n "${PAUSE_OWNER:-}" ]; then
    kubectl patch "$PAUSE_OWNER" "$CONTROL_PLANE" --type merge -p '{"spec":{"paused":true}}'
  fi
  kubectl annotate "$TCP" "$CONTROL_PLANE" "$KAMAJI_PAUSED_ANNOTATION=datastore-restore" --overwrite
  noted=$(kubectl get "$TCP" "$CONTROL_PLANE" -o jsonpath="$(note_jsonpath)")
  if [ -z "$noted" ]; then
    replicas=$(kubectl get deployment "$CONTROL_PLANE" -o jsonpath='{.spec.replicas}')
    kubectl annotate "$TCP" "$CONTROL_PLANE" "$NOTE=${replicas:-1}"
  fi
  kubectl scale deployment "$CONTROL_PLANE" --replicas=0
  waited=0
  while :; do
    # A failed read must fail the stop, never read as "no pod left".
    pods=$(kubectl get pods -l "$CONTROL_PLANE_POD_LABEL=$CONTROL_PLANE" -o name)
    [ -n "$pods" ] || break
    if [ "$waited" -ge "$STOP_TIMEOUT_SECONDS" ]; then
      echo "FAIL: API server pods of $CONTROL_PLANE still running after ${STOP_TIMEOUT_SECONDS}s" >&2
      exit 1
    fi
    sleep 2
    waited=$((waited + 2))
  done
  echo "stopped $CONTROL_PLANE (no API server pod left after ${waited}s)"
}

start() {
  replicas=$(kubectl get "$TCP" "$CONTROL_PLANE" -o jsonpath="$(note_jsonpath)")
  if [ -n "$replicas" ]; then
    kubectl scale deployment "$CONTROL_PLANE" --replicas="$replicas"
    kubectl annotate "$TCP" "$CONTROL_PLANE" "$NOTE-"
  fi
  kubectl annotate "$TCP" "$CONTROL_PLANE" "$KAMAJI_PAUSED_ANNOTATION-"
  if [ -n "${PAUSE_OWNER:-}" ]; then
    kubectl patch "$PAUSE_OWNER" "$CONTROL_PLANE" --type merge -p '{"spec":{"paused":false}}'
  fi
  kubectl rollout status deployment "$CONTROL_PLANE" --timeout=600s
  echo "started $CONTROL_PLANE"
}

case "${1:-}" in
  stop) stop ;;
  start) start ;;
  *) echo "usage: control-plane.sh stop|start" >&2; exit 2 ;;
esac
