#!/usr/bin/env bash
# Download the pinned upstream files the contract tests read (charts' default values, CRDs, HAMi's
# fit vectors are not included: they live in this project's shared workspace) into DIR, for people
# outside this workspace. The tags are the ones in components/versions.py; re-running overwrites.
# Usage: scripts/fetch-upstream.sh [DIR]   (default .upstream; then GPU_PLATFORM_UPSTREAM_DIR=DIR)
set -euo pipefail

dest=${1:-.upstream}
raw=https://raw.githubusercontent.com

fetch() { # fetch <repo> <tag> <path-in-repo> <saved-as>
  local repo=$1 tag=$2 path=$3 saved=$4
  mkdir -p "$dest/$(dirname "$saved")"
  echo "  $repo@$tag $path"
  curl --fail --silent --show-error --location --retry 3 \
    "$raw/$repo/$tag/$path" --output "$dest/$saved"
}

echo "fetching pinned upstream files into $dest"
fetch Project-HAMi/HAMi v2.10.0 charts/hami/values.yaml hami/values.yaml
fetch Project-HAMi/HAMi v2.10.0 charts/hami/Chart.yaml hami/Chart.yaml
fetch clastix/kamaji 26.8.2-edge charts/kamaji/values.yaml kamaji/values.yaml
fetch clastix/kamaji 26.8.2-edge charts/kamaji/Chart.yaml kamaji/Chart.yaml
for crd in tenantcontrolplanes datastores kubeconfiggenerators; do
  fetch clastix/kamaji 26.8.2-edge "charts/kamaji/crds/kamaji.clastix.io_${crd}.yaml" \
    "kamaji/crds/${crd}.kamaji.clastix.io.yaml"
done
fetch clastix/kamaji-etcd v0.17.0 charts/kamaji-etcd/values.yaml kamaji-etcd/values.yaml
fetch metallb/metallb v0.16.1 charts/metallb/values.yaml metallb/values.yaml
for crd in ipaddresspools l2advertisements; do
  fetch metallb/metallb v0.16.1 "config/crd/bases/metallb.io_${crd}.yaml" "metallb/metallb.io_${crd}.yaml"
done
fetch cert-manager/cert-manager v1.21.1 deploy/charts/cert-manager/values.yaml cert-manager/values.yaml
fetch projectcalico/calico v3.32.1 charts/tigera-operator/values.yaml tigera-operator/values.yaml
fetch NVIDIA/gpu-operator v26.7.0 deployments/gpu-operator/values.yaml gpu-operator/values.yaml
fetch kubernetes-sigs/cluster-api-operator v0.28.0 hack/charts/cluster-api-operator/values.yaml \
  cluster-api-operator/values.yaml
for kind in coreproviders bootstrapproviders controlplaneproviders infrastructureproviders; do
  fetch kubernetes-sigs/cluster-api-operator v0.28.0 "config/crd/bases/operator.cluster.x-k8s.io_${kind}.yaml" \
    "cluster-api-operator/operator.cluster.x-k8s.io_${kind}.yaml"
done
for crd in clusters machinedeployments machinehealthchecks; do
  fetch kubernetes-sigs/cluster-api v1.13.5 "config/crd/bases/cluster.x-k8s.io_${crd}.yaml" \
    "cluster-api/cluster.x-k8s.io_${crd}.yaml"
done
fetch kubernetes-sigs/cluster-api v1.13.5 \
  bootstrap/kubeadm/config/crd/bases/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml \
  cluster-api/bootstrap.cluster.x-k8s.io_kubeadmconfigtemplates.yaml
for crd in dockerclusters dockermachinetemplates; do
  fetch kubernetes-sigs/cluster-api v1.13.5 \
    "test/infrastructure/docker/config/crd/bases/infrastructure.cluster.x-k8s.io_${crd}.yaml" \
    "capd/infrastructure.cluster.x-k8s.io_${crd}.yaml"
done
for crd in metal3clusters metal3machinetemplates; do
  fetch metal3-io/cluster-api-provider-metal3 v1.13.2 \
    "config/crd/bases/infrastructure.cluster.x-k8s.io_${crd}.yaml" "capm3/infrastructure.cluster.x-k8s.io_${crd}.yaml"
done
for manifest in k8s-mock-plugin k8s-mock-rbac; do
  fetch Project-HAMi/mock-device-plugin v1.0.1 "${manifest}.yaml" "mock-device-plugin/${manifest}.yaml"
done
# The Kamaji control-plane provider's v1alpha2 CRDs (first released in v0.20.0).
for crd in kamajicontrolplanes kamajicontrolplanetemplates; do
  fetch clastix/cluster-api-control-plane-provider-kamaji v0.20.0 \
    "config/crd/bases/controlplane.cluster.x-k8s.io_${crd}.yaml" \
    "kamaji-capi/${crd}.controlplane.cluster.x-k8s.io.yaml"
done
echo "done: export GPU_PLATFORM_UPSTREAM_DIR=$dest"
