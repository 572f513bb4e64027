#!/usr/bin/env bash
# Creates the lab backup store's buckets, one per tenant, owned by that tenant's identity
# (components/lab/backup_store.py), once the store serves. Runs `weed shell` inside the store's
# pod (seaweedfs 4.44 weed/shell/command_s3_bucket_create.go:28-46; the server binds all
# addresses, -ip.bind=0.0.0.0, so the shell reaches the master on localhost). Idempotent: only
# buckets the store does not list yet are created. Never deletes a bucket (make clean-caches and
# `make destroy` remove the whole store with the kind cluster).
#
# Environment:
#   KUBECONFIG_CONTENT   the management cluster's kubeconfig (secret: a private temp file)
#   NAMESPACE, STORE     the store's namespace and Deployment
#   BUCKETS              space-separated <bucket>=<owner identity> pairs
set -euo pipefail
: "${KUBECONFIG_CONTENT:?KUBECONFIG_CONTENT is required}"
: "${NAMESPACE:?}" "${STORE:?}" "${BUCKETS:?}"

umask 077
kubeconfig="$(mktemp)"
trap 'rm -f "$kubeconfig"' EXIT
printf '%s\n' "$KUBECONFIG_CONTENT" >"$kubeconfig"
unset KUBECONFIG_CONTENT
export KUBECONFIG="$kubeconfig"

# `weed shell` reads commands from stdin and, without a terminal, prints a failed command's error
# and still exits 0 (seaweedfs 4.44 weed/shell/shell_liner.go:110-123, 144-146): its output is
# checked for "error" instead, and every bucket is listed again at the end.
weed_shell() {
  local out
  out=$(printf '%s\n' "$1" | kubectl -n "$NAMESPACE" exec -i "deploy/$STORE" -- \
    weed shell -master=localhost:9333 2>&1) || { printf '%s\n' "$out" >&2; return 1; }
  if printf '%s\n' "$out" | grep -qi 'error'; then
    printf '%s\n' "$out" >&2
    return 1
  fi
  printf '%s\n' "$out"
}

listed_has() {
  printf '%s\n' "$1" | grep -Eq "(^|[[:space:]])${2}([[:space:]]|$)"
}

kubectl -n "$NAMESPACE" rollout status "deploy/$STORE" --timeout=600s
listed=""
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  if listed=$(weed_shell "s3.bucket.list"); then
    break
  fi
  if [ "$attempt" -eq 10 ]; then
    echo "backup-buckets: the store does not list its buckets" >&2
    exit 1
  fi
  echo "backup-buckets: the store does not answer yet (attempt $attempt)" >&2
  sleep 6
done
for pair in $BUCKETS; do
  bucket="${pair%%=*}"
  owner="${pair#*=}"
  if listed_has "$listed" "$bucket"; then
    echo "bucket $bucket exists"
  else
    weed_shell "s3.bucket.create -name $bucket -owner $owner" >/dev/null
  fi
done
listed=$(weed_shell "s3.bucket.list")
for pair in $BUCKETS; do
  bucket="${pair%%=*}"
  if ! listed_has "$listed" "$bucket"; then
    echo "backup-buckets: bucket $bucket is missing after its creation" >&2
    exit 1
  fi
  echo "bucket $bucket ready"
done
