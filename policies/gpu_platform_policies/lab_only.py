"""lab-only-components: the lab's GPU simulation never reaches production.

Why: the lab simulates GPUs with HAMi's mock device plugin (which advertises whatever the node's
``hami.io/node-nvidia-register`` annotation declares), a mock allocation completer that finishes
HAMi's bind on the plugin's behalf, and declared card inventories written onto nodes. In
production any of these would advertise cards that do not exist or release locks the real device
plugin owns. Forbidden when the policy config says ``environment: prod``.
"""

from __future__ import annotations

import re
from typing import Final

from gpu_platform_policies.kube import is_hami_release, release_values
from gpu_platform_policies.labels import HAMI_NODE_REGISTER, LAB_ONLY_LABEL
from gpu_platform_policies.model import Resource
from gpu_platform_policies.props import UNKNOWN, dotted, get, walk_strings

MOCK_DEVICE_PLUGIN_IMAGE: Final = "projecthami/mock-device-plugin"
# An image reference to it (optional registry, optional tag or digest); prose that merely mentions
# the name (a comment in a script) is not a use.
_MOCK_IMAGE_REF: Final = re.compile(
    r"^(?:[A-Za-z0-9.-]+(?::[0-9]+)?/)?projecthami/mock-device-plugin(?:[:@][^\s]+)?$"
)
NODE_TYPES: Final = frozenset({"kubernetes:core/v1:Node", "kubernetes:core/v1:NodePatch"})
COMMAND_TYPE_PREFIX: Final = "command:"


def check_lab_only(resource: Resource, prod: bool) -> list[str]:
    """Messages for lab-only parts in ``resource`` (always none outside prod)."""
    if not prod:
        return []
    messages: list[str] = []
    skip_paths: tuple[str | int, ...] | None = None
    if is_hami_release(resource):
        values = release_values(resource)
        if get(values, "mockDevicePlugin", "enabled") is True:
            messages.append(
                "enables HAMi's mock device plugin (values.mockDevicePlugin.enabled: true), which "
                "advertises simulated cards; in prod set it to false and let HAMi's device plugin "
                "(devicePlugin.enabled) register the real cards"
            )
            skip_paths = ("values", "mockDevicePlugin")
    for path, text in walk_strings(resource.props):
        if skip_paths is not None and path[: len(skip_paths)] == skip_paths:
            continue
        command = resource.type.startswith(COMMAND_TYPE_PREFIX)
        if _MOCK_IMAGE_REF.match(text.strip()) or (command and MOCK_DEVICE_PLUGIN_IMAGE in text):
            messages.append(
                f"uses the mock device plugin image ({dotted(path)}: {text[:80]!r}); it only "
                "simulates GPUs for the lab - remove it from prod"
            )
            break
    lab_only = resource.labels.get(LAB_ONLY_LABEL)
    if lab_only is not None and lab_only is not UNKNOWN and str(lab_only).lower() != "false":
        messages.append(
            f"is labelled {LAB_ONLY_LABEL} (part of the lab's GPU simulation, e.g. the mock "
            "allocation completer); remove it from prod, where HAMi's device plugin completes "
            "allocations"
        )
    if HAMI_NODE_REGISTER in resource.annotations:
        messages.append(
            f"sets the node annotation {HAMI_NODE_REGISTER} (a declared, simulated card "
            "inventory); in prod HAMi's device plugin registers the real cards - remove it"
        )
    if resource.type in NODE_TYPES:
        capacity = get(resource.props, "status", "capacity")
        if isinstance(capacity, dict) and any(k.startswith("nvidia.com/") for k in capacity):
            messages.append(
                "patches nvidia.com/* node capacity (the lab's health gate for the mock device "
                "plugin); in prod the device plugin reports capacity - remove it"
            )
    if resource.type.startswith(COMMAND_TYPE_PREFIX) and any(
        HAMI_NODE_REGISTER in text for _path, text in walk_strings(resource.props)
    ):
        messages.append(
            f"runs a command that writes {HAMI_NODE_REGISTER} (a simulated card inventory); in "
            "prod HAMi's device plugin registers the real cards - remove it"
        )
    return messages
