"""Fakes for the ManagementCluster's commands: what they print on a real ``pulumi up``.

* the kind cluster command prints the cluster's kubeconfig (``kind get kubeconfig``);
* the network command prints ``docker network inspect kind`` with the **IPv6 subnet listed
  first**, as on the hosts where the lab report hit the pitfall.

In preview nothing is faked: command output is unknown there, as in ``pulumi preview``.
"""

from __future__ import annotations

import json
from typing import Any

from pulumi.runtime.mocks import MockResourceArgs

COMMAND = "command:local:Command"

# The IPv4 subnet the fake network has; tests derive expected pool addresses from it by hand.
FAKE_IPV4_SUBNET = "172.18.0.0/16"
FAKE_IPV4_GATEWAY = "172.18.0.1"
FAKE_IPV6_SUBNET = "fc00:f853:ccd:e793::/64"

FAKE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: ZmFrZS1jYQ==
    server: https://127.0.0.1:41234
  name: kind-gpu-lab
contexts:
- context:
    cluster: kind-gpu-lab
    user: kind-gpu-lab
  name: kind-gpu-lab
current-context: kind-gpu-lab
users:
- name: kind-gpu-lab
  user:
    client-certificate-data: ZmFrZS1jZXJ0
    client-key-data: ZmFrZS1rZXk=
"""


def fake_network_inspect(name: str = "kind") -> str:
    """``docker network inspect kind`` as Docker prints it on a dual-stack host."""
    return json.dumps(
        [
            {
                "Name": name,
                "Id": "4f1c5d0e8a9b",
                "Driver": "bridge",
                "EnableIPv6": True,
                "IPAM": {
                    "Driver": "default",
                    "Options": {},
                    "Config": [
                        {"Subnet": FAKE_IPV6_SUBNET, "Gateway": "fc00:f853:ccd:e793::1"},
                        {"Subnet": FAKE_IPV4_SUBNET, "Gateway": FAKE_IPV4_GATEWAY},
                    ],
                },
                "Options": {"com.docker.network.bridge.enable_ip_masquerade": "true"},
            }
        ],
        indent=4,
    )


def fake_outputs(args: MockResourceArgs, preview: bool) -> dict[str, Any] | None:
    if args.typ != COMMAND or preview:
        return None
    if args.name.endswith("-kind-cluster"):
        return {"stdout": FAKE_KUBECONFIG, "stderr": ""}
    if args.name.endswith("-kind-network"):
        environment = args.inputs.get("environment") or {}
        return {"stdout": fake_network_inspect(environment.get("DOCKER_NETWORK", "kind"))}
    if args.name.endswith(
        ("-backup-store-root-secret", "-backup-archive-key", "-metrics-prometheus-password")
    ):
        # new-secret.sh prints 32 random bytes as hex.
        return {"stdout": "5e" * 32 + "\n", "stderr": ""}
    if args.name.endswith(("-metallb-ready", "-kamaji-ready", "-capi-ready")):
        return {"stdout": "wait-ready: ready", "stderr": ""}
    return None
