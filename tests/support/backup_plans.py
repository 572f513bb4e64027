"""The backup plans the backup tests build objects from: a lab tenant (no owner to pause) and a
prod tenant (its Cluster paused with it), as components/gpu_tenant.py builds them."""

from __future__ import annotations

from components.backups.objects import BackupPlan
from components.prod.substrate import CLUSTER_PAUSE

LAB_PLAN = BackupPlan(
    tenant="tenant-a",
    namespace="tenant-a",
    control_plane="tenant-a",
    schema="tenant_a",
    schedule="17 */6 * * *",
    retention=8,
)
PROD_PLAN = BackupPlan(
    tenant="team-vision",
    namespace="team-vision",
    control_plane="team-vision",
    schema="team_vision",
    schedule="17 */4 * * *",
    retention=12,
    pause_owner=CLUSTER_PAUSE,
)
