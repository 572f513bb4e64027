"""docs/environment.md lists exactly the environment variables the code reads: the program
(components/, __main__.py, the policy pack), scripts/ (Python and shell), the benchmark, the
suites a user runs (tests/acceptance, tests/integration) and their support code, and the
Makefile's ``?=`` defaults. The code is scanned, not asked: a new ``os.environ.get("X")`` (or a
``${X:-…}`` in a script) fails this test until the page names it, and so does a row for a
variable nothing reads any more."""

from __future__ import annotations

import ast
import re

from tests.support.harness import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "environment.md"
NAME = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")
PYTHON_SCOPES = (
    "components",
    "scripts",
    "benchmarks",
    "policies/gpu_platform_policies",
    "tests/acceptance",
    "tests/integration",
    "tests/support",
)
PYTHON_FILES = ("__main__.py", "policies/__main__.py")
# Set by bash or the system itself, never an input of a script.
SHELL_BUILTINS = frozenset(
    {
        "PIPESTATUS",
        "BASH_SOURCE",
        "HOME",
        "PATH",
        "PWD",
        "RANDOM",
        "IFS",
        "LINENO",
        "OPTARG",
        "OPTIND",
        "EUID",
        "UID",
        "TMPDIR",
    }
)


def _is_environ(node: ast.expr) -> bool:
    """``os.environ``, or a mapping parameter standing for it (``environ``, ``env``)."""
    if isinstance(node, ast.IfExp):
        return _is_environ(node.body) or _is_environ(node.orelse)
    return ast.unparse(node).split(".")[-1] in {"environ", "env"}


def python_reads(source: str) -> set[str]:
    """Names read through ``environ[...]``, ``environ.get/pop/setdefault(...)``, ``getenv(...)``
    or ``... in environ``: a literal, a module constant, or a loop over a tuple constant."""
    tree = ast.parse(source)
    constants: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
            if not isinstance(target, ast.Name):
                continue
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                constants[target.id] = {value.value}
            elif isinstance(value, ast.Tuple | ast.List) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
            ):
                constants[target.id] = {str(e.value) for e in value.elts}  # type: ignore[attr-defined]
    loops = {
        node.target.id: constants[node.iter.id]
        for node in ast.walk(tree)
        if isinstance(node, ast.For)
        and isinstance(node.target, ast.Name)
        and isinstance(node.iter, ast.Name)
        and node.iter.id in constants
    }

    def names(key: ast.expr) -> set[str]:
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return {key.value}
        if isinstance(key, ast.Call) and isinstance(key.func, ast.Attribute):
            return names(key.func.value) if key.func.attr in {"lower", "upper"} else set()
        if isinstance(key, ast.Name):
            return constants.get(key.id) or loops.get(key.id) or set()
        return set()

    found: set[str] = set()
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice if _is_environ(node.value) else None
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            reads = node.func.attr in {"get", "pop", "setdefault"} and _is_environ(node.func.value)
            if reads or node.func.attr == "getenv":
                key = node.args[0]
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In)
            and _is_environ(node.comparators[0])
        ):
            key = node.left
        if key is not None:
            found |= {name for name in names(key) if NAME.match(name)}
    return found


def shell_reads(source: str) -> set[str]:
    """Upper-case variables a script expands without setting them itself, and every one it
    reads with a default or a requirement (``${X:-…}``, ``${X:?…}``)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))
    used = set(re.findall(r"\$\{?([A-Z_][A-Z0-9_]*)", code))
    assigned = set(
        re.findall(
            r"(?:^|[\s;(])(?:local\s+|export\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?"
            r"([A-Z_][A-Z0-9_]*)=",
            code,
            re.M,
        )
    )
    for group in re.findall(
        r"\b(?:for|read(?:\s+-\w+)*)\s+([A-Z_][A-Z0-9_ ]*?)(?:\s+in\b|\s*[;<|]|$)", code, re.M
    ):
        assigned |= set(group.split())
    defaulted = set(re.findall(r"\$\{([A-Z_][A-Z0-9_]*):?[-?]", code))
    return ((used - assigned) | defaulted) - SHELL_BUILTINS


def makefile_reads(source: str) -> set[str]:
    """The Makefile's ``NAME ?= default`` variables: taken from the environment when set."""
    return set(re.findall(r"^(?:export\s+)?([A-Z_][A-Z0-9_]*)\s*\?=", source, re.M))


def read_by_code() -> set[str]:
    files = [REPO_ROOT / name for name in PYTHON_FILES if (REPO_ROOT / name).is_file()]
    for scope in PYTHON_SCOPES:
        files += [p for p in (REPO_ROOT / scope).rglob("*.py") if ".venv" not in p.parts]
    found: set[str] = set()
    for path in files:
        found |= python_reads(path.read_text())
    for path in (REPO_ROOT / "scripts").rglob("*.sh"):
        found |= shell_reads(path.read_text())
    return found | makefile_reads((REPO_ROOT / "Makefile").read_text())


def documented() -> set[str]:
    return set(re.findall(r"^\| `([A-Z][A-Z0-9_]*)` \|", PAGE.read_text(), re.M))


def test_the_page_lists_exactly_what_the_code_reads() -> None:
    code, page = read_by_code(), documented()
    assert sorted(code - page) == [], "read by the code but not in docs/environment.md"
    assert sorted(page - code) == [], "in docs/environment.md but read by nothing"


def test_the_scanner_finds_each_way_of_reading() -> None:
    """So that a variable read in another form is not silently missed."""
    source = """
import os
SKIP_ENV = "A_SKIP"
PROXIES = ("B_PROXY", "C_PROXY")
def f(environ):
    os.environ["D_ONE"]
    os.environ.get("E_TWO")
    os.getenv("F_THREE")
    environ.get(SKIP_ENV)
    (os.environ if environ is None else environ).get("G_FOUR")
    if "H_FIVE" in environ:
        pass
    for name in PROXIES:
        environ.get(name.lower())
    other = {"I_NOT": 1}
    other["I_NOT"]
"""
    assert python_reads(source) == {
        "A_SKIP",
        "B_PROXY",
        "C_PROXY",
        "D_ONE",
        "E_TWO",
        "F_THREE",
        "G_FOUR",
        "H_FIVE",
    }
    script = 'set -eu\n: "${NEEDED:?}"\nLOCAL=1\necho "$LOCAL $USED ${WITH_DEFAULT:-x}"\n'
    assert shell_reads(script) == {"NEEDED", "USED", "WITH_DEFAULT"}
    assert makefile_reads("STACK ?= lab\nexport PASS ?= x\nFIXED := 1\n") == {"STACK", "PASS"}


def test_the_documented_credentials_are_the_shapes_the_program_accepts() -> None:
    """docs/prod.md's JSON examples of an external DataStore's credentials: one per key set of
    DATASTORE_SECRET_KEYS, every driver covered, each accepted by the program's own check."""
    import json

    from components.tenant_specs import DATASTORE_SECRET_KEYS, datastore_secret_data

    text = (REPO_ROOT / "docs" / "prod.md").read_text()
    examples = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", text, re.S)]
    shapes = {frozenset(example) for example in examples}
    assert shapes == {frozenset(keys) for keys in DATASTORE_SECRET_KEYS.values()}
    for driver, keys in DATASTORE_SECRET_KEYS.items():
        (example,) = [e for e in examples if set(e) == set(keys)]
        assert datastore_secret_data(driver, json.dumps(example), "someKey") == example
