#!/usr/bin/env bash
# Remove the lab's registry caches and their volumes (every cached image): `make clean-caches`.
# `make destroy` leaves them; the next `make lab` then pulls everything from the internet again.
# Idempotent: nothing to remove is not an error.
#
# Environment:
#   CACHE_LABEL   the label every cache container and volume carries
#                 (default gpu-platform.io/registry-cache, components/lab/registry_cache.py)
set -euo pipefail

label="${CACHE_LABEL:-gpu-platform.io/registry-cache}"

mapfile -t containers < <(docker ps -aq --filter "label=$label")
if ((${#containers[@]})); then
  docker rm -f "${containers[@]}" >/dev/null
  echo "registry caches: removed ${#containers[@]} container(s)" >&2
fi
mapfile -t volumes < <(docker volume ls -q --filter "label=$label")
if ((${#volumes[@]})); then
  docker volume rm "${volumes[@]}" >/dev/null
  echo "registry caches: removed volume(s) ${volumes[*]}" >&2
fi
