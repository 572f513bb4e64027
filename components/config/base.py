"""What every configuration model shares: the strict base model, the error type, and the
checks of names and versions."""

from __future__ import annotations

import ipaddress
import re
from types import MappingProxyType

from pulumi import RunError
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationInfo,
)
from pydantic.alias_generators import to_camel

from components import kubernetes_versions

CONFIG_KEY = "platform"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
KUBERNETES_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
# A Go ``time.ParseDuration`` string (what HAMi's --node-lock-timeout flag takes).
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
# Whole hours, minutes and seconds, as Cluster API's metav1.Duration fields are written here
# (``300s``, ``5m``, ``1h30m``; components.prod.machine_specs.parse_duration_seconds).
WHOLE_DURATION = re.compile(r"^(?=\d)(\d+h)?(\d+m)?(\d+s)?$")
# A Kubernetes resource.Quantity of bytes: a number and a binary or decimal SI suffix
# (k8s.io/apimachinery pkg/api/resource/quantity.go, the <quantity> grammar).
STORAGE_QUANTITY = re.compile(r"^(\d+(\.\d+)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
_STORAGE_FACTORS = {
    **{suffix: 1024 ** (i + 1) for i, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    **{suffix: 1000 ** (i + 1) for i, suffix in enumerate(("k", "M", "G", "T", "P", "E"))},
    "": 1,
}


def storage_bytes(quantity: str) -> int:
    """Bytes of a ``STORAGE_QUANTITY`` (``8Gi`` -> 8589934592, ``1.5G`` -> 1500000000)."""
    match = STORAGE_QUANTITY.match(quantity)
    if match is None:
        raise ValueError(f"{quantity!r} is not a storage quantity (e.g. 8Gi)")
    return int(float(match.group(1)) * _STORAGE_FACTORS[match.group(3) or ""])


# Any Kubernetes resource.Quantity (same grammar, with the decimal SI suffixes n, u, m and
# exponents): what a container's requests and limits take.
RESOURCE_QUANTITY = re.compile(
    r"^(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|[eE][+-]?\d+)?$"
)
# A DataStore endpoint: "bare IP/FQDN and port", no protocol (clastix/kamaji 26.8.2-edge
# api/v1alpha1/datastore_types.go:39-41).
DATASTORE_ENDPOINT = re.compile(
    r"^([a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?|\[[0-9a-fA-F:.]+\]):\d{1,5}$"
)
# A name the program reads with pulumi.Config(): one key of this project's namespace, as
# `pulumi config set --secret NAME` writes it (a ':' would make it another namespace's key).
CONFIG_KEY_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
# An OCI image reference: [registry[:port]/]repository[:tag][@sha256:digest].
IMAGE_REFERENCE = re.compile(
    r"^([a-z0-9.-]+(:\d+)?/)?[a-z0-9]+([._-][a-z0-9]+)*(/[a-z0-9]+([._-][a-z0-9]+)*)*"
    r"(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?$"
)
# A release version like v1.13.2.
RELEASE_VERSION = re.compile(r"^v\d+\.\d+\.\d+$")
# A label value (k8s.io/apimachinery pkg/util/validation/validation.go, IsValidLabelValue).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
# A label key: an optional DNS-subdomain prefix and a name (IsQualifiedName).
LABEL_KEY = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
# Schema and username end up in etcd prefixes, SQL database and role names: keep them portable.
DATASTORE_IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# Namespaces HAMi's webhook must never gate (platform.md §3, pitfall 3).
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# Cross-field checks report every problem at once; each becomes its own line in the error.
PROBLEM_SEPARATOR = "\n"
# Fixes for pydantic's generic messages, by error type.
_FIXES = MappingProxyType(
    {
        "greater_than": "zero or negative values are not allowed",
        "greater_than_equal": "use a larger value",
        "less_than_equal": "use a smaller value",
        "too_short": "add at least one entry",
        "literal_error": "use one of the listed values",
        "int_parsing": "write a whole number",
        "int_from_float": "write a whole number",
        # Strict models (``_Model``): a value of another YAML type is refused, not coerced.
        "int_type": "write a whole number (unquoted; true, false and 2.0 are not numbers here)",
        "bool_type": "write true or false (unquoted)",
        "float_type": "write a number (unquoted)",
        "list_type": "write a list (YAML lines starting with '- ')",
        "dict_type": "write a mapping (YAML 'key: value' lines)",
        "model_type": "write a mapping (YAML 'key: value' lines)",
        "string_type": "write a string (quote it in YAML)",
        "bool_parsing": "write true or false",
        "string_pattern_mismatch": "see this key in docs/configuration.md",
    }
)


class ConfigError(RunError, ValueError):
    """Bad stack configuration: one message per problem, each naming the key and the fix.

    A ``pulumi.RunError``: the CLI's Python host prints a RunError as its message alone and any
    other exception with a traceback (pulumi/pulumi v3.259.0,
    sdk/python/cmd/pulumi-language-python-exec:234-240)."""


def problem_message(header: str, problems: list[str]) -> str:
    """``header: problem`` on one line for one problem; one indented line per problem else."""
    if len(problems) == 1:
        return f"{header}: {problems[0]}"
    return f"{header}:\n  " + "\n  ".join(problems)


class _Model(BaseModel):
    """Strict base: camelCase keys in YAML, unknown keys rejected, values frozen."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
        # No coercion: ``replicas: true`` or ``memoryMiB: 4096.5`` is refused, not taken as 1 or
        # 4096 (YAML and JSON give every value its own type, so nothing correct is refused).
        strict=True,
    )


def _dns1123(value: str, what: str) -> str:
    if len(value) > 63 or not DNS1123_LABEL.match(value):
        raise ValueError(
            f"{what} {value!r} is not a DNS-1123 label: use at most 63 lower-case letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return value


VERSIONS_CONTEXT = "tenant_kubernetes_versions"
"""The validation-context key holding the versions the stack's environment can run."""


def _kubernetes_version(value: str, info: ValidationInfo | None = None) -> str:
    """A Kubernetes release the platform can run: one Kamaji accepts, published for HAMi's
    kube-scheduler (``components.kubernetes_versions``; the lab also needs a kind image). The
    hint names versions the stack's environment can run (``VERSIONS_CONTEXT`` in the validation
    context: ``Substrate.tenant_kubernetes_versions``), so following it is never refused next."""
    if not KUBERNETES_VERSION.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes version: write it like v1.35.0")
    context = info.context if info is not None and isinstance(info.context, dict) else {}
    problem = kubernetes_versions.version_problem(
        value,
        kubernetes_versions.released_versions(),
        "a released Kubernetes patch",
        suggest_from=context.get(VERSIONS_CONTEXT),
    )
    if problem is not None:
        raise ValueError(problem)
    return value


def _cidr(value: str) -> str:
    """A network CIDR (host bits zero), else a ValueError saying how to write one."""
    try:
        ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a network CIDR like 10.10.0.0/16 ({exc})") from exc
    return value


def _config_key(value: str | None) -> str | None:
    """A config key name the program can read (None: not given)."""
    if value is not None and not CONFIG_KEY_NAME.match(value):
        raise ValueError(
            f"{value!r} is not a config key name: write a name like teamDatastoreCredentials "
            "(letters, digits, '_', '-', '.'; no namespace: the program reads it in its own)"
        )
    return value


def _labels(value: dict[str, str]) -> dict[str, str]:
    """Kubernetes label keys and values (a selector with others is refused by the API)."""
    for key, text in value.items():
        if len(key.rsplit("/", 1)[-1]) > 63 or not LABEL_KEY.match(key):
            raise ValueError(f"{key!r} is not a label key: write one like provider-components")
        if len(text) > 63 or not LABEL_VALUE.match(text):
            raise ValueError(
                f"{text!r} (label {key}) is not a label value: at most 63 letters, digits, '-', "
                "'_' and '.', starting and ending with a letter or digit"
            )
    return value


def _matching(value: str, pattern: re.Pattern[str], what: str, example: str) -> str:
    """``value`` when ``pattern`` matches it, else a ValueError saying what to write."""
    if not pattern.match(value):
        raise ValueError(f"{value!r} is not {what}: write it like {example}")
    return value
