"""The tier's own servers are what the tests after them take them for: the tenants' Kubernetes
release, RBAC that refuses and grants, client certificates as identities, and two servers on one
etcd that never see each other's objects (each on its own prefix, as Kamaji runs tenants)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.local.kube import APIServer, Kube, wait_for
from tests.support.harness import load_stack_config


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_servers_run_the_release_the_tenants_run(
    stack: str, management_apiserver: APIServer
) -> None:
    version = management_apiserver.admin.call("GET", "/version")
    platform = load_stack_config(stack)["gpu-platform:platform"]
    assert version["gitVersion"] == platform["kubernetesVersion"]


def _client_from_kubeconfig(path: Path) -> Kube:
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    cluster = config["clusters"][0]["cluster"]
    user = config["users"][0]["user"]
    return Kube(
        cluster["server"],
        Path(cluster["certificate-authority"]),
        Path(user["client-certificate"]),
        Path(user["client-key"]),
    )


def test_a_user_is_refused_until_a_role_binding_grants_it(
    management_apiserver: APIServer,
) -> None:
    admin = management_apiserver.admin
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "rbac-check"}})
    kubeconfig = management_apiserver.user_kubeconfig("jane", ["developers"])
    assert kubeconfig.stat().st_mode & 0o077 == 0
    jane = _client_from_kubeconfig(kubeconfig)
    path = "/api/v1/namespaces/rbac-check/configmaps"
    refused = jane.request("GET", path)
    assert refused.status_code == 403
    assert 'User "jane" cannot list resource "configmaps"' in refused.json()["message"]
    admin.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "developers-view", "namespace": "rbac-check"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "view",
            },
            # Granted to the group: the certificate's O field is the user's group.
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "developers"}
            ],
        }
    )
    wait_for(
        "jane may list configmaps (view aggregated, binding in force)",
        lambda: jane.request("GET", path).status_code == 200,
        log=management_apiserver.log,
    )
    jane.close()


def test_two_servers_on_one_etcd_never_see_each_others_objects(
    management_apiserver: APIServer, tenant_apiserver: APIServer
) -> None:
    marker = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "only-on-management", "namespace": "default"},
        "data": {"k": "v"},
    }
    management_apiserver.admin.create(marker)
    assert management_apiserver.admin.get("v1", "ConfigMap", "only-on-management", "default")
    missing = tenant_apiserver.admin.request(
        "GET", "/api/v1/namespaces/default/configmaps/only-on-management"
    )
    assert missing.status_code == 404
    assert management_apiserver.server != tenant_apiserver.server
