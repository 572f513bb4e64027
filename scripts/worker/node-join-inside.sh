#!/usr/bin/env bash
# The in-container part of join-node.sh: runs as root inside a kindest/node worker.
#
# Stdin: the tenant admin kubeconfig (secret; kept on the container's /run tmpfs, mode 0600, and
# removed on exit). Environment: NODE_NAME. Prints progress on stderr only; kubeadm's output is
# passed through a filter that masks anything shaped like a bootstrap token or CA hash.
# Idempotent: with /etc/kubernetes/kubelet.conf present and the node registered, it does nothing.
# RUN_DIR and KUBELET_CONF exist for the offline tests (defaults: /run, kubeadm's kubelet.conf).
set -euo pipefail

: "${NODE_NAME:?NODE_NAME is required}"
run_dir="${RUN_DIR:-/run}"
kubelet_conf="${KUBELET_CONF:-/etc/kubernetes/kubelet.conf}"

umask 077
workdir="$(mktemp -d "${run_dir}/gpu-platform-join.XXXXXX")"
trap 'rm -rf "$workdir"' EXIT
kubeconfig="$workdir/tenant.kubeconfig"
cat >"$kubeconfig"

log() { printf '[join %s] %s\n' "$NODE_NAME" "$*" >&2; }
redact() {
  sed -E -e 's/[a-z0-9]{6}\.[a-z0-9]{16}/<redacted-token>/g' \
    -e 's/sha256:[a-f0-9]{64}/sha256:<redacted>/g' >&2
}
registered() {
  kubectl --kubeconfig "$kubeconfig" --request-timeout=20s get node "$NODE_NAME" >/dev/null 2>&1
}

if [[ -f "$kubelet_conf" ]]; then
  if registered; then
    log "already a node of the tenant; nothing to do"
    exit 0
  fi
  log "joined before but the tenant has no node ${NODE_NAME}: resetting and joining again"
  kubeadm reset --force 2>&1 | redact
fi

modprobe br_netfilter 2>/dev/null || log "modprobe br_netfilter failed (tolerated)"
swapoff -a || log "swapoff -a failed (tolerated)"

if ! join_command="$(kubeadm token create --print-join-command --kubeconfig "$kubeconfig" 2>"$workdir/token.err")"; then
  redact <"$workdir/token.err"
  log "kubeadm token create failed"
  exit 1
fi
read -r -a join_args <<<"$join_command"
if [[ "${join_args[0]:-}" != kubeadm || "${join_args[1]:-}" != join ]]; then
  log "kubeadm token create did not print a join command"
  exit 1
fi

log "running kubeadm join"
"${join_args[@]}" --ignore-preflight-errors=SystemVerification,FileExisting 2>&1 | redact
log "joined"
