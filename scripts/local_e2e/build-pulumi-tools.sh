#!/usr/bin/env bash
# Build the Pulumi tools of the real-engine tier (tests/local/engine, `make local-e2e`) once per
# machine into a per-user cache keyed by a hash of their pinned modules and of this script, so a
# changed pin builds anew and an unchanged one is never rebuilt. Nothing is written into the
# checkout. Idempotent: a complete cache is left as it is.
#
#   bin/pulumi                      the CLI, github.com/pulumi/pulumi/pkg/v3 at the version
#                                   tests/local/tools/pulumi/go.mod pins
#   bin/pulumi-resource-kubernetes  the provider at the version
#                                   tests/local/tools/pulumi/kubernetes/go.mod pins
#   home/                           a PULUMI_HOME with that provider installed under its own
#                                   version (`pulumi plugin install resource kubernetes V --file`)
#
# What the Go module proxy reachable here does not serve (pulumi-language-python, the
# pulumi-command provider, the pinned releases themselves) is listed in docs/testing.md, "The
# real-engine tier", with the proxy's answers.
#
# Usage: scripts/local_e2e/build-pulumi-tools.sh [--print-dir]
#   --print-dir  only print the cache directory (built or not), build nothing
# Exits 3 with one line when Go is missing (the tests then skip outside CI and fail in CI).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cli_module="$root/tests/local/tools/pulumi"
k8s_module="$cli_module/kubernetes"
cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/gpu-platform/local-e2e"
key=$(cat "$cli_module/go.mod" "$cli_module/go.sum" "$k8s_module/go.mod" "$k8s_module/go.sum" \
  "$0" | sha256sum | cut -c1-16)
dir="$cache_root/pulumi-$key"

if [ "${1:-}" = "--print-dir" ]; then
  echo "$dir"
  exit 0
fi

if [ -f "$dir/.complete" ]; then
  echo "== pulumi tools: cached in $dir"
  exit 0
fi

if ! command -v go >/dev/null 2>&1; then
  echo "go not found: the real-engine tier builds the Pulumi CLI and providers with Go (>= 1.26)" >&2
  exit 3
fi

# The versions, read from the pinned modules (the `require` lines of go.mod).
module_version() { # module_dir module_path
  (cd "$1" && go list -m -f '{{.Version}}' "$2")
}
export GOFLAGS="-mod=mod"
cli_version=$(module_version "$cli_module" github.com/pulumi/pulumi/pkg/v3)
k8s_pseudo=$(module_version "$k8s_module" github.com/pulumi/pulumi-kubernetes/provider/v4)
# The provider module is served only as a pseudo-version; the release it is (the commit tagged
# v4.25.0, tests/local/tools/pulumi/kubernetes/go.mod) is written down there and here, and the
# build checks the pseudo-version still names that commit.
k8s_version=4.25.0
k8s_commit=f47bc2d6f199
case "$k8s_pseudo" in
  *-"$k8s_commit") ;;
  *)
    echo "tests/local/tools/pulumi/kubernetes/go.mod pins $k8s_pseudo, not commit $k8s_commit" \
      "(v$k8s_version): update k8s_version/k8s_commit in $0" >&2
    exit 1
    ;;
esac

mkdir -p "$dir/bin"
build() { # module_dir output package [go build flags...]
  local module=$1 out=$2 package=$3 start
  shift 3
  if [ -x "$dir/bin/$out" ]; then
    echo "== $out: cached in $dir/bin"
    return
  fi
  start=$(date +%s)
  # -trimpath: no paths of this machine in the binaries. Built into a temporary name and moved
  # into place, so an interrupted build never leaves a half-written tool taken as done.
  (cd "$module" && go build -trimpath "$@" -o "$dir/bin/.$out.partial" "$package")
  mv "$dir/bin/.$out.partial" "$dir/bin/$out"
  echo "== $out: built in $(($(date +%s) - start)) s ($package, $dir/bin)"
}

# The CLI reports its version from this variable (pulumi/pulumi, sdk/go/common/version/version.go).
build "$cli_module" pulumi github.com/pulumi/pulumi/pkg/v3/cmd/pulumi \
  -ldflags "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=$cli_version"

# The provider embeds schema-embed.json and terraform-mapping-embed.json, which its release build
# generates with `go generate` (pulumi-kubernetes v4.25.0,
# provider/cmd/pulumi-resource-kubernetes/main.go:15-31 and generate.go: schema.json with the
# version set, and terraform-mapping.json, re-serialized); the module zip has only the sources.
# The module cache is read-only and `go build -overlay` may not lay files over it, so the
# provider's module is copied into the cache, the two files are generated there, and a workspace
# file (go.work) replaces the module with that copy for this one build; every other module still
# comes from tests/local/tools/pulumi/kubernetes/go.mod and is checked against its go.sum.
provider_dir=$(cd "$k8s_module" && go list -m -f '{{.Dir}}' github.com/pulumi/pulumi-kubernetes/provider/v4)
src="$dir/src/pulumi-kubernetes-provider"
if [ ! -x "$dir/bin/pulumi-resource-kubernetes" ]; then
  rm -rf "$src"
  mkdir -p "$dir/src"
  cp -R "$provider_dir" "$src"
  chmod -R u+w "$src"
  python3 - "$src/cmd/pulumi-resource-kubernetes" "$k8s_version" <<'PY'
import json, pathlib, sys
cmd, version = pathlib.Path(sys.argv[1]), sys.argv[2]
schema = json.loads((cmd / "schema.json").read_text())
schema["version"] = version
(cmd / "schema-embed.json").write_text(json.dumps(schema, separators=(",", ":")))
mapping = json.loads((cmd / "terraform-mapping.json").read_text())
(cmd / "terraform-mapping-embed.json").write_text(json.dumps(mapping, separators=(",", ":")))
PY
  cat >"$dir/src/go.work" <<EOF
$(grep -m1 '^go ' "$k8s_module/go.mod")

use $k8s_module

replace github.com/pulumi/pulumi-kubernetes/provider/v4 => $src
EOF
fi
# Workspace mode takes no -mod=mod.
GOWORK="$dir/src/go.work" GOFLAGS="" build "$k8s_module" pulumi-resource-kubernetes \
  github.com/pulumi/pulumi-kubernetes/provider/v4/cmd/pulumi-resource-kubernetes \
  -ldflags "-X github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version=$k8s_version"
rm -rf "$dir/src"

# The test PULUMI_HOME: the provider under its own version, never under the program's pin.
# (`--file`: pulumi/pulumi v3.274.0, pkg/cmd/pulumi/plugin/plugin_install.go:110.)
PULUMI_HOME="$dir/home" PULUMI_SKIP_UPDATE_CHECK=true "$dir/bin/pulumi" plugin install \
  resource kubernetes "$k8s_version" --file "$dir/bin/pulumi-resource-kubernetes" --reinstall

cat >"$dir/versions.json" <<EOF
{"cli": "${cli_version#v}", "kubernetes": "$k8s_version", "kubernetesModule": "$k8s_pseudo"}
EOF
touch "$dir/.complete"
echo "== pulumi tools ready in $dir (CLI ${cli_version#v}, kubernetes provider $k8s_version)"
