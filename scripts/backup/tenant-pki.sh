#!/bin/sh
# Writes the tenant's root keys from the restore plan back into Kamaji's Secrets (docs/backups.md,
# "The tenant's root keys"): for every $WORK_DIR/restore/pki/<name>.json that fetch wrote, a merge
# patch of the data of Secret <CONTROL_PLANE>-<name> (<tcp>-ca, <tcp>-sa-certificate,
# <tcp>-front-proxy-ca-certificate). Runs in the restore Job after the datastore was verified and
# before the control plane starts, while the TenantControlPlane is still paused: Kamaji keeps a
# valid key pair it finds in an existing Secret (clastix/kamaji 26.8.2-edge
# internal/resources/ca_certificate.go:103-123, sa_certificate.go:96-106) and, once unpaused,
# reissues every certificate that no longer verifies against the CA
# (api_server_certificate.go: crypto.VerifyCertificate against the CA Secret) and every
# kubeconfig whose CA checksum changed (kubeconfig.go:131-136,197).
#
# A Secret that does not exist is refused (the TenantControlPlane must have been reconciled once:
# the patch keeps Kamaji's labels and owner reference). Idempotent: the same patch twice changes
# nothing. A plan without keys (a backup taken without them) writes nothing.
set -eu
: "${CONTROL_PLANE:?the TenantControlPlane name}"
: "${WORK_DIR:?the work directory holding the restore plan}"
PLAN="$WORK_DIR/restore"
[ -f "$PLAN/plan.json" ] || {
  echo "error: no restore plan in $PLAN (did fetch run?)" >&2
  exit 1
}
restored=""
for patch in "$PLAN"/pki/*.json; do
  [ -e "$patch" ] || continue
  name="$CONTROL_PLANE-$(basename "$patch" .json)"
  # One line on failure: kubectl's own last line (e.g. NotFound), never the patch (the keys).
  if ! out=$(kubectl patch secret "$name" --type merge -p "$(cat "$patch")" 2>&1); then
    echo "error: cannot write the tenant's keys into Secret $name: $(printf '%s\n' "$out" | tail -n 1)" >&2
    exit 1
  fi
  restored="$restored${restored:+,}\"$name\""
done
printf '{"action": "pki", "secretsRestored": [%s]}\n' "$restored"
