"""Labels and annotations the platform puts on what it creates.

The policy pack (``policies/``) and the acceptance suite read the same names; they keep their own
copies because the pack runs in its own virtualenv; ``tests/policies/test_policy_model.py``
keeps the copies equal.
"""

from __future__ import annotations

# On every object the platform creates inside or for a tenant.
TENANT_LABEL = "gpu-platform.io/tenant"
POOL_LABEL = "gpu-platform.io/pool"
# A ConfigMap (in the tenant's kube-system) declaring a pool's cards for review and capacity
# checks; its data key INVENTORY_KEY holds JSON (see components.gpu_inventory).
DECLARED_INVENTORY_LABEL = "gpu-platform.io/declared-inventory"
INVENTORY_KEY = "cards.json"
# Objects that exist only in the lab (mock allocation completer, simulated inventories).
LAB_ONLY_LABEL = "gpu-platform.io/lab-only"
# HAMi's own annotations (platform.md §3).
HAMI_NODE_REGISTER = "hami.io/node-nvidia-register"
HAMI_WEBHOOK_IGNORE_LABEL = "hami.io/webhook"
# The read of a control-plane object's live uid (for the tenant provider's cluster_identifier) is
# named "<resource name>-identity" (components/gpu_tenant.py): it has the object's type, and the
# policy pack must not judge it as a second control plane.
IDENTITY_READ_SUFFIX = "-identity"
