#!/usr/bin/env bash
# Runs the command it is given with TMPDIR pointing at a fresh private directory (mode 0700)
# under the caller's temp dir, and removes that directory when the command ends, whatever its
# exit status, or when this script is interrupted. Nothing else on the host changes.
#
# Why: the kubernetes provider writes every explicit kubeconfig it is configured with (every
# tenant's admin credential, on every preview, up and destroy) to os.CreateTemp("", "kubeconfig")
# for Helm and never removes it (pulumi/pulumi-kubernetes v4.25.0
# provider/pkg/provider/util.go:125-132, called from Configure at provider.go:774; the same at
# 94977969d, its main branch of 2026-07-01: util.go:124-131, provider.go:886). Go's os.TempDir() reads $TMPDIR,
# so the files land here and go with the directory.
set -euo pipefail

if [ "$#" -eq 0 ]; then
  echo "usage: $0 <command> [args...]" >&2
  exit 2
fi

parent="${TMPDIR:-/tmp}"
private="$(mktemp -d "${parent%/}/gpu-platform-pulumi.XXXXXXXX")"
chmod 700 "$private"
trap 'rm -rf -- "$private"' EXIT
# An interrupted run still removes the directory: exit through the EXIT trap.
trap 'exit 130' INT
trap 'exit 143' TERM

status=0
TMPDIR="$private" "$@" || status=$?
exit "$status"
