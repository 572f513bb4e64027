"""Stack configuration: the pydantic models for ``<project>:platform``.

The whole platform is one structured value in ``Pulumi.<stack>.yaml``. It is validated once,
before any resource is registered (``components.stack.parse_platform``): every model forbids
unknown keys and is frozen, and every error names the key (``tenants[1].dataStore.schema``) and
the fix. This package is the bottom layer of the program: it imports nothing of it but the
pinned versions and the card catalog its defaults and descriptions name.

* ``base``: the strict base model, ``ConfigError``, name and version rules;
* ``pools``: cards and worker pools; ``datastores``; ``tenants``; ``management``;
* ``platform``: the whole stack and the cross-field checks every stack has;
* ``loading``: the raw object into models, and the secret config keys it names.
"""

from components.config.backups import TenantBackups
from components.config.base import (
    CONFIG_KEY,
    DATASTORE_IDENTIFIER,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    GO_DURATION,
    KUBERNETES_VERSION,
    PROBLEM_SEPARATOR,
    SYSTEM_NAMESPACES,
    ConfigError,
    problem_message,
)
from components.config.capacity import CapacitySettings
from components.config.datastores import DataStoreBinding, DataStoreSpec, DedicatedDataStore
from components.config.loading import (
    check_secrets_are_secret,
    check_secrets_present,
    required_secret_keys,
    validate_models,
)
from components.config.management import (
    ClusterApiVersions,
    ExistingManagement,
    InfrastructureProvider,
    KindManagement,
    Management,
    ProviderFetch,
    ProviderFetchSources,
)
from components.config.metrics import MetricsSettings, PrometheusOperatorSettings
from components.config.platform import GpuDriver, HamiSettings, PlatformConfig, platform_problems
from components.config.pools import (
    CardSpec,
    MachineHealthCheckSpec,
    MachineSpec,
    RollingUpdate,
    WorkerPool,
)
from components.config.tenants import (
    PLATFORM_NAMESPACES,
    WEBHOOK_PLUGINS,
    AdmissionSettings,
    ComponentResources,
    ControlPlane,
    ControlPlaneResources,
    DeviceQuota,
    GpuQuota,
    GpuRequest,
    ManagementNamespace,
    Tenant,
    TenantNetwork,
    Workload,
)

__all__ = [
    "CONFIG_KEY",
    "DATASTORE_IDENTIFIER",
    "DNS1123_LABEL",
    "DNS1123_SUBDOMAIN",
    "GO_DURATION",
    "KUBERNETES_VERSION",
    "PLATFORM_NAMESPACES",
    "PROBLEM_SEPARATOR",
    "SYSTEM_NAMESPACES",
    "WEBHOOK_PLUGINS",
    "AdmissionSettings",
    "CapacitySettings",
    "CardSpec",
    "ClusterApiVersions",
    "ComponentResources",
    "ConfigError",
    "ControlPlane",
    "ControlPlaneResources",
    "DataStoreBinding",
    "DataStoreSpec",
    "DedicatedDataStore",
    "DeviceQuota",
    "ExistingManagement",
    "GpuDriver",
    "GpuQuota",
    "GpuRequest",
    "HamiSettings",
    "InfrastructureProvider",
    "KindManagement",
    "MachineHealthCheckSpec",
    "MachineSpec",
    "Management",
    "ManagementNamespace",
    "MetricsSettings",
    "PlatformConfig",
    "PrometheusOperatorSettings",
    "ProviderFetch",
    "ProviderFetchSources",
    "RollingUpdate",
    "Tenant",
    "TenantBackups",
    "TenantNetwork",
    "WorkerPool",
    "Workload",
    "check_secrets_are_secret",
    "check_secrets_present",
    "platform_problems",
    "problem_message",
    "required_secret_keys",
    "validate_models",
]
