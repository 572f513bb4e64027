"""Every pinned upstream version in one place (platform.md §4 pitfall 10).

Charts are pinned by version, images by tag — and kind's node images by digest too, because a
kindest/node tag is rebuilt for later kind releases and kind only guarantees an image built for its
own release when it is pulled by digest. Kamaji's chart is published only as ``0.0.0+latest``,
which moves with every push, so Kamaji is pinned by its release tag: the image tag here, and the
chart by the content of that tag's files (``components/chart_cache.py``). Contract tests compare
these pins with the copies of the same releases in ``../shared/upstream`` (see
``tests/contract``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from types import MappingProxyType

# The kind release the lab is built and tested with, and every node image it published, by
# digest: "Images pre-built for this release" in kind v0.31.0's release notes (the default,
# v1.35.0, is also pkg/apis/config/defaults/image.go:21 at that tag). Lab tenants run one of
# these versions (components.kubernetes_versions.kind_versions).
KIND_RELEASE = "v0.31.0"
KIND_NODE_DIGESTS: Mapping[str, str] = MappingProxyType(
    {
        "v1.35.0": "sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f",
        "v1.34.3": "sha256:08497ee19eace7b4b5348db5c6a1591d7752b164530a36f855cb0f2bdcbadd48",
        "v1.33.7": "sha256:d26ef333bdb2cbe9862a0f7c3803ecc7b4303d8cea8e814b481b09949d353040",
        "v1.32.11": "sha256:5fc52d52a7b9574015299724bd68f183702956aa4a2116ae75a63cb574b35af8",
        "v1.31.14": "sha256:6f86cf509dbb42767b6e79debc3f2c32e4ee01386f0489b3b2be24b0a55aac2b",
    }
)


def kind_node_image(kubernetes_version: str) -> str:
    """The kindest/node image of ``kubernetes_version``: by digest where the pinned kind release
    published one (``KIND_NODE_DIGESTS``), else by tag alone."""
    image = f"kindest/node:{kubernetes_version}"
    digest = KIND_NODE_DIGESTS.get(kubernetes_version)
    return f"{image}@{digest}" if digest else image


@dataclass(frozen=True)
class HelmChart:
    """A Helm chart pinned by repository, name and version."""

    repo: str
    chart: str
    version: str


@dataclass(frozen=True)
class PinnedVersions:
    """The versions this release of the program was built and contract-tested against."""

    # Management cluster (lab): kind, and the node image of the management cluster itself.
    kind: str = KIND_RELEASE
    kind_node_image: str = kind_node_image("v1.35.0")
    metallb: HelmChart = HelmChart("https://metallb.github.io/metallb", "metallb", "0.16.1")
    cert_manager: HelmChart = HelmChart("https://charts.jetstack.io", "cert-manager", "v1.21.1")
    # Kamaji's image and its chart come from one release tag. The chart is installed from a local
    # directory pinned file by file (components/pins/kamaji-chart.json; see chart_cache.py):
    # Kamaji's Helm repository only serves a moving 0.0.0+latest.
    kamaji_image_tag: str = "26.8.2-edge"
    kamaji_etcd: HelmChart = HelmChart("https://clastix.github.io/charts", "kamaji-etcd", "0.17.0")
    # The tag of the cfssl image kamaji-etcd's certificate job runs (its chart defaults to
    # ``latest``: charts/kamaji-etcd/templates/etcd_job_preinstall_1.yaml, values.yaml:216-218).
    # cloudflare/cfssl publishes an image per v* tag (.github/workflows/docker-builds.yml,
    # docker/metadata-action) and ``latest`` follows the newest, v1.6.5 (its Dockerfile builds
    # on golang:1.20, which has the bash the job's script runs in).
    kamaji_etcd_cfssl_tag: str = "v1.6.5"
    # Inside each tenant. Since Calico v3.32.0 the tigera-operator chart ships no CRDs: they come
    # from the separate crd.projectcalico.org.v1 chart of the same Calico release, installed
    # first (projectcalico/calico v3.32.1 charts/tigera-operator/README.md; release note #11727).
    # One owner for those CRDs: that release. The operator runs with manageCRDs: false
    # (components/tenant_values.py calico_values; charts/tigera-operator/values.yaml:112-114 "If
    # disabled, you must manage these resources out-of-band"), so on a bump both pins move
    # together and Helm alone upgrades the CRDs, before the operator chart (gpu_tenant.py).
    calico_crds: HelmChart = HelmChart(
        "https://docs.tigera.io/calico/charts", "crd.projectcalico.org.v1", "v3.32.1"
    )
    tigera_operator: HelmChart = HelmChart(
        "https://docs.tigera.io/calico/charts", "tigera-operator", "v3.32.1"
    )
    hami: HelmChart = HelmChart("https://project-hami.github.io/HAMi/", "hami", "2.10.0")
    hami_mock_device_plugin_tag: str = "1.0.1"
    gpu_operator: HelmChart = HelmChart(
        "https://helm.ngc.nvidia.com/nvidia", "gpu-operator", "v26.7.0"
    )
    # The lab's mock allocation completer runs this stdlib-only Python image.
    completer_image: str = "python:3.12.8-alpine3.21"
    # Cluster API (prod), installed by the cluster-api-operator chart.
    cluster_api_operator: HelmChart = HelmChart(
        "https://kubernetes-sigs.github.io/cluster-api-operator", "cluster-api-operator", "0.28.0"
    )
    cluster_api: str = "v1.13.5"
    # The Kamaji control-plane provider writes each TenantControlPlane through its own copy of
    # Kamaji's API, older than kamaji_image_tag: v0.20.0 go.mod:6 pins github.com/clastix/kamaji
    # v1.0.1-0.20260330073609-e51909fae3f5, which lacks TenantControlPlane fields added before
    # 26.8.2-edge (`git diff e51909f 26.8.2-edge -- api/`: podCidrs, serviceCidrs #1176, the
    # security contexts #1181, allocateLoadBalancerNodePorts #1205,
    # automountServiceAccountToken #1219), and its typed CreateOrUpdate
    # (controllers/kamajicontrolplane_controller_tcp.go:38-272) drops them on every update. No
    # TenantControlPlane field outside that copy survives in prod; the program sets none of them
    # (Kamaji's defaulting webhook rebuilds podCidrs from podCidr).
    kamaji_control_plane_provider: str = "v0.20.0"
    metal3_provider: str = "v1.13.2"
    # The highest tenant Kubernetes minor the pinned Kamaji accepts: its kubeadm's,
    # KubeadmVersion = "v1.36.0" (clastix/kamaji 26.8.2-edge internal/upgrade/kubeadm_version.go:7,
    # enforced by internal/webhook/handlers/tcp_version.go:34-41,81-88).
    kamaji_max_tenant_minor: int = 36
    # The metrics stack (docs/metrics.md): Prometheus (central server and per-tenant agents; the
    # v3.5 long-term-support line) and Grafana, pinned by tag (no digest could be read offline).
    prometheus_image: str = "quay.io/prometheus/prometheus:v3.5.0"
    grafana_image: str = "docker.io/grafana/grafana:12.1.1"
    # The backup alerts' source (components.metrics.backup_alerts): kube-state-metrics, the image
    # its v2.20.0 release names (README.md:101), pinned by tag.
    kube_state_metrics_image: str = "registry.k8s.io/kube-state-metrics/kube-state-metrics:v2.20.0"
    # Tenant datastore backups (docs/backups.md), with images the lab already runs: etcdctl with a
    # shell from the etcd release kamaji-etcd v0.17.0 runs its own jobs with ("latest container
    # image with shell available", charts/kamaji-etcd/values.yaml:222-224), the stdlib Python of
    # the completer, and the kubectl image of kamaji-etcd's jobs (values.yaml:219-221, tagged with
    # the cluster's minor by its etcd.jobsTagKubeVersion helper).
    backup_etcd_image: str = "quay.io/coreos/etcd:v3.5.6"
    backup_python_image: str = "python:3.12.8-alpine3.21"
    backup_kubectl_image: str = "clastix/kubectl:v1.35"

    def as_dict(self) -> dict[str, object]:
        """A plain mapping for stack outputs and ``make versions``."""
        return asdict(self)


PINNED = PinnedVersions()


@dataclass(frozen=True)
class PublishedFile:
    """A file published at a pinned upstream tag, checked by its sha256."""

    url: str
    sha256: str


# HAMi's own Grafana dashboard at the pinned HAMi tag (Project-HAMi/HAMi v2.10.0
# dashboards/hami-vgpu-dashboard.json; 27998 bytes). Grafana's init container downloads and checks
# it (components.metrics.objects); scripts/fetch_dashboards.py caches it for the offline tests.
HAMI_DASHBOARD = PublishedFile(
    url="https://raw.githubusercontent.com/Project-HAMi/HAMi/v2.10.0/dashboards/hami-vgpu-dashboard.json",
    sha256="b1bc9a66e79f3b5c4fe70d9ba50385669353962640776cb696634cd9a9c2feff",
)


def main() -> None:
    """Print the pins, one per line (``make versions``)."""
    for key, value in PINNED.as_dict().items():
        if isinstance(value, dict):
            value = f"{value['chart']} {value['version']} ({value['repo']})"
        print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
