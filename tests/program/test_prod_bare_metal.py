"""The prod stack as bare metal will run it: what the recorded Cluster API, Metal3, GPU Operator
and HAMi objects do once they exist (not only whether they validate). Each test names the
upstream behaviour it guards; the review ``../shared/reviews/prod-cluster-api-and-gpus.md``
traces them at the pinned tags."""

from __future__ import annotations

import json
import re

from tests.support.harness import Recording

KUBEADM_CONFIG_TEMPLATE = "kubernetes:bootstrap.cluster.x-k8s.io/v1beta2:KubeadmConfigTemplate"

# Metadata the bare-metal operator always writes to a host's config drive; anything else
# (``providerid`` included) needs a Metal3DataTemplate, which the program does not create.
BMO_DEFAULT_METADATA = {"uuid", "metal3-namespace", "metal3-name", "local-hostname", "name"}


# --------------------------------------------------------------------------- provider IDs


def test_no_kubelet_argument_reads_metadata_a_host_does_not_have(prod: Recording) -> None:
    """A missing key renders as CI_MISSING_JINJA_VAR/<key>; a --provider-id built from one makes
    CAPM3 refuse the node and its Machine keeps the uninitialized taint forever."""
    templates = prod.of_type(KUBEADM_CONFIG_TEMPLATE)
    assert templates
    for template in templates:
        text = json.dumps(template.inputs["spec"])
        used = set(re.findall(r"ds\.meta_data\.([A-Za-z0-9_-]+)", text))
        assert used <= BMO_DEFAULT_METADATA, (template.name, used - BMO_DEFAULT_METADATA)
        args = template.inputs["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"][
            "kubeletExtraArgs"
        ]
        assert "provider-id" not in {a["name"] for a in args}, template.name
