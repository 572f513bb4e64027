#!/bin/sh
# Refuses a backup of a tenant whose datastore is not to be trusted (docs/backups.md).
#
#   backup-guard.sh before   (before the export) refuse while the TenantControlPlane is paused
#                            (KAMAJI_PAUSED_ANNOTATION, any value: clastix/kamaji 26.8.2-edge
#                            controllers/utils/is_paused.go:12-18) or a restore has marked it
#                            (gpu-platform.io/restore-job, set by control-plane.sh stop and only
#                            dropped by control-plane.sh start after a verified import); note
#                            which restore ran last (gpu-platform.io/last-restore-job)
#   backup-guard.sh after    (after the export) the same refusals, and refuse when another
#                            restore began since `before`: the export may then hold a fraction of
#                            the keys of a restore in progress.
#
# A restore suspends the backup CronJob, but a Job the CronJob had already created still runs:
# this check, inside the Job, is what keeps such a Job from publishing a half-restored tenant.
# Runs in the kubectl image with the backup's ServiceAccount (get on its TenantControlPlane).
set -eu
: "${CONTROL_PLANE:?the TenantControlPlane name}"
: "${WORK_DIR:?the work directory of the pod}"
: "${KAMAJI_PAUSED_ANNOTATION:?the pause annotation of Kamaji}"
TCP="tenantcontrolplanes.kamaji.clastix.io"
RESTORE_MARK="gpu-platform.io/restore-job"
LAST_RESTORE="gpu-platform.io/last-restore-job"

# kubectl prints a map as JSON, keys sorted (encoding/json); a key's presence is what counts.
annotations=$(kubectl get "$TCP" "$CONTROL_PLANE" -o jsonpath='{.metadata.annotations}')
value_of() {
  printf '%s' "$annotations" | sed -n "s|.*\"$1\":\"\\([^\"]*\\)\".*|\\1|p"
}
case "$annotations" in
  *"\"$KAMAJI_PAUSED_ANNOTATION\":"*)
    echo "error: $CONTROL_PLANE is paused ($KAMAJI_PAUSED_ANNOTATION): no backup of a stopped or half-restored tenant" >&2
    exit 1 ;;
esac
marked=$(value_of "$RESTORE_MARK")
if [ -n "$marked" ]; then
  echo "error: $CONTROL_PLANE is being restored by job $marked (or that restore failed): no backup until a restore completes" >&2
  exit 1
fi
last=$(value_of "$LAST_RESTORE")
case "${1:-}" in
  before)
    printf '%s\n' "$last" > "$WORK_DIR/last-restore"
    echo "$CONTROL_PLANE runs and is not being restored" ;;
  after)
    if [ ! -f "$WORK_DIR/last-restore" ]; then
      echo "error: no $WORK_DIR/last-restore (run backup-guard.sh before first)" >&2
      exit 1
    fi
    before=$(cat "$WORK_DIR/last-restore")
    if [ "$last" != "$before" ]; then
      echo "error: restore job $last ran on $CONTROL_PLANE during this export: not publishing it" >&2
      exit 1
    fi
    echo "$CONTROL_PLANE was not restored during the export" ;;
  *) echo "usage: backup-guard.sh before|after" >&2; exit 2 ;;
esac
