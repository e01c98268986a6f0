"""The hosts' lab tier: separate VMs with systemd, booted, cut off and powered off from here.

Runs on the development machine or CI itself (as root: the image is root's), not inside the
single-VM lab: each host is its own QEMU (remirror.lab.hosts). Without the image the session
stops with an error rather than skipping: a skipped test must never pass for a green one.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from remirror.lab.hosts.image import image_paths
from tests.live_report import pytest_runtest_logreport  # noqa: F401 - a pytest hook

CHECKOUT = Path(__file__).resolve().parents[2]
OUT = CHECKOUT / "lab-out" / "hosts"


def pytest_configure(config: pytest.Config) -> None:
    done = image_paths(CHECKOUT)["done"]
    if not done.exists():
        pytest.exit(
            f"tests/hosts_lab needs the hosts' lab image ({done.parent}): run ./dev setup as root",
            returncode=4,
        )


@pytest.fixture(scope="module")
def work(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory for a module's hosts (their disks: sparse files); the consoles are kept in lab-out/hosts."""
    path = Path(tempfile.mkdtemp(prefix="remirror-hosts-", dir=os.environ.get("REMIRROR_LAB_TMPDIR")))
    try:
        yield path
    finally:
        OUT.mkdir(parents=True, exist_ok=True)
        for console in path.glob("*.console"):
            shutil.copy(console, OUT / f"{request.module.__name__.rsplit('.', 1)[-1]}-{console.name}")
        shutil.rmtree(path, ignore_errors=True)
