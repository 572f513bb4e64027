#!/usr/bin/env bash
# Export one tenant's keys as etcdctl's JSON: a single Range request over BACKUP_PREFIX, so every
# key comes from one consistent revision (header.revision). Runs in quay.io/coreos/etcd:v3.5.6 as
# the tenant's own etcd user (client certificate CN = user; Kamaji grants that user READWRITE on
# /<schema>/ only, clastix/kamaji 26.8.2-edge internal/datastore/etcd.go:60-75), so etcd refuses
# any other tenant's range. etcdctl reads ETCDCTL_ENDPOINTS, ETCDCTL_CACERT, ETCDCTL_CERT and
# ETCDCTL_KEY itself. The file is written beside the target and renamed, so a failed run leaves
# no partial export and a rerun replaces the previous one.
set -euo pipefail

# shellcheck source=scripts/backup/etcd-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/etcd-env.sh"
EXPORT_FILE="${EXPORT_FILE:-export.json}"

mkdir -p "$WORK_DIR"
target="$WORK_DIR/$EXPORT_FILE"
partial="$target.partial"
rm -f "$partial"
if ! etcdctl get --prefix "$BACKUP_PREFIX" -w json >"$partial"; then
  rm -f "$partial"
  echo "error: etcdctl get --prefix $BACKUP_PREFIX failed" >&2
  exit 1
fi
mv -f "$partial" "$target"
echo "exported $BACKUP_PREFIX to $target" >&2
