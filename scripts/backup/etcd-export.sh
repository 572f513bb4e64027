#!/usr/bin/env bash
# Export one tenant's keys as etcdctl's JSON, in pages of EXPORT_PAGE_SIZE keys (default 1000),
# every page at the revision of the first: the export is one consistent snapshot of the prefix
# however many Range requests it takes, and etcdctl never holds more than one page (a single
# unpaginated Range of a 109 MiB prefix peaked near 1 GiB in etcdctl; the Job's limit is 512 Mi).
#
# Writes the directory $WORK_DIR/$EXPORT_FILE: `revision` (the snapshot's revision) and
# page-000000.json, page-000001.json, ... each one `etcdctl get START END --limit N -w json`.
# END is the prefix's range end (its last byte, "/", plus one: "0"), as `--prefix` computes it
# (etcd v3.5.6 client/v3/op.go GetPrefixRangeEnd). A page after the first starts at the last key
# of the one before and asks one key more; tenant_backup.py drops the keys it has read already
# (and so the overlap, whatever a shell did to the key's bytes). The next pages name the first
# page's revision with --rev (etcdctl/ctlv3/command/get_command.go:54); a compaction past it
# fails the export ("required revision has been compacted") rather than mixing revisions.
#
# Runs in quay.io/coreos/etcd:v3.5.6 (debian bullseye: bash, grep, base64) as the tenant's own
# etcd user (client certificate CN = user; Kamaji grants that user READWRITE on /<schema>/ only,
# clastix/kamaji 26.8.2-edge internal/datastore/etcd.go:60-75), so etcd refuses any other
# tenant's range. etcdctl reads ETCDCTL_ENDPOINTS, ETCDCTL_CACERT, ETCDCTL_CERT and ETCDCTL_KEY
# itself. The pages are written beside the target and renamed, so a failed run leaves no partial
# export and a rerun replaces the previous one.
set -euo pipefail

# shellcheck source=scripts/backup/etcd-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/etcd-env.sh"
EXPORT_FILE="${EXPORT_FILE:-export.json}"
PAGE_SIZE="${EXPORT_PAGE_SIZE:-1000}"
case "$PAGE_SIZE" in
  ''|*[!0-9]*|0) echo "error: EXPORT_PAGE_SIZE must be a positive number, got '$PAGE_SIZE'" >&2; exit 1 ;;
esac

mkdir -p "$WORK_DIR"
target="$WORK_DIR/$EXPORT_FILE"
partial="$target.partial"
rm -rf "$partial"
mkdir "$partial"
end="${BACKUP_PREFIX%/}0"
start="$BACKUP_PREFIX"
limit="$PAGE_SIZE"
revision=""
page=0
while :; do
  file="$partial/page-$(printf '%06d' "$page").json"
  if ! etcdctl get ${revision:+"--rev=$revision"} --limit="$limit" -w json -- "$start" "$end" >"$file"; then
    rm -rf "$partial"
    echo "error: etcdctl get of $BACKUP_PREFIX failed (page $page${revision:+ at revision $revision})" >&2
    exit 1
  fi
  if [ -z "$revision" ]; then
    # The response header's revision (the first "revision" key; the kvs' are *_revision).
    revision=$(grep -o '"revision":[0-9]*' "$file" | head -n 1 | cut -d: -f2)
    if [ -z "$revision" ]; then
      rm -rf "$partial"
      echo "error: no revision in etcdctl's answer for $BACKUP_PREFIX" >&2
      exit 1
    fi
    printf '%s\n' "$revision" >"$partial/revision"
    limit=$((PAGE_SIZE + 1))
  fi
  grep -q '"more":true' "$file" || break
  last=$(grep -o '"key":"[^"]*"' "$file" | tail -n 1 | cut -d'"' -f4)
  start=$(printf '%s' "$last" | base64 -d)
  page=$((page + 1))
done
rm -rf "$target"
mv -f "$partial" "$target"
echo "exported $BACKUP_PREFIX at revision $revision in $((page + 1)) pages to $target" >&2
