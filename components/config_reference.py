"""The configuration reference, generated from the pydantic models.

``python -m components.config_reference`` prints the Markdown table that docs/configuration.md
carries; ``tests/unit/test_readme.py`` checks that the page's table lists exactly the models' keys,
each with what a change does to a running stack (``components.config.changes``).
"""

from __future__ import annotations

import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from components.config import PlatformConfig
from components.config.annotations import is_model, strip
from components.config.changes import CHANGES


def _nested_model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model inside an annotation (Optional/list/Annotated unwrapped) and whether a list."""
    stripped = strip(annotation).annotation
    origin = typing.get_origin(stripped)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(stripped):
            model, is_list = _nested_model(arg)
            if model is not None:
                return model, is_list
        return None, False
    if origin is list:
        model, _ = _nested_model(typing.get_args(stripped)[0])
        return model, True
    return (stripped, False) if is_model(stripped) else (None, False)


_ANNOTATED_RANGE = re.compile(
    r"Annotated\[int, FieldInfo\(annotation=None, required=True, "
    r"metadata=\[Ge\(ge=(\d+)\), Le\(le=(\d+)\)\]\)\]"
)


def _type_name(annotation: Any) -> str:
    text = str(annotation).replace("typing.", "").replace("components.config.", "")
    text = text.replace("Annotated[int, Gt(gt=0)]", "int > 0").replace("NoneType", "None")
    text = _ANNOTATED_RANGE.sub(r"int \1..\2", text)
    return text.replace("<class '", "").replace("'>", "")


def _default(info: FieldInfo) -> str:
    if info.default is not PydanticUndefined and not isinstance(info.default, BaseModel):
        return "" if info.default is None else repr(info.default)
    if info.default_factory is not None and not isinstance(info.default, BaseModel):
        return "[]" if info.default_factory is list else ""
    return "required" if info.is_required() else ""


def reference_rows(
    model: type[BaseModel] = PlatformConfig, prefix: str = ""
) -> Iterator[tuple[str, str, str, str]]:
    """(key path, type, default, description) for every key, depth first."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}{key}"
        nested, is_list = _nested_model(info.annotation)
        if nested is not None:
            yield path, "list" if is_list else "object", _default(info), info.description or ""
            yield from reference_rows(nested, f"{path}[]." if is_list else f"{path}.")
        else:
            yield path, _type_name(info.annotation), _default(info), info.description or ""


def markdown_table() -> str:
    lines = [
        "| key (under `gpu-platform:platform`) | type | default | meaning | on a running stack |",
        "|---|---|---|---|---|",
    ]
    for path, type_name, default, description in reference_rows():
        mark, note = CHANGES.get(path, ("(not marked)", ""))
        cells = [
            f"`{path}`",
            type_name.replace("|", "\\|"),
            default.replace("|", "\\|"),
            description,
            f"**{mark}**: {note}" if note else f"**{mark}**",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"


def with_reference(page: str) -> str:
    """The page's text with the generated table between the markers."""
    head, _, rest = page.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{markdown_table()}\n{END}{tail}"


def main(argv: list[str]) -> None:
    """Print the table, or with ``--write docs/configuration.md`` put it between that page's
    markers."""
    if len(argv) == 3 and argv[1] == "--write":
        path = Path(argv[2])
        path.write_text(with_reference(path.read_text()))
    else:
        print(markdown_table())


if __name__ == "__main__":
    main(sys.argv)
