#!/usr/bin/env bash
# Scheduled defragmentation of one kamaji-etcd (components/etcd_defrag.py, its CronJob): etcd
# compacts its history itself (the chart's --auto-compaction-retention), but the freed pages stay
# in the database file until a defragmentation, and once the file reaches the space quota etcd
# raises its NOSPACE alarm and accepts only reads and deletes (clastix/kamaji-etcd v0.17.0
# docs/defragmentation.md; etcd's maintenance guide). Member by member, only on a healthy
# cluster, and only a member worth it: more than DEFRAG_FREEABLE_BYTES free in its file, or a
# file above DEFRAG_QUOTA_PERCENT of the quota (the rule of kamaji-etcd's scripts/defrag.sh, with
# etcd-defrag). Afterwards a NOSPACE alarm is disarmed, as etcd's recovery asks. Running it again
# changes nothing but the file's free pages.
#
# Environment (etcdctl's ETCDCTL_CACERT, ETCDCTL_CERT, ETCDCTL_KEY: the root client certificate,
# as the chart's own etcd-setup job uses it; Defragment needs an admin, etcd v3.5.6
# server/etcdserver/api/v3rpc/maintenance.go:265-280):
#   ETCD_ENDPOINTS           space-separated https://<member>:2379 of every member
#   QUOTA_BACKEND_BYTES      the etcd's --quota-backend-bytes
#   DEFRAG_FREEABLE_BYTES    free bytes in a member's file worth a defragmentation
#   DEFRAG_QUOTA_PERCENT     a file this full (% of the quota) is defragmented whatever it frees
set -euo pipefail

: "${ETCD_ENDPOINTS:?ETCD_ENDPOINTS is required}"
: "${QUOTA_BACKEND_BYTES:?QUOTA_BACKEND_BYTES is required}"
freeable="${DEFRAG_FREEABLE_BYTES:-209715200}"
quota_percent="${DEFRAG_QUOTA_PERCENT:-80}"
export ETCDCTL_API=3

read -r -a endpoints <<<"$ETCD_ENDPOINTS"
all="$(IFS=,; echo "${endpoints[*]}")"

# field NAME JSON: an integer field of `etcdctl endpoint status -w json`, Go's json.Marshal of the
# StatusResponse (etcd v3.5.6 etcdctl/ctlv3/command/printer_json.go:51-58; api/etcdserverpb/
# rpc.pb.go:4212,4224 `dbSize`, `dbSizeInUse`, omitted when zero: then 0).
field() {
  local value
  value="$(grep -o "\"$1\":[[:space:]]*[0-9]*" <<<"$2" | head -n 1 | cut -d: -f2 | tr -d '[:space:]')"
  echo "${value:-0}"
}

# A degraded cluster is left alone: defragmenting blocks a member while it runs.
etcdctl --endpoints="$all" endpoint health

for endpoint in "${endpoints[@]}"; do
  status="$(etcdctl --endpoints="$endpoint" endpoint status -w json)"
  size="$(field dbSize "$status")"
  in_use="$(field dbSizeInUse "$status")"
  if ((size - in_use > freeable || size * 100 > QUOTA_BACKEND_BYTES * quota_percent)); then
    echo "defrag: $endpoint: file $size bytes, $in_use in use: defragmenting"
    etcdctl --endpoints="$endpoint" --command-timeout=300s defrag
    # The next member only once this one serves again.
    etcdctl --endpoints="$all" endpoint health
  else
    echo "defrag: $endpoint: file $size bytes, $in_use in use: nothing to gain"
  fi
done

if etcdctl --endpoints="$all" alarm list | grep -q NOSPACE; then
  echo "defrag: disarming the NOSPACE alarm"
  etcdctl --endpoints="$all" alarm disarm
fi
