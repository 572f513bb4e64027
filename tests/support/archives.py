"""Tiny chart archives built in memory for tests (synthetic, never an upstream chart)."""

from __future__ import annotations

import io
import tarfile


def tgz(top: str, files: dict[str, bytes]) -> bytes:
    """A gzip'd tar whose members are ``<top>/<name>``, as ``helm package`` lays a chart out."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
