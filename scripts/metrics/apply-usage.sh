#!/bin/sh
# The usage publisher's second step (components/metrics/usage_publisher.py): writes the tenant's
# usage ConfigMap, made by publish_usage.py, into the tenant's own cluster with the tenant's admin
# kubeconfig (Kamaji's admin.svc, mounted from this tenant's Secret only). Server-side apply with
# the publisher's own field manager, taking its fields back from anyone who edited them since.
# Idempotent: the same manifest applied twice changes nothing.
set -eu

: "${TENANT_KUBECONFIG:?the tenant admin kubeconfig file}"
: "${USAGE_MANIFEST:?the ConfigMap manifest publish_usage.py wrote}"

kubectl --kubeconfig "$TENANT_KUBECONFIG" apply --server-side --force-conflicts \
  --field-manager gpu-platform-usage-publisher --filename "$USAGE_MANIFEST"
