#!/usr/bin/env bash
# Apply the restore plan that `tenant_backup.py fetch` wrote in $WORK_DIR/restore: delete every
# key under BACKUP_PREFIX, then write each planned key with its exact bytes. Runs in
# quay.io/coreos/etcd:v3.5.6 as the tenant's own etcd user, with the tenant's API server stopped.
#
# Byte-exact values: `etcdctl put KEY` with no value argument reads the value from stdin with
# ioutil.ReadAll and converts it unchanged (etcd-io/etcd v3.5.6
# etcdctl/ctlv3/command/put_command.go:93 and global.go:254-263; identical in v3.4.23
# put_command.go:92, global.go:248-257): NUL bytes and trailing newlines survive. An empty stdin
# is refused there ("no available argument and stdin"), so an empty value goes as the argument
# "". Keys are argv words (put_command.go:85), which is why fetch refuses keys with NUL or
# newline.
#
# Fast path: fetch also writes the plan as `etcdctl txn` inputs ($plan/txn/NNNNNN, up to 64 puts
# and about 1 MiB each, keys and values Go-quoted with every byte kept: tenant_backup.py
# txn_quote), and each is one process, one TLS handshake and one transaction instead of one per
# key. etcdctl txn reads stdin line by line, unquoting "..." words with fmt.Sscanf %q
# (etcdctl/ctlv3/command/util.go:59-77, txn_command.go:121-150; the same in v3.4.23) and prints
# SUCCESS first when the (empty) comparison holds. A plan without txn/ goes key by key as below.
#
# Keys that carried a lease in the backup are not in the plan (their lease is gone);
# plan.json lists them. Rerunning applies the same end state (delete, then put).
set -euo pipefail

# shellcheck source=scripts/backup/etcd-env.sh
source "$(dirname "${BASH_SOURCE[0]}")/etcd-env.sh"

plan="$WORK_DIR/restore"
if [ ! -f "$plan/plan.json" ] || [ ! -d "$plan/keys" ] || [ ! -d "$plan/values" ]; then
  echo "error: no restore plan in $plan (run tenant_backup.py fetch first)" >&2
  exit 1
fi
if [ "$(<"$plan/prefix")" != "$BACKUP_PREFIX" ]; then
  echo "error: the plan is for prefix '$(<"$plan/prefix")', not BACKUP_PREFIX '$BACKUP_PREFIX'" >&2
  exit 1
fi

# Check every key before deleting anything.
count=0
for keyfile in "$plan"/keys/*; do
  [ -e "$keyfile" ] || continue
  key="$(<"$keyfile")"
  case "$key" in
    "$BACKUP_PREFIX"*) ;;
    *) echo "error: planned key '$key' is outside $BACKUP_PREFIX" >&2; exit 1 ;;
  esac
  [ -f "$plan/values/${keyfile##*/}" ] || { echo "error: no value for '$key'" >&2; exit 1; }
  count=$((count + 1))
done

etcdctl del --prefix "$BACKUP_PREFIX" >/dev/null

IMPORT_PUT_TIMEOUT="${IMPORT_PUT_TIMEOUT:-30s}"
if [ -d "$plan/txn" ]; then
  batches=0
  for batch in "$plan"/txn/*; do
    [ -e "$batch" ] || continue
    # The first failed transaction ends the import; a retry of the whole restore deletes and
    # writes everything again. etcdctl txn commits with context.Background(), no
    # --command-timeout (etcd v3.5.6 etcdctl/ctlv3/command/txn_command.go:53,61): against a dead
    # member it would wait for ever, so coreutils' timeout (the image is debian:bullseye,
    # Dockerfile-release.amd64) bounds it by IMPORT_PUT_TIMEOUT.
    if ! out="$(timeout "$IMPORT_PUT_TIMEOUT" etcdctl txn <"$batch" 2>&1)"; then
      echo "error: transaction ${batch##*/} failed: $(printf '%s\n' "$out" | tail -n 1)" >&2
      exit 1
    fi
    if [ "$(printf '%s\n' "$out" | head -n 1)" != "SUCCESS" ]; then
      echo "error: transaction ${batch##*/} did not succeed: $(printf '%s\n' "$out" | head -n 1)" >&2
      exit 1
    fi
    batches=$((batches + 1))
  done
  echo "restored $count keys under $BACKUP_PREFIX in $batches transactions" >&2
  exit 0
fi

# One `etcdctl put` per key (a process and a TLS handshake each), IMPORT_PARALLEL at a time: the
# keys are distinct and were all deleted above, so their order does not matter, and the tenant's
# API server is stopped until check-restored has compared every key. The first failed put ends
# the import: it exits 255, on which GNU xargs stops at once instead of trying every remaining
# key (findutils xargs(1): "If any invocation of the command exits with a status of 255, xargs
# will stop immediately without reading any further input"); an etcd that went away otherwise
# cost a dial timeout per remaining key, hours for a large tenant. set -e then fails the step.
# A put is small: it gets IMPORT_PUT_TIMEOUT (default 30s), not the ETCDCTL_COMMAND_TIMEOUT the
# Job gives the export's one large Range, so a put to a dead member fails in seconds.
put_one() {
  local keyfile="$1" key valuefile
  key="$(<"$keyfile")"
  valuefile="$plan/values/${keyfile##*/}"
  if [ -s "$valuefile" ]; then
    ETCDCTL_COMMAND_TIMEOUT="$IMPORT_PUT_TIMEOUT" etcdctl put -- "$key" <"$valuefile" >/dev/null ||
      exit 255
  else
    ETCDCTL_COMMAND_TIMEOUT="$IMPORT_PUT_TIMEOUT" etcdctl put -- "$key" "" >/dev/null || exit 255
  fi
}
export IMPORT_PUT_TIMEOUT
export -f put_one
export plan
# shellcheck disable=SC2016  # $1 is expanded by the child bash, not here
find "$plan/keys" -type f -print0 |
  xargs -0 -r -n 1 -P "${IMPORT_PARALLEL:-8}" bash -c 'put_one "$1"' put_one
echo "restored $count keys under $BACKUP_PREFIX" >&2
