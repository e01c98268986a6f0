"""The import contract: the pure core never reaches the system.

`profile`, `facts`, `plan` and `health` (and `units`, `errors`) must not
import subprocess, paramiko, pyudev or rtslib, directly or through another
remirror module. Checked on the source (AST) so that a lazy import inside a
function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PURE = [
    "remirror.profile",
    "remirror.facts",
    "remirror.plan",
    "remirror.health",
    "remirror.units",
    "remirror.errors",
]
FORBIDDEN = {"subprocess", "paramiko", "pyudev", "rtslib_fb", "rtslib", "socket", "os.system"}
# Layers import downward only: the pure core does not know the layers above.
ABOVE_CORE = {
    "remirror.runner",
    "remirror.agent",
    "remirror.cli",
    "remirror.lab",
    "remirror.reconcile",
    "remirror.monitor",
    "remirror.apply",
}


def _module_file(name: str) -> Path | None:
    base = SRC / Path(*name.split("."))
    for candidate in (base / "__init__.py", base.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def _submodules(name: str) -> list[str]:
    base = SRC / Path(*name.split("."))
    if not base.is_dir():
        return [name] if _module_file(name) else []
    return [
        ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for path in sorted(base.rglob("*.py"))
    ]


def _imports(name: str) -> set[str]:
    path = _module_file(name)
    assert path is not None
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _reachable(start: str) -> dict[str, str]:
    """Every module imported from `start`, transitively through remirror, with who imports it."""
    seen: dict[str, str] = {start: start}
    todo = [start]
    while todo:
        current = todo.pop()
        for imported in _imports(current):
            if imported in seen:
                continue
            seen[imported] = current
            if imported.startswith("remirror") and _module_file(imported):
                todo.append(imported)
    return seen


@pytest.mark.parametrize("module", [m for p in PURE for m in _submodules(p)])
def test_pure_core_reaches_no_side_effects(module: str) -> None:
    reached = _reachable(module)
    bad = {
        name: via
        for name, via in reached.items()
        if name.split(".")[0] in FORBIDDEN or name in FORBIDDEN or any(name.startswith(a) for a in ABOVE_CORE)
    }
    assert not bad, f"{module} reaches {bad} (module: imported by)"


def test_the_contract_is_checked_on_something() -> None:
    modules = [m for p in PURE for m in _submodules(p)]
    assert "remirror.profile.model" in modules
    assert "subprocess" in _reachable("remirror.runner.local")  # the check can see an import


def test_the_cli_starts_without_the_heavy_layers() -> None:
    # `remirror check` runs from cron and `remirror lab link` inside an
    # emulated VM where importing pydantic, rich or paramiko costs seconds:
    # verbs import them when they run.
    import subprocess
    import sys

    probe = (
        "import sys, remirror.cli; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'pydantic', 'rich', 'paramiko', 'ruamel'}))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
