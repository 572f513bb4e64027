"""Every image the lab runs, by registry: derived from the rendered stack, committed as a pin.

The program needs the registries at run time (one pull-through cache per registry,
``components.lab.registry_cache``) and the images its workers pre-pull, but it cannot render
charts while it runs. So the list is derived offline and committed: ``scripts/lab_images.py``
(``make docs``) renders the lab stack with the verification net's helpers
(``tests.support.rendered_stack``), passes every placed object to ``derive`` and writes
``components/pins/lab-images.json`` and the table in ``docs/lab.md``;
``tests/render/test_lab_images.py`` derives it again and fails when the committed file differs
(a chart that adds an image, or one from a new registry, fails there until regenerated, and a
registry without a cache fails ``tests/program``).

Two kinds of image never appear in a rendered manifest and are added from the pinned sources:

* what Kamaji creates for a TenantControlPlane (clastix/kamaji@26.8.2-edge): the control-plane
  images from ``registry.k8s.io`` at the tenant's version (``api/v1alpha1/
  tenantcontrolplane_types.go:275``), Konnectivity's server and agent (``:401``, ``:421``) at
  ``v0.<minor>.0`` (``internal/builders/controlplane/konnectivity_server.go:38-49``), and CoreDNS
  from kubeadm's default repository (``internal/kubeadm/addon.go:30-36``, tag kubeadm's);
* what the tigera-operator creates from the Installation (tigera/operator@v1.42.3
  ``pkg/components/images.go:18`` ``CalicoRegistry = "quay.io/"``, ``pkg/components/
  calico.go``; the lab's Installation leaves the API server, Goldmane and Whisker off).

An image's registry is Docker's normalisation of its name (distribution/reference@v0.6.0
``normalize.go:126-160`` ``splitDockerDomain``): a first path element with a ``.`` or ``:`` or
``localhost`` is a registry, anything else is Docker Hub (``docker.io``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PINS_FILE = Path(__file__).resolve().parents[1] / "pins" / "lab-images.json"
DOCKER_HUB = "docker.io"
MANAGEMENT = "management"
TENANT = "tenant"
# Kinds whose pods run on every node of their cluster.
EVERY_NODE_KINDS = frozenset({"DaemonSet"})
POD_KINDS = frozenset({"Pod", "Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"})
# Calico's images the operator runs for the lab's Installation (Linux, no API server, Goldmane,
# Whisker): node, cni and pod2daemon-flexvol (calico-node's init containers) and the CSI driver
# on every node, Typha and kube-controllers once.
CALICO_EVERY_NODE = ("node", "cni", "pod2daemon-flexvol", "csi", "node-driver-registrar")
CALICO_ONCE = ("typha", "kube-controllers")
CALICO_REGISTRY = "quay.io/calico"
KUBE_REGISTRY = "registry.k8s.io"
CONTROL_PLANE_IMAGES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")


@dataclass(frozen=True, order=True)
class LabImage:
    """One image a cluster of the lab runs; ``every_node``: on each of its nodes."""

    cluster: str  # MANAGEMENT or TENANT
    image: str
    every_node: bool = False
    # Where the name comes from: "rendered" (a chart or program manifest) or the controller
    # that creates it (its tag may be the controller's choice: then ``image`` has none).
    source: str = "rendered"

    @property
    def registry(self) -> str:
        return registry_of(self.image)

    @property
    def pullable(self) -> bool:
        """Whether the name says exactly what to pull (a tag or a digest)."""
        last = self.image.rsplit("/", 1)[-1]
        return "@" in last or ":" in last


def registry_of(image: str) -> str:
    """The registry host of an image reference, as Docker and containerd normalise it."""
    first, slash, _ = image.partition("/")
    if not slash:
        return DOCKER_HUB
    if first == "localhost" or any(c in first for c in ".:") or first.lower() != first:
        return "docker.io" if first == "index.docker.io" else first
    return DOCKER_HUB


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    kind = obj.get("kind")
    if kind not in POD_KINDS:
        return None
    if kind == "Pod":
        spec = obj.get("spec")
    else:
        spec = ((obj.get("spec") or {}).get("template") or {}).get("spec")
    return spec if isinstance(spec, Mapping) else None


def pod_images(obj: Mapping[str, Any]) -> list[str]:
    """The images of a workload object's pod template (containers and init containers)."""
    spec = _pod_spec(obj)
    if spec is None:
        return []
    found: list[str] = []
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(key) or []:
            image = container.get("image") if isinstance(container, Mapping) else None
            if isinstance(image, str) and image and image not in found:
                found.append(image)
    return found


