"""Names the platform puts on what it creates, as the policy pack reads them.

These are copies of ``components/labels.py`` (keep them equal: the pack runs in its own
virtualenv with only pulumi and pulumi-policy, so it cannot import ``components``).
"""

from __future__ import annotations

from typing import Final

# Copied from components/labels.py.
TENANT_LABEL: Final = "gpu-platform.io/tenant"
POOL_LABEL: Final = "gpu-platform.io/pool"
DECLARED_INVENTORY_LABEL: Final = "gpu-platform.io/declared-inventory"
INVENTORY_KEY: Final = "cards.json"
LAB_ONLY_LABEL: Final = "gpu-platform.io/lab-only"
HAMI_NODE_REGISTER: Final = "hami.io/node-nvidia-register"
HAMI_WEBHOOK_IGNORE_LABEL: Final = "hami.io/webhook"

# The value of HAMI_WEBHOOK_IGNORE_LABEL that makes HAMi's webhook skip a namespace or pod.
HAMI_WEBHOOK_IGNORE_VALUE: Final = "ignore"
# Component type tokens of the platform program (components/gpu_tenant.py, gpu_worker_pool.py).
GPU_TENANT_TYPE: Final = "gpu-platform:index:GpuTenant"
GPU_WORKER_POOL_TYPE: Final = "gpu-platform:index:GpuWorkerPool"
# Tenant Kubernetes providers are named "<tenant>-provider" (components/gpu_tenant.py).
TENANT_PROVIDER_SUFFIX: Final = "-provider"
# Reads of a control plane's live uid are named "<resource name>-identity"
# (components/gpu_tenant.py): the same type as the control plane, not a second one.
IDENTITY_READ_SUFFIX: Final = "-identity"
