"""docs/safety.md names the test proving each guard: every test it names must exist."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def defined_tests() -> dict[str, set[str]]:
    """Test function names by file name, over the unit, lab and hosts' lab tiers."""
    found: dict[str, set[str]] = {}
    tiers = ("unit", "lab", "hosts_lab")
    for path in [path for tier in tiers for path in ROOT.glob(f"tests/{tier}/test_*.py")]:
        tree = ast.parse(path.read_text())
        names = {
            n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
        }
        found.setdefault(path.name, set()).update(names)
    return found


def test_every_test_docs_safety_names_exists() -> None:
    tests = defined_tests()
    named = 0
    for cell in re.findall(r"`([^`]*::test_[^`]*)`", (ROOT / "docs/safety.md").read_text()):
        file, _, name = cell.partition("::")
        if file:
            current = file
        assert name in tests.get(current, set()), (
            f"docs/safety.md names {current}::{name}, which does not exist"
        )
        named += 1
    assert named >= 20
