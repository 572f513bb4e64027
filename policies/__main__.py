"""Entry point of the CrossGuard policy pack: builds the PolicyPack and nothing else.

Constructing ``PolicyPack`` starts the analyzer's gRPC server, prints its port and never returns;
the Pulumi CLI runs this file with ``python -m pulumi.policy <engine> <this directory>``, which puts
this directory on ``sys.path`` so ``gpu_platform_policies`` imports. The policies live in that
package (importable without side effects, unit-tested from ``tests/policies``).
"""

from gpu_platform_policies.pack import PACK_DESCRIPTION, PACK_NAME, build_policies
from pulumi_policy import EnforcementLevel, PolicyPack

PolicyPack(
    name=PACK_NAME,
    policies=build_policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description=PACK_DESCRIPTION,
)
