#!/bin/sh
# Writes the etcd endpoints the tenant's API server uses (its --etcd-servers flag, which Kamaji
# builds from the bound DataStore's endpoints: clastix/kamaji 26.8.2-edge
# internal/builders/controlplane/deployment.go:730-742) to $WORK_DIR/endpoints, comma-separated,
# for etcd-export.sh and etcd-import.sh, and the version it runs to $WORK_DIR/kubernetes-version. Reading them from the live Deployment keeps the backup on
# the datastore the control plane really uses, whichever DataStore that is. Runs in the kubectl
# image with the backup's ServiceAccount (get on that one Deployment). Read-only; idempotent.
set -eu
: "${CONTROL_PLANE:?the TenantControlPlane (and its Deployment) name}"
: "${WORK_DIR:?the work directory of the pod}"

args=$(kubectl get deployment "$CONTROL_PLANE" \
  -o jsonpath='{range .spec.template.spec.containers[?(@.name=="kube-apiserver")].args[*]}{@}{"\n"}{end}')
servers=$(printf '%s\n' "$args" | sed -n 's/^--etcd-servers=//p' | head -n 1)
case "$servers" in
  https://*|http://*) ;;
  "")
    echo "FAIL: deployment/$CONTROL_PLANE has no kube-apiserver --etcd-servers flag" >&2
    exit 1 ;;
  *)
    echo "FAIL: deployment/$CONTROL_PLANE stores its state in $servers, not etcd: backups export etcd prefixes only" >&2
    exit 1 ;;
esac
printf '%s\n' "$servers" > "$WORK_DIR/endpoints"
echo "etcd endpoints of $CONTROL_PLANE: $servers"
# The version the tenant runs, recorded with each backup: the API server image's tag
# (registry.k8s.io/kube-apiserver:v1.35.0, set from spec.kubernetes.version by Kamaji).
image=$(kubectl get deployment "$CONTROL_PLANE" \
  -o jsonpath='{.spec.template.spec.containers[?(@.name=="kube-apiserver")].image}')
version="${image##*:}"
case "$version" in
  v1.*) printf '%s\n' "$version" > "$WORK_DIR/kubernetes-version" ;;
  *) echo "warning: cannot read the Kubernetes version off image $image" >&2 ;;
esac
