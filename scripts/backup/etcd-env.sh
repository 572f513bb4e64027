# shellcheck shell=bash
# Sourced by etcd-export.sh and etcd-import.sh (both run in quay.io/coreos/etcd:v3.5.6): the
# environment every etcdctl step needs. etcdctl reads ETCDCTL_ENDPOINTS, ETCDCTL_CACERT,
# ETCDCTL_CERT, ETCDCTL_KEY and ETCDCTL_COMMAND_TIMEOUT itself; the endpoints default to what
# api-server-endpoints.sh read off the tenant's API server into $WORK_DIR/endpoints. A prefix
# that is not /<schema>/ is refused before etcdctl sees it (a bare "/" would reach every key the
# user may touch).
: "${ETCDCTL_API:=3}"
export ETCDCTL_API
: "${BACKUP_PREFIX:?BACKUP_PREFIX is required, e.g. /tenant_a/}"
: "${WORK_DIR:?WORK_DIR is required}"
if [ -z "${ETCDCTL_ENDPOINTS:-}" ] && [ -s "$WORK_DIR/endpoints" ]; then
  ETCDCTL_ENDPOINTS=$(cat "$WORK_DIR/endpoints")
  export ETCDCTL_ENDPOINTS
fi
: "${ETCDCTL_ENDPOINTS:?ETCDCTL_ENDPOINTS is required (or WORK_DIR/endpoints)}"
case "$BACKUP_PREFIX" in
  /?*/) ;;
  *) echo "error: BACKUP_PREFIX must look like /<schema>/, got '$BACKUP_PREFIX'" >&2; exit 1 ;;
esac
