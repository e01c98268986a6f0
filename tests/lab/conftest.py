"""The lab tier: runs inside the lab VM, on a real kernel.

Run it with `remirror lab run -- pytest tests/lab` (./dev test does). Outside
a lab these tests cannot mean anything, so the session stops with an error
rather than skipping: a skipped lab test must never pass for a green one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from remirror.lab.spec import LAB_FILE
from remirror.runner.base import Completed
from remirror.runner.local import LocalRunner
from tests.live_report import pytest_runtest_logreport  # noqa: F401 - a pytest hook


def pytest_configure(config: pytest.Config) -> None:
    if not Path(LAB_FILE).exists():
        pytest.exit(
            f"tests/lab must run inside the lab ({LAB_FILE} is missing): remirror lab run -- pytest tests/lab",
            returncode=4,
        )


# The order of a mirror's life: the lab itself, a bare iSCSI export, apply
# (which builds the mirror that every later module shares), health, and the
# reconciler, whose last test leaves the mirror split.
MODULE_ORDER = ["test_lab_contract", "test_lab_iscsi", "test_mirror_apply", "test_health", "test_reconcile"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def position(item: pytest.Item) -> int:
        name = item.path.stem
        return MODULE_ORDER.index(name) if name in MODULE_ORDER else len(MODULE_ORDER)

    items.sort(key=position)  # stable: file order within a module


@pytest.fixture(scope="session")
def mirror() -> Iterator[dict[str, str]]:
    """The lab profile's mirror, built once: under emulation each build and teardown costs minutes.

    Every test that uses it leaves it MIRRORED for the next (but the last,
    the split brain); `destroy` at the end keeps the data, so the disks are
    wiped for whatever runs after.
    """
    from tests.lab.mirror import LAB, remirror  # mirror.py uses this module's helpers

    code, out, err = remirror("apply", "--yes", LAB)
    assert code == 0, out + err
    yield {"apply_output": out}
    remirror("destroy", "--yes", LAB, "lab0")
    for disk in ("/dev/lab/a0", "/dev/lab/b0"):
        sh("wipefs", "--all", "--quiet", disk)


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
