#!/usr/bin/env bash
# A namespace-scoped credential for one member of a tenant's team, written by the tenant's admin:
# a ServiceAccount `user-<name>` in the namespace `gpu-platform-users` of the tenant cluster,
# bound to the built-in `edit` ClusterRole in each namespace named (a RoleBinding each: nothing
# cluster-wide, no RBAC or admission objects, no other namespace), and a kubeconfig holding a
# token of it from the TokenRequest API that expires after TOKEN_DURATION. The kubeconfig keeps
# the admin's server and CA and nothing else of the admin's.
#
# Idempotent: a second run re-applies the same objects and writes a fresh token; dropping a
# namespace from NAMESPACES does not remove its earlier RoleBinding (delete it with
# `kubectl -n <ns> delete rolebinding user-<name>-edit`). Revoking everything:
# `kubectl -n gpu-platform-users delete serviceaccount user-<name>` (its tokens stop at once).
#
# Environment:
#   TENANT_KUBECONFIG   the tenant's admin kubeconfig (a file; it is read, never printed)
#   TEAM_MEMBER         the member's name (a DNS label: lower-case letters, digits, '-')
#   NAMESPACES          comma-separated namespaces of the tenant the member may edit; each must
#                       exist
#   OUTPUT              where to write the member's kubeconfig (mode 600; refused if it exists
#                       unless OVERWRITE=1)
#   TOKEN_DURATION      the token's lifetime (default 24h; the API server may shorten it)
# Stdout: the path written.
set -euo pipefail

: "${TENANT_KUBECONFIG:?TENANT_KUBECONFIG is required (the tenant admin kubeconfig)}"
: "${TEAM_MEMBER:?TEAM_MEMBER is required (e.g. alice)}"
: "${NAMESPACES:?NAMESPACES is required (e.g. ml,inference)}"
: "${OUTPUT:?OUTPUT is required (the kubeconfig file to write)}"
duration="${TOKEN_DURATION:-24h}"
users_namespace="gpu-platform-users"
account="user-${TEAM_MEMBER}"

fail() {
  printf '[user-kubeconfig] %s\n' "$*" >&2
  exit 1
}

command -v kubectl >/dev/null 2>&1 || fail "'kubectl' is not on PATH: install it (see 'make preflight')"
[[ "$TEAM_MEMBER" =~ ^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$ ]] \
  || fail "TEAM_MEMBER '$TEAM_MEMBER' is not a DNS label: use lower-case letters, digits and '-'"
if [[ -e "$OUTPUT" && "${OVERWRITE:-0}" != "1" ]]; then
  fail "$OUTPUT exists: remove it or set OVERWRITE=1"
fi

admin() { kubectl --kubeconfig "$TENANT_KUBECONFIG" "$@"; }

IFS=',' read -r -a namespaces <<<"$NAMESPACES"
for namespace in "${namespaces[@]}"; do
  admin get namespace "$namespace" >/dev/null 2>&1 \
    || fail "namespace '$namespace' does not exist in the tenant: create it first (kubectl create namespace $namespace)"
done

admin create namespace "$users_namespace" --dry-run=client -o yaml | admin apply -f - >/dev/null
admin -n "$users_namespace" create serviceaccount "$account" --dry-run=client -o yaml \
  | admin apply -f - >/dev/null
for namespace in "${namespaces[@]}"; do
  admin -n "$namespace" create rolebinding "${account}-edit" --clusterrole=edit \
    --serviceaccount="${users_namespace}:${account}" --dry-run=client -o yaml \
    | admin apply -f - >/dev/null
done

token=$(admin -n "$users_namespace" create token "$account" --duration="$duration")
# --flatten inlines a CA the admin kubeconfig names as a file.
server=$(admin config view --raw --minify --flatten -o jsonpath='{.clusters[0].cluster.server}')
ca=$(admin config view --raw --minify --flatten \
  -o jsonpath='{.clusters[0].cluster.certificate-authority-data}')
[[ -n "$server" && -n "$ca" ]] || fail "the admin kubeconfig names no server or no CA"

umask 077
scratch=$(mktemp "${OUTPUT}.XXXXXX")
trap 'rm -f "$scratch"' EXIT
cat >"$scratch" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: tenant
  cluster:
    server: ${server}
    certificate-authority-data: ${ca}
users:
- name: ${TEAM_MEMBER}
  user:
    token: ${token}
contexts:
- name: ${TEAM_MEMBER}
  context:
    cluster: tenant
    user: ${TEAM_MEMBER}
    namespace: ${namespaces[0]}
current-context: ${TEAM_MEMBER}
EOF
chmod 600 "$scratch"
mv "$scratch" "$OUTPUT"
trap - EXIT
printf '%s\n' "$OUTPUT"
