"""The lab tier: runs inside the lab VM, on a real kernel.

Run it with `remirror lab run -- pytest tests/lab` (./dev test does). Outside
a lab these tests cannot mean anything, so the session stops with an error
rather than skipping: a skipped lab test must never pass for a green one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from remirror.lab.spec import LAB_FILE
from remirror.runner.base import Completed
from remirror.runner.local import LocalRunner


def pytest_configure(config: pytest.Config) -> None:
    if not Path(LAB_FILE).exists():
        pytest.exit(
            f"tests/lab must run inside the lab ({LAB_FILE} is missing): remirror lab run -- pytest tests/lab",
            returncode=4,
        )


@pytest.fixture(scope="session")
def lab() -> dict[str, Any]:
    """The lab's own description of itself."""
    data: dict[str, Any] = json.loads(Path(LAB_FILE).read_text())
    return data


_runner = LocalRunner("site-a")


def sh(*argv: str, ok_codes: tuple[int, ...] = (0,), timeout: float = 120) -> Completed:
    """Run a command on site A."""
    return _runner.run(list(argv), ok_codes=ok_codes, timeout=timeout)


def on_b(*argv: str, ok_codes: tuple[int, ...] = (0,), timeout: float = 120) -> Completed:
    """Run a command on site B (its namespaces), without going through SSH."""
    return sh("site-b", *argv, ok_codes=ok_codes, timeout=timeout)
