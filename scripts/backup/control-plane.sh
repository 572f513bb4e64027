#!/bin/sh
# Stops or starts a tenant's API server around a datastore restore (docs/backups.md).
#
#   control-plane.sh stop   take the restore lock: mark the TenantControlPlane as being restored
#                           (RESTORE_MARK = this Job's name, and LAST_RESTORE, which stays),
#                           refusing while another restore Job that still runs holds it; suspend the tenant's
#                           scheduled backup (BACKUP_CRON_JOB, its previous `suspend` noted on the
#                           TenantControlPlane), pause what rewrites the TenantControlPlane (prod:
#                           the Cluster API Cluster of the same name, PAUSE_OWNER, spec.paused),
#                           pause the TenantControlPlane so that Kamaji leaves its Deployment alone
#                           (any value of kamaji.clastix.io/paused: clastix/kamaji 26.8.2-edge
#                           controllers/utils/is_paused.go:12-18,
#                           controllers/tenantcontrolplane_controller.go:124-128; the Deployment is
#                           named like the TCP, internal/resources/k8s_deployment_resource.go:54-57),
#                           remember the Deployment's replicas on the TenantControlPlane, scale the
#                           Deployment to 0 and wait until no API server pod is left
#   control-plane.sh start  (the restore Job's last step, after check-restored has compared every
#                           key; only while this Job holds the lock) scale back to the remembered replicas, drop the note and both
#                           pauses, wait for the rollout, then resume the scheduled backup as it
#                           was and drop the restore mark: only a verified restore lets backups run
#                           again.
#
# Both are idempotent: a second stop keeps the first counts; a start without a note scales
# nothing. Runs in the kubectl image with the restore's ServiceAccount.
set -eu
: "${CONTROL_PLANE:?the TenantControlPlane (and its Deployment) name}"
: "${CONTROL_PLANE_POD_LABEL:?the label selecting its pods}"
: "${KAMAJI_PAUSED_ANNOTATION:?the pause annotation of Kamaji}"
: "${BACKUP_CRON_JOB:?the scheduled backup CronJob of the tenant}"
: "${JOB_NAME:?the name of this restore Job}"
TCP="tenantcontrolplanes.kamaji.clastix.io"
NOTE="gpu-platform.io/replicas-before-restore"
SUSPEND_NOTE="gpu-platform.io/backup-suspend-before-restore"
RESTORE_MARK="gpu-platform.io/restore-job"
LAST_RESTORE="gpu-platform.io/last-restore-job"
STOP_TIMEOUT_SECONDS="${STOP_TIMEOUT_SECONDS:-300}"

annotation_jsonpath() {
  # kubectl jsonpath escapes the dots and slash of an annotation key.
  printf '{.metadata.annotations.%s}' "$(printf '%s' "$1" | sed 's/[./]/\\&/g')"
}

annotation() {
  kubectl get "$TCP" "$CONTROL_PLANE" -o jsonpath="$(annotation_jsonpath "$1")"
}

holder_running() {
  # Whether restore Job $1 may still write: it exists and has neither finished (a Complete or
  # Failed condition) nor let its pods go (active or terminating). A Job that is gone (deleted,
  # or removed by its ttlSecondsAfterFinished) runs nothing.
  out=$(kubectl get job "$1" --ignore-not-found -o \
    jsonpath='{.metadata.name}|{.status.active}|{.status.terminating}|{range .status.conditions[?(@.status=="True")]}{.type},{end}') || {
    echo "FAIL: cannot read restore job $1" >&2
    exit 1
  }
  [ -n "$out" ] || return 1
  active=$(printf '%s' "$out" | cut -d'|' -f2)
  terminating=$(printf '%s' "$out" | cut -d'|' -f3)
  conditions=$(printf '%s' "$out" | cut -d'|' -f4)
  case ",$conditions" in
    *,Complete,*|*,Failed,*) ;;
    *) return 0 ;;
  esac
  [ "${active:-0}" != 0 ] || [ "${terminating:-0}" != 0 ]
}