def controller_images(kubernetes_version: str, calico_version: str) -> list[LabImage]:
    """The images Kamaji and the tigera-operator create that no rendered manifest names."""
    minor = kubernetes_version.lstrip("v").split(".")[1]
    kamaji = [
        *(f"{KUBE_REGISTRY}/{name}:{kubernetes_version}" for name in CONTROL_PLANE_IMAGES),
        f"{KUBE_REGISTRY}/kas-network-proxy/proxy-server:v0.{minor}.0",
    ]
    found = [LabImage(MANAGEMENT, image, False, "kamaji") for image in kamaji]
    found += [
        LabImage(
            TENANT, f"{KUBE_REGISTRY}/kas-network-proxy/proxy-agent:v0.{minor}.0", True, "kamaji"
        ),
        # kubeadm's CoreDNS tag is kubeadm's, not configured here: listed for its registry.
        LabImage(TENANT, f"{KUBE_REGISTRY}/coredns/coredns", False, "kamaji"),
    ]
    found += [
        LabImage(TENANT, f"{CALICO_REGISTRY}/{name}:{calico_version}", True, "tigera-operator")
        for name in CALICO_EVERY_NODE
    ]
    found += [
        LabImage(TENANT, f"{CALICO_REGISTRY}/{name}:{calico_version}", False, "tigera-operator")
        for name in CALICO_ONCE
    ]
    return found


def derive(
    placed: Iterable[tuple[str, Mapping[str, Any]]],
    kubernetes_versions: Iterable[str],
    calico_version: str,
) -> list[LabImage]:
    """Every image of ``placed`` — (cluster, object) pairs, the cluster ``MANAGEMENT`` or a
    tenant's name — plus the controllers' own at each of ``kubernetes_versions`` (every
    tenant's), one entry per (cluster kind, image): a tenant image counts once for every tenant,
    on every node if any tenant runs it everywhere."""
    found: dict[tuple[str, str], LabImage] = {}

    def add(entry: LabImage) -> None:
        key = (entry.cluster, entry.image)
        known = found.get(key)
        if known is None or (entry.every_node and not known.every_node):
            found[key] = entry

    for cluster, obj in placed:
        kind_of = MANAGEMENT if cluster == MANAGEMENT else TENANT
        every = obj.get("kind") in EVERY_NODE_KINDS
        for image in pod_images(obj):
            add(LabImage(kind_of, image, every))
    for version in sorted(set(kubernetes_versions)):
        for entry in controller_images(version, calico_version):
            add(entry)
    return sorted(found.values())


def by_registry(images: Iterable[LabImage]) -> dict[str, list[str]]:
    """Distinct image names per registry, both sorted."""
    grouped: dict[str, set[str]] = {}
    for entry in images:
        grouped.setdefault(entry.registry, set()).add(entry.image)
    return {registry: sorted(names) for registry, names in sorted(grouped.items())}


# ------------------------------------------------------------------------- the committed pin


def to_json(images: Sequence[LabImage]) -> str:
    document = {
        "comment": (
            "Generated by scripts/lab_images.py (make docs) from the rendered lab stack; "
            "tests/render/test_lab_images.py fails when it is stale. Do not edit."
        ),
        "images": [
            {
                "cluster": e.cluster,
                "image": e.image,
                "everyNode": e.every_node,
                "source": e.source,
            }
            for e in images
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def from_json(text: str) -> list[LabImage]:
    document = json.loads(text)
    return [
        LabImage(item["cluster"], item["image"], bool(item["everyNode"]), item["source"])
        for item in document["images"]
    ]


def pinned(path: Path = PINS_FILE) -> list[LabImage]:
    """The committed list."""
    return from_json(path.read_text())


def registries(images: Iterable[LabImage]) -> list[str]:
    return sorted({entry.registry for entry in images})


def prepull_images(images: Iterable[LabImage], cluster: str = TENANT) -> list[str]:
    """What a node of ``cluster`` pulls ahead of its pods: every pullable image of that kind of
    cluster (a worker pulls each once, from the cache, while the management cluster comes up)."""
    return sorted({e.image for e in images if e.cluster == cluster and e.pullable})


# ---------------------------------------------------------------------------- documentation

DOC_BEGIN = "<!-- lab-images:begin (generated by `make docs`: scripts/lab_images.py) -->"
DOC_END = "<!-- lab-images:end -->"


def markdown(images: Sequence[LabImage]) -> str:
    """The table docs/lab.md shows between ``DOC_BEGIN`` and ``DOC_END``."""
    lines = [
        DOC_BEGIN,
        "",
        "| registry | cache | image | runs in | on |",
        "|---|---|---|---|---|",
    ]
    from components.lab.registry_cache import cache_for  # the cache each registry gets

    for entry in sorted(images, key=lambda e: (e.registry, e.image, e.cluster)):
        where = "every node" if entry.every_node else "one node"
        who = "" if entry.source == "rendered" else f" (created by {entry.source})"
        lines.append(
            f"| {entry.registry} | `{cache_for(entry.registry).container}` | `{entry.image}`"
            f"{who} | {entry.cluster} | {where} |"
        )
    lines += ["", DOC_END]
    return "\n".join(lines)


def replace_block(document: str, block: str) -> str:
    """``document`` with its generated block replaced by ``block``."""
    head, begin, rest = document.partition(DOC_BEGIN)
    if not begin:
        raise ValueError(f"no {DOC_BEGIN!r} marker in the document")
    _, end, tail = rest.partition(DOC_END)
    if not end:
        raise ValueError(f"no {DOC_END!r} marker in the document")
    return head + block + tail
