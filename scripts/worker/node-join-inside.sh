#!/usr/bin/env bash
# The in-container part of join-node.sh: runs as root inside a kindest/node worker.
#
# Stdin: the tenant admin kubeconfig (secret; kept on the container's /run tmpfs, mode 0600, and
# removed on exit). Environment: NODE_NAME. Prints progress on stderr only; kubeadm's output is
# passed through a filter that masks anything shaped like a bootstrap token or CA hash.
# Idempotent: with /etc/kubernetes/kubelet.conf present and the node registered, it does nothing.
#
# Retries: Kamaji marks a control plane Ready before its in-tenant controllers have finished the
# kubeadm phases a join needs (the admin ClusterRoleBinding, bootstrap-token RBAC, cluster-info,
# kubelet-config), so token creation and the join are retried (kubeadm reset between two joins)
# until JOIN_TIMEOUT seconds (default 300) have passed, JOIN_RETRY_SECONDS (default 5) apart.
# RUN_DIR and KUBELET_CONF exist for the offline tests (defaults: /run, kubeadm's kubelet.conf).
# Host side effects: none but one. swapoff is never run: swapoff(2) is not namespaced and a
# privileged container sees the host's swap devices, so it would turn off the host's swap; the
# lab's kubelets run with failSwapOn false instead (as kind's nodes do), and kubeadm only warns.
# `modprobe br_netfilter` loads that module into the host kernel (modules are not namespaced
# either; kind's nodes rely on the host having it too); a failure is tolerated.
set -euo pipefail

: "${NODE_NAME:?NODE_NAME is required}"
run_dir="${RUN_DIR:-/run}"
kubelet_conf="${KUBELET_CONF:-/etc/kubernetes/kubelet.conf}"
join_timeout="${JOIN_TIMEOUT:-300}"
retry_seconds="${JOIN_RETRY_SECONDS:-5}"

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
# node_state: "registered", "absent" (the tenant API says NotFound) or "unknown" (no answer, or
# an answer that is not about the node: never a reason to reset a node that joined before).
node_state() {
  local output
  if output="$(kubectl --kubeconfig "$kubeconfig" --request-timeout=20s get node "$NODE_NAME" \
    -o name 2>&1)"; then
    echo registered
  elif grep -q "(NotFound)" <<<"$output"; then
    echo absent
  else
    echo unknown
  fi
}

deadline=$((SECONDS + join_timeout))
# wait_or_give_up WHAT: sleep before the next attempt, or fail once the deadline has passed.
wait_or_give_up() {
  if ((SECONDS >= deadline)); then
    log "gave up after ${join_timeout}s: $1"
    exit 1
  fi
  sleep "$retry_seconds"
}

if [[ -f "$kubelet_conf" ]]; then
  while state="$(node_state)" && [[ "$state" == unknown ]]; do
    wait_or_give_up "the tenant API did not say whether node ${NODE_NAME} exists"
  done
  if [[ "$state" == registered ]]; then
    log "already a node of the tenant; nothing to do"
    exit 0
  fi
  log "joined before but the tenant has no node ${NODE_NAME}: resetting and joining again"
  # A failed reset must not end the script: the join below is retried until the deadline.
  kubeadm reset --force 2>&1 | redact || log "kubeadm reset failed (tolerated)"
fi

modprobe br_netfilter 2>/dev/null || log "modprobe br_netfilter failed (tolerated)"

# join_once: 0 joined; 1 no join command yet (nothing to undo); 2 kubeadm join failed.
join_once() {
  local join_command
  local -a join_args
  if ! join_command="$(kubeadm token create --print-join-command --kubeconfig "$kubeconfig" \
    2>"$workdir/token.err")"; then
    redact <"$workdir/token.err"
    log "kubeadm token create failed"
    return 1
  fi
  read -r -a join_args <<<"$join_command"
  if [[ "${join_args[0]:-}" != kubeadm || "${join_args[1]:-}" != join ]]; then
    log "kubeadm token create did not print a join command"
    exit 1
  fi
  log "running kubeadm join"
  if ! "${join_args[@]}" --ignore-preflight-errors=SystemVerification,FileExisting 2>&1 | redact; then
    return 2
  fi
}

while :; do
  status=0
  join_once || status=$?
  if ((status == 0)); then
    break
  fi
  if ((status == 2)); then
    if [[ -f "$kubelet_conf" && "$(node_state)" == registered ]]; then
      log "kubeadm join reported a failure, but the node is registered: keeping it"
      break
    fi
    log "kubeadm join failed: resetting before the next attempt"
    kubeadm reset --force 2>&1 | redact || log "kubeadm reset failed (tolerated)"
  fi
  wait_or_give_up "the tenant did not accept the join (its kubeadm phases may not be done)"
done

# kubeadm join returns once the kubelet has its client certificate; the kubelet registers its
# Node a moment later. Only then is the node reported joined: what comes next patches the Node,
# and an object created by anyone else first is adopted by the kubelet with its extended
# resources (the nvidia.com/gpu capacity set next) reset to 0 on a node without device-plugin
# state.
deadline=$((SECONDS + join_timeout))
until [[ "$(node_state)" == registered ]]; do
  wait_or_give_up "the kubelet did not register node ${NODE_NAME}"
done
log "joined"
