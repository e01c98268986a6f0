"""The unit tier: pure logic and simulated sites; nothing here touches this machine's state."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where status and the reconciler date replicas: a test's own directory, not /var/lib/remirror."""
    monkeypatch.setenv("REMIRROR_STATE_DIR", str(tmp_path / "state"))


@pytest.fixture(autouse=True)
def _lock_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Site locks (remirror.agent.lock) in the test's own directory, not /run/lock/remirror."""
    from remirror.agent import lock

    monkeypatch.setenv("REMIRROR_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")
