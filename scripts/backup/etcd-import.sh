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
# newline. `etcdctl txn` is not used: it parses quoted text per line (util.go argify) and etcd
# caps a transaction at --max-txn-ops (128 by default).
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
IMPORT_PUT_TIMEOUT="${IMPORT_PUT_TIMEOUT:-30s}"
export IMPORT_PUT_TIMEOUT
export -f put_one
export plan
# shellcheck disable=SC2016  # $1 is expanded by the child bash, not here
find "$plan/keys" -type f -print0 |
  xargs -0 -r -n 1 -P "${IMPORT_PARALLEL:-8}" bash -c 'put_one "$1"' put_one
echo "restored $count keys under $BACKUP_PREFIX" >&2