mark() {
  # The restore lock: one restore at a time. The mark names the Job holding it; it is taken with
  # the TenantControlPlane's resourceVersion as a precondition (kubectl annotate
  # --resource-version), so of two Jobs that read the same state only one writes it. A mark left
  # by a Job that no longer runs (failed, deleted) is taken over: that is how a failed restore is
  # re-run. From here on, until start has run after a verified import, the tenant's datastore is
  # not to be trusted: backup-guard.sh refuses every backup while the mark is there, and compares
  # LAST_RESTORE before and after its export.
  tries=0
  while :; do
    state=$(kubectl get "$TCP" "$CONTROL_PLANE" \
      -o jsonpath="{.metadata.resourceVersion}|$(annotation_jsonpath "$RESTORE_MARK")")
    version=${state%%|*}
    holder=${state#*|}
    [ "$holder" != "$JOB_NAME" ] || return 0
    if [ -n "$holder" ]; then
      if holder_running "$holder"; then
        echo "FAIL: restore job $holder is still running on $CONTROL_PLANE: one restore at a time" >&2
        exit 1
      fi
      echo "restore job $holder no longer runs: taking its place on $CONTROL_PLANE"
    fi
    if out=$(kubectl annotate "$TCP" "$CONTROL_PLANE" --overwrite --resource-version="$version" \
      "$RESTORE_MARK=$JOB_NAME" "$LAST_RESTORE=$JOB_NAME" 2>&1); then
      echo "$out"
      return 0
    fi
    echo "the restore lock changed while taking it, reading it again: $out"
    tries=$((tries + 1))
    if [ "$tries" -ge 5 ]; then
      echo "FAIL: could not take the restore lock of $CONTROL_PLANE" >&2
      exit 1
    fi
    sleep 1
  done
}

check_mark() {
  holder=$(annotation "$RESTORE_MARK")
  if [ "$holder" != "$JOB_NAME" ]; then
    echo "FAIL: $CONTROL_PLANE is marked for restore job '${holder}', not $JOB_NAME: leaving it stopped" >&2
    exit 1
  fi
}

suspend_backups() {
  noted=$(annotation "$SUSPEND_NOTE")
  if [ -z "$noted" ]; then
    was=$(kubectl get cronjob "$BACKUP_CRON_JOB" -o jsonpath='{.spec.suspend}')
    kubectl annotate "$TCP" "$CONTROL_PLANE" "$SUSPEND_NOTE=${was:-false}"
  fi
  kubectl patch cronjob "$BACKUP_CRON_JOB" --type merge -p '{"spec":{"suspend":true}}'
}

resume_backups() {
  was=$(annotation "$SUSPEND_NOTE")
  if [ -n "$was" ]; then
    if [ "$was" = "true" ]; then suspend=true; else suspend=false; fi
    kubectl patch cronjob "$BACKUP_CRON_JOB" --type merge -p "{\"spec\":{\"suspend\":$suspend}}"
    kubectl annotate "$TCP" "$CONTROL_PLANE" "$SUSPEND_NOTE-"
  fi
}

stop() {
  mark
  suspend_backups
  if [ -n "${PAUSE_OWNER:-}" ]; then
    kubectl patch "$PAUSE_OWNER" "$CONTROL_PLANE" --type merge -p '{"spec":{"paused":true}}'
  fi
  kubectl annotate "$TCP" "$CONTROL_PLANE" "$KAMAJI_PAUSED_ANNOTATION=datastore-restore" --overwrite
  noted=$(annotation "$NOTE")
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
  echo "stopped $CONTROL_PLANE (no API server pod left after ${waited}s; backups suspended)"
}

start() {
  check_mark
  replicas=$(annotation "$NOTE")
  if [ -n "$replicas" ]; then
    kubectl scale deployment "$CONTROL_PLANE" --replicas="$replicas"
    kubectl annotate "$TCP" "$CONTROL_PLANE" "$NOTE-"
  fi
  kubectl annotate "$TCP" "$CONTROL_PLANE" "$KAMAJI_PAUSED_ANNOTATION-"
  if [ -n "${PAUSE_OWNER:-}" ]; then
    kubectl patch "$PAUSE_OWNER" "$CONTROL_PLANE" --type merge -p '{"spec":{"paused":false}}'
  fi
  kubectl rollout status deployment "$CONTROL_PLANE" --timeout=600s
  resume_backups
  kubectl annotate "$TCP" "$CONTROL_PLANE" "$RESTORE_MARK-"
  echo "started $CONTROL_PLANE (backups resumed)"
}

case "${1:-}" in
  stop) stop ;;
  start) start ;;
  *) echo "usage: control-plane.sh stop|start" >&2; exit 2 ;;
esac
