#!/usr/bin/env bash
# Build the Kubernetes tools of the local end-to-end tier (tests/local, `make local-e2e`) once per
# machine: etcd, kube-apiserver and kube-controller-manager at the versions
# tests/local/tools/kube/go.mod and tests/local/tools/kube/etcd/go.mod pin, into a per-user cache
# keyed by a hash of those modules' go.mod and go.sum files (and of this script), so a changed
# pin builds anew and an unchanged one is never rebuilt.
# Nothing is written into the checkout. Idempotent: a complete cache is left as it is.
#
# Usage: scripts/local_e2e/build-kube-tools.sh [--print-dir]
#   --print-dir  only print the bin/ directory the tools live in (built or not), build nothing
# Exits 3 with one line when Go is missing (the tests then skip outside CI and fail in CI).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
module="$root/tests/local/tools/kube"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-platform/local-e2e"
# The key covers this script too: a changed build recipe (flags, stamps) builds anew.
key=$(cat "$module/go.mod" "$module/go.sum" "$module/etcd/go.mod" "$module/etcd/go.sum" \
  "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
bin="$cache_root/kube-$key/bin"

if [ "${1:-}" = "--print-dir" ]; then
  echo "$bin"
  exit 0
fi

# tool name in bin/, its module's folder, its Go package (the `tool` lines of the go.mod files)
tools=(
  "etcd etcd go.etcd.io/etcd/server/v3"
  "kube-apiserver . k8s.io/kubernetes/cmd/kube-apiserver"
  "kube-controller-manager . k8s.io/kubernetes/cmd/kube-controller-manager"
)

missing=0
for entry in "${tools[@]}"; do
  [ -x "$bin/${entry%% *}" ] || missing=1
done
if [ "$missing" -eq 0 ]; then
  for entry in "${tools[@]}"; do echo "== ${entry%% *}: cached in $bin"; done
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: the local tier builds etcd and kube-apiserver with Go (>= 1.25)" >&2
  exit 3
fi

mkdir -p "$bin"
# Builds of other pins or recipes are never used again by this checkout: remove them.
for stale in "$cache_root"/kube-*; do
  if [ -d "$stale" ] && [ "$stale" != "$cache_root/kube-$key" ]; then rm -rf "$stale"; fi
done
# -mod=mod: the module has no vendor/ folder; go.sum holds every hash, so nothing unverified
# builds. -trimpath: no paths of this machine in the binaries. Each binary is built into a
# temporary name and moved into place, so an interrupted build never leaves a half-written tool
# that the next run would take as done.
export GOFLAGS="-mod=mod"

# The release stamped into kube-apiserver and kube-controller-manager as Kubernetes' own build
# does (k8s.io/kubernetes v1.35.0 hack/lib/version.sh:151-182, kube::version::ldflags): without
# it /version says v0.0.0-master, and clients that read the server's version (Helm's
# .Capabilities.KubeVersion, pulumi-kubernetes) would see that. The commit and date are the
# release tag's, as the Go module proxy reports them.
kube_version=$(cd "$module" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
kube_info=$(cd "$module" && go mod download -json "k8s.io/kubernetes@$kube_version")
kube_commit=$(sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]*\)".*/\1/p' <<<"$kube_info" | head -n1)
kube_date=$(cd "$module" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
kube_minor=${kube_version#v1.}
kube_minor=${kube_minor%%.*}
kube_ldflags=""
for package in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X '$package.gitVersion=$kube_version' -X '$package.gitMajor=1'"
  kube_ldflags+=" -X '$package.gitMinor=$kube_minor' -X '$package.buildDate=$kube_date'"
  if [ -n "$kube_commit" ]; then
    kube_ldflags+=" -X '$package.gitCommit=$kube_commit' -X '$package.gitTreeState=clean'"
  fi
done
for entry in "${tools[@]}"; do
  read -r name folder package <<<"$entry"
  if [ -x "$bin/$name" ]; then
    echo "== $name: cached in $bin"
    continue
  fi
  start=$(date +%s)
  ldflags=""
  if [ "$folder" = "." ]; then ldflags=$kube_ldflags; fi
  (cd "$module/$folder" && go build -trimpath -ldflags "$ldflags" -o "$bin/.$name.partial" "$package")
  mv "$bin/.$name.partial" "$bin/$name"
  echo "== $name: built in $(($(date +%s) - start)) s ($package, $bin)"
done
