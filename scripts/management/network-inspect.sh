#!/usr/bin/env bash
# Print `docker network inspect` JSON for the network the kind cluster's node runs on; the
# program carves the MetalLB pool from its IPv4 subnet (components.lab_network). Read-only.
#
# Environment:
#   DOCKER_NETWORK   the docker network (kind's default: kind)
set -euo pipefail

: "${DOCKER_NETWORK:?DOCKER_NETWORK is required}"

if ! docker network inspect "$DOCKER_NETWORK"; then
  echo "network-inspect: docker network $DOCKER_NETWORK not found: it is created by" \
    "'kind create cluster'; check KIND_EXPERIMENTAL_DOCKER_NETWORK and Docker" >&2
  exit 1
fi
