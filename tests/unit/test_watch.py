"""The watch daemon's timing and its systemd notifications (no storage needed)."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from remirror.profile.loader import parse_profile
from remirror.profile.model import Profile
from remirror.reconcile import watch
from remirror.reconcile.watch import Knocker, Timing, _wait, sites_to_knock, ssh_ports
from remirror.systemd import notify, watchdog_period


def test_the_wait_grows_with_failures_up_to_the_cap() -> None:
    timing = Timing(interval=60, busy=10, debounce=2, max_backoff=600)
    assert timing.after(0, failures=0) == 60  # all well
    assert timing.after(1, failures=0) == 10  # a resync to follow
    assert [timing.after(2, n) for n in range(1, 6)] == [60, 120, 240, 480, 600]


def test_while_a_site_cannot_be_reached_it_is_asked_again_every_interval() -> None:
    """However long a DR site was away, it is asked again every interval (asking costs a
    connection attempt); its SSH port's answer to a knock (below) says sooner."""
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


def _profile() -> Profile:
    return parse_profile(
        "version: 1\nname: p\nsites:\n  a: {host: local}\n  b: {host: 'ssh://root@127.0.0.1:2222'}\n"
        "  c:\n    host: ssh://root@10.0.0.3\n    ssh: {proxy_jump: 'ssh://admin@bastion.example'}\n"
        "mirrors:\n  - name: m\n    device: /dev/md/m\n    primary: {site: a, disk: /dev/a0}\n"
        "    replicas:\n      - {site: b, disk: /dev/b0, portal: 10.0.0.2:3260}\n"
        "      - {site: c, disk: /dev/c0, portal: 10.0.0.3:3260}\n"
        "    replication: {mode: sync}\n"
    )


def test_the_ssh_ports_knocked_on_are_those_of_unreachable_sites_reached_directly() -> None:
    # Not the local site, not one behind a bastion; with each site's own connect timeout.
    assert ssh_ports(_profile(), ["a", "b", "c"]) == {"b": ("127.0.0.1", 2222, 10.0)}
    assert ssh_ports(_profile(), []) == {}


def _closed_port() -> int:
    """A port on the loopback that nothing listens on (just released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_site_whose_ssh_port_comes_back_ends_the_wait_after_it_settles() -> None:
    port = _closed_port()
    with Knocker({"b": ("127.0.0.1", port, 0.5)}, every=0.05, settle=0.3) as knocker:
        assert not knocker.back.wait(0.3)  # refused, knock after knock: the site is still away
        with socket.socket() as server:
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("127.0.0.1", port))
            server.listen()
            answered = time.monotonic()
            assert knocker.back.wait(5)  # its SSH server answers: the watch passes, once it settled
            assert time.monotonic() - answered >= 0.25
            assert knocker.returned == "b"  # which site: the others still away keep their knocks
            started = time.monotonic()
            _wait(None, 60, 2, None, threading.Event(), knocker.back)
            assert time.monotonic() - started < 1


def test_a_port_that_answers_the_first_knock_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pass failed with the port open: the trouble is past SSH's connection (its agent, its
    key), and the pass's backoff stands, whatever the knocks after (a lost SYN among them)."""
    knocks = iter([True, False, True, True])
    monkeypatch.setattr(watch, "answers", lambda port, timeout: next(knocks, True))
    knocker = Knocker({"b": ("192.0.2.2", 22, 0.5)}, every=0.01)
    with knocker:
        time.sleep(0.3)
        assert not knocker.back.is_set()
        assert knocker.returned is None
    knocker._thread.join(5)
    assert not knocker._thread.is_alive()  # ended with the wait


def test_a_knock_brings_one_pass_per_absence() -> None:
    """Still away after the pass a knock brought: the next wait is the timer's alone."""
    assert sites_to_knock(["b", "c"], knocked_back=set()) == ["b", "c"]
    assert sites_to_knock(["b", "c"], knocked_back={"b"}) == ["c"]


def test_no_unreachable_site_starts_no_knocking() -> None:
    with Knocker({}, every=0.05) as knocker:
        assert not knocker._thread.is_alive()
        assert not knocker.back.is_set()
