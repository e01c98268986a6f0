"""The watch daemon's timing and its systemd notifications (no storage needed)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from remirror.reconcile.watch import Timing
from remirror.systemd import notify, watchdog_period


def test_the_wait_grows_with_failures_up_to_the_cap() -> None:
    timing = Timing(interval=60, busy=10, debounce=2, max_backoff=600)
    assert timing.after(0, failures=0) == 60  # all well
    assert timing.after(1, failures=0) == 10  # a resync to follow
    assert [timing.after(2, n) for n in range(1, 6)] == [60, 120, 240, 480, 600]


def test_while_a_site_cannot_be_reached_it_is_asked_again_every_interval() -> None:
    """A DR site back from a long outage is taken back within an interval of its return: no
    event at the primary says it came back, and asking costs a connection attempt."""
    timing = Timing(interval=60, busy=10, debounce=2, max_backoff=600)
    assert [timing.after(2, n, unreachable=True) for n in range(1, 6)] == [60] * 5
    assert Timing(interval=300, max_backoff=120).after(2, 3, unreachable=True) == 120  # never past the cap


def test_systemd_hears_ready_and_watchdog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(address)
        monkeypatch.setenv("NOTIFY_SOCKET", address)
        notify("READY=1")
        notify("WATCHDOG=1")
        assert [server.recv(64), server.recv(64)] == [b"READY=1", b"WATCHDOG=1"]
    monkeypatch.delenv("NOTIFY_SOCKET")
    notify("READY=1")  # outside systemd: nothing, no error


def test_the_watchdog_is_pinged_at_half_its_period(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "300000000")
    assert watchdog_period() == 150
    monkeypatch.delenv("WATCHDOG_USEC")
    assert watchdog_period() is None
