"""Where tenants' control-plane state lives: DataStores and each tenant's binding to one."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from components.config.base import (
    DATASTORE_ENDPOINT,
    DATASTORE_IDENTIFIER,
    DNS1123_SUBDOMAIN,
    STORAGE_QUANTITY,
    _config_key,
    _dns1123,
    _matching,
    _Model,
    storage_bytes,
)


class _ServerAccess(_Model):
    """The checks of a DataStore's servers and of the secret config key with its credentials,
    shared by a declared and a dedicated DataStore (each declares the two fields itself)."""

    @field_validator("endpoints", check_fields=False)
    @classmethod
    def _endpoints(cls, value: list[str]) -> list[str]:
        return _endpoint_list(value)

    @field_validator("credentials_config_key", check_fields=False)
    @classmethod
    def _credentials(cls, value: str | None) -> str | None:
        return _config_key(value)


class DataStoreSpec(_ServerAccess):
    """A DataStore the platform creates and tenants may bind to by name."""

    name: str = Field(description="DataStore name (cluster-scoped)")
    driver: Literal["etcd", "PostgreSQL", "MySQL", "NATS"] = Field(description="its kind")
    endpoints: list[str] = Field(min_length=1, description="host:port of each server")
    credentials_config_key: str | None = Field(
        default=None,
        description="secret config key holding TLS material / password (never in clear text)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "DataStore name")


def _endpoint_list(value: list[str]) -> list[str]:
    for endpoint in value:
        _matching(endpoint, DATASTORE_ENDPOINT, "a host:port endpoint", "db.example.internal:5432")
    return value


class DedicatedDataStore(_ServerAccess):
    """A DataStore that serves exactly one tenant: a kamaji-etcd release, or an external one."""

    driver: Literal["etcd", "PostgreSQL", "MySQL", "NATS"] = Field(
        default="etcd", description="etcd is deployed per tenant; others are external"
    )
    replicas: PositiveInt = Field(
        default=3, description="kamaji-etcd members, an odd number (etcd only; fixed at creation)"
    )
    storage_size: str = Field(
        default="8Gi", description="kamaji-etcd PVC size (etcd only; fixed at creation)"
    )
    storage_class_name: str | None = Field(
        default=None,
        description="kamaji-etcd PVC StorageClass (etcd only; fixed at creation); default: the "
        "management cluster's default StorageClass, which must then exist",
    )
    endpoints: list[str] = Field(
        default_factory=list, description="external servers; empty = deploy kamaji-etcd"
    )
    credentials_config_key: str | None = Field(
        default=None, description="secret config key with its TLS material / password"
    )

    @model_validator(mode="after")
    def _external_needs_endpoints(self) -> DedicatedDataStore:
        if self.driver != "etcd" and not self.endpoints:
            raise ValueError(
                f"a dedicated {self.driver} DataStore is external: give its endpoints "
                "(only etcd is deployed by the platform)"
            )
        if self.endpoints and self.credentials_config_key is None:
            raise ValueError(
                "an external DataStore needs credentialsConfigKey naming a secret config value"
            )
        return self

    @field_validator("replicas")
    @classmethod
    def _odd_members(cls, value: int) -> int:
        # etcd's quorum is a majority: 2 members tolerate no failure (as 1 does), 4 one (as 3).
        if value % 2 == 0:
            raise ValueError(
                f"{value} etcd members tolerate no more failures than {value - 1}: use an odd "
                "number (1, 3 or 5)"
            )
        return value

    @field_validator("storage_size")
    @classmethod
    def _storage_size(cls, value: str) -> str:
        return _matching(value, STORAGE_QUANTITY, "a Kubernetes storage quantity", "8Gi")

    @field_validator("storage_class_name")
    @classmethod
    def _storage_class(cls, value: str | None) -> str | None:
        if value is not None and not DNS1123_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a StorageClass name (a DNS-1123 subdomain)")
        return value

    @model_validator(mode="after")
    def _room_for_etcd(self) -> DedicatedDataStore:
        # etcd's space quota is half of what is left after 1 GiB (prod tenant_values
        # etcd_quota_backend_bytes): under 2 GiB it would be under 512 MiB.
        if self.deploys_kamaji_etcd and storage_bytes(self.storage_size) < 2 * 2**30:
            raise ValueError(
                f"storageSize {self.storage_size} leaves a kamaji-etcd less than 512 MiB of "
                "space quota: use 2Gi or more"
            )
        return self

    @model_validator(mode="after")
    def _storage_class_only_for_kamaji_etcd(self) -> DedicatedDataStore:
        if self.storage_class_name is not None and not self.deploys_kamaji_etcd:
            raise ValueError(
                "storageClassName sizes the kamaji-etcd the platform deploys; an external "
                "DataStore has none: remove it"
            )
        return self

    @property
    def deploys_kamaji_etcd(self) -> bool:
        """True when the platform runs the etcd itself (no external endpoints)."""
        return self.driver == "etcd" and not self.endpoints


class DataStoreBinding(_Model):
    """Where a tenant's state lives: a named (possibly shared) DataStore, or a dedicated one."""

    name: str | None = Field(default=None, description="an existing or declared DataStore")
    dedicated: DedicatedDataStore | None = Field(
        default=None, description="a DataStore serving this tenant only"
    )
    schema_name: str = Field(
        alias="schema", description="etcd prefix / SQL database (fixed at creation)"
    )
    username: str = Field(description="datastore user (etcd user / SQL role; fixed at creation)")

    @field_validator("schema_name", "username")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not DATASTORE_IDENTIFIER.match(value):
            raise ValueError(
                f"{value!r} is not usable as a schema or username: use lower-case letters, "
                "digits and '_', starting with a letter"
            )
        return value

    @model_validator(mode="after")
    def _one_target(self) -> DataStoreBinding:
        if (self.name is None) == (self.dedicated is None):
            raise ValueError("give exactly one of name (a shared DataStore) or dedicated")
        return self
