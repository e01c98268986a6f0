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
    "remirror.roles",
    "remirror.retention",
    "remirror.plan",
    "remirror.protocol",
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
    "remirror.daemons",
    "remirror.systemd",
    "remirror.failover",
    "remirror.monitor",
    "remirror.catch_up",
    "remirror.drill",
    "remirror.controller",
    "remirror.files",
    "remirror.here",
    "remirror.onboarding",
    "remirror.logs",
    "remirror.__main__",
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


@pytest.mark.parametrize("module", _submodules("remirror.health") + _submodules("remirror.roles"))
def test_health_and_roles_never_reach_the_planner(module: str) -> None:
    # The planner judges with health (a promotion needs the mirror in sync); health judging
    # with the planner would run back up the layers. What both need (which site runs a
    # mirror, whether a leg ran alone) is remirror.roles, below both.
    reached = _reachable(module)
    assert not {name: via for name, via in reached.items() if name.startswith("remirror.plan")}


def test_every_module_is_in_a_layer() -> None:
    # A module in neither list would escape both contracts above.
    layered = [m for p in [*PURE, *ABOVE_CORE] for m in _submodules(p)]
    everything = [m for m in _submodules("remirror") if m != "remirror"]
    assert sorted(set(everything) - set(layered)) == []


@pytest.mark.parametrize("module", _submodules("remirror.agent"))
def test_the_agent_depends_on_no_planner(module: str) -> None:
    # The agent carries out steps and answers requests; deciding is the planner's (on the
    # controller) or a pure policy's below both (remirror.retention, remirror.facts).
    reached = _reachable(module)
    assert not {
        name: via for name, via in reached.items() if name.startswith(("remirror.plan", "remirror.health"))
    }


@pytest.mark.parametrize("module", [m for m in _submodules("remirror.cli") if m != "remirror.cli"])
def test_the_cli_reaches_sites_only_through_the_controller(module: str) -> None:
    # `remirror.cli` itself hands `remirror agent` to the agent's own entry point.
    assert not {name for name in _imports(module) if name.startswith("remirror.agent")}


def test_no_module_is_over_400_lines() -> None:
    # One room, one job: a module that grows past this does several (docs/design.md).
    lengths = {path: len(path.read_text().splitlines()) for path in (SRC / "remirror").rglob("*.py")}
    assert {str(path.relative_to(SRC)): n for path, n in lengths.items() if n > 400} == {}
    assert len(lengths) > 50  # the walk found the source


def test_the_contract_is_checked_on_something() -> None:
    modules = [m for p in PURE for m in _submodules(p)]
    assert "remirror.profile.model" in modules
    assert "subprocess" in _reachable("remirror.runner.local")  # the check can see an import


def _imported_by(argv: list[str], environment: dict[str, str] | None = None) -> set[str]:
    """Every module a `remirror ARGV` process has imported by the time it exits (stdin empty)."""
    import os
    import subprocess
    import sys

    probe = (
        "import atexit, sys\n"
        "atexit.register(lambda: sys.__stderr__.write('MODULES ' + ' '.join(sorted(sys.modules)) + '\\n'))\n"
        "from remirror.cli import main\n"
        f"main({argv!r})\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        input="",
        env={**os.environ, **(environment or {})},
    )
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("MODULES ")]
    return set(line.split()[1:])


HEAVY = {"pydantic", "rich", "paramiko", "ruamel", "rtslib_fb", "pyudev"}


def test_help_imports_click_and_no_verb() -> None:
    # Each import is paid at every start, and under emulation (the lab) or on a small
    # host that is seconds: `remirror --help` loads the group, not the verbs.
    modules = _imported_by(["--help"])
    assert "click" in modules
    assert not {m.split(".")[0] for m in modules} & HEAVY
    assert {m for m in modules if m.startswith("remirror.cli.")} == {"remirror.cli.app"}


def test_a_verb_imports_its_own_module_only() -> None:
    modules = _imported_by(["lab", "link", "--help"])
    assert "remirror.cli.lab" in modules
    assert not {"remirror.cli.health", "remirror.cli.mirror", "remirror.cli.cdp"} & modules
    assert not {m.split(".")[0] for m in modules} & HEAVY


@pytest.mark.parametrize("session", [{}, {"SSH_CONNECTION": "192.0.2.1 50000 192.0.2.2 22"}])
def test_the_agent_imports_what_observing_needs_and_nothing_above(session: dict[str, str]) -> None:
    # Every controller command starts one on every remote site: no click, no profile
    # models, no planner, no health; as sshd starts it too, its requests checked (a site with
    # profiles reads its compiled scope: tests/unit/test_compiled_scope.py).
    modules = _imported_by(["agent", "--serve"], session)
    assert "remirror.agent.observe" in modules
    assert not {m.split(".")[0] for m in modules} & (HEAVY | {"click"})
    above = {
        "remirror.profile",
        "remirror.plan",
        "remirror.health",
        "remirror.cli.app",
        "remirror.controller",
    }
    assert not {m for m in modules if any(m == a or m.startswith(a + ".") for a in above)}


def test_what_the_package_leaves_uncompiled_is_never_imported() -> None:
    """debian/remirror.postinst compiles the venv's byte-code except rich's syntax highlighter
    and its Markdown, which remirror never imports: a verb that prints through rich (its
    console, its progress bar) and the agent load none of them."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import remirror.cli.app, remirror.cli.mirror, remirror.cli.health, remirror.cli.status_view\n"
        "import remirror.controller, remirror.reconcile.watch\n"
        "import remirror.agent.serve\n"
        "from remirror.cli.output import console, progress_bar\n"
        "console().print('[bold]status[/bold]', {'a': 1})\n"
        "from rich.progress import Progress\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    uncompiled = {"pygments", "markdown_it", "mdurl"}
    assert not {m.split(".")[0] for m in done.stdout.split()} & uncompiled
    postinst = (Path(__file__).resolve().parents[2] / "debian/remirror.postinst").read_text()
    assert "/site-packages/(pygments|markdown_it|mdurl)/" in postinst
