"""The stack file's config keys: a misspelled namespace or key is named with the one meant.

The engine hands the program every key of the stack's config, fully qualified
(``namespace:name``; a key written without a namespace is the project's). A key the program never
reads is a mistake Pulumi itself does not report: ``gpu-platfrom:platform`` leaves
``gpu-platform:platform`` unset, ``gpu-platform:managementKubeconfg`` leaves the kubeconfig the
platform block names unset. ``config_key_problems`` names each, with the key probably meant.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from components.config.messages import did_you_mean

# Namespaces the engine, the CLI or the providers this program uses read on their own.
PROVIDER_NAMESPACES = frozenset({"pulumi", "kubernetes", "command", "docker"})


def _near(word: str, other: str) -> bool:
    return difflib.SequenceMatcher(None, word.lower(), other.lower()).ratio() >= 0.75


def config_key_problems(keys: Iterable[str], project: str, known: Iterable[str]) -> list[str]:
    """One line per key of the stack's config the program would not read: ``known`` are the
    project's key names it reads (``platform`` and the secret keys the platform block names)."""
    known_names = sorted(set(known))
    problems: list[str] = []
    for full in sorted(set(keys)):
        namespace, _, name = full.rpartition(":")
        if not namespace:
            namespace, name = project, full
        if namespace == project:
            if name in known_names:
                continue
            meant = did_you_mean(name, known_names)
            if meant is not None:
                problems.append(
                    f"{full}: this stack reads no such key: did you mean {project}:{meant}? "
                    f"(rename it: `pulumi config rm {name}` and set {meant})"
                )
            else:
                problems.append(
                    f"{full}: this stack reads no such key (it reads "
                    f"{', '.join(known_names)}): remove it with `pulumi config rm {name}`, or "
                    "name it in the platform block where a config key is expected "
                    "(kubeconfigConfigKey, credentialsConfigKey, githubTokenConfigKey)"
                )
            continue
        if namespace in PROVIDER_NAMESPACES or not _near(namespace, project):
            continue
        meant = did_you_mean(name, known_names) or name
        problems.append(
            f"{full}: {namespace!r} is not this project's namespace ({project!r}, Pulumi.yaml's "
            f"name), so nothing reads this key: did you mean {project}:{meant}?"
        )
    return problems
