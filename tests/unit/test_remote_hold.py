"""Another host's controller holds this site's lock for a bounded time (remirror.agent.remote_hold):
the bounds on a clock of the test's, then the agent process itself, as sshd starts it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import lock
from remirror.agent.remote_hold import REMOTE_LOCK_HOLD, REMOTE_LOCK_IDLE, RemoteHold
from tests.unit.test_agent import ask_agent, serve_agent


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


LOCK = {"op": "lock", "name": "site", "holder": "apply", "wait": 0}
RUN = {"op": "run", "steps": []}


def test_a_hold_lapses_after_its_idle_time_and_the_controllers_steps_are_refused_until_it_lets_go(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    released: list[str] = []
    monkeypatch.setattr(lock, "release", released.append)
    clock = Clock()
    hold = RemoteHold(clock)
    assert hold.wait() is None  # no lock: the loop waits for requests for ever
    hold.answered(LOCK, {"locked": True})
    assert hold.wait() == REMOTE_LOCK_IDLE
    clock.now += 300
    hold.answered(RUN, {"results": []})  # a request: the idle time starts again
    assert hold.wait() == REMOTE_LOCK_IDLE
    clock.now += REMOTE_LOCK_IDLE - 1
    hold.lapse()
    assert released == []  # not yet
    clock.now += 1
    hold.lapse()
    assert released == ["site"]
    refused = hold.refusal(RUN)
    assert refused is not None
    assert "ended after 600 s without a request" in refused["error"]
    assert hold.refusal(LOCK) is not None
    assert hold.refusal({"op": "observe"}) is None  # reading is not holding
    hold.answered({"op": "unlock", "name": "site"}, {})
    assert hold.refusal(RUN) is None


def test_a_busy_hold_lapses_after_its_whole_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lock, "release", lambda name: None)
    clock = Clock()
    hold = RemoteHold(clock)
    hold.answered(LOCK, {"locked": True})
    for _ in range(int(REMOTE_LOCK_HOLD // 500) + 1):
        clock.now += 500
        hold.answered(RUN, {"results": []})
    assert hold.wait() == 0
    hold.lapse()
    assert hold.refusal(RUN) is not None
    # A lock refused (busy) holds nothing.
    fresh = RemoteHold(clock)
    fresh.answered(LOCK, {"error": "busy", "busy": True})
    assert fresh.wait() is None


def test_a_controller_may_shorten_the_bounds_never_lengthen_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REMIRROR_REMOTE_LOCK_IDLE", "2")
    monkeypatch.setenv("REMIRROR_REMOTE_LOCK_HOLD", "1e9")
    hold = RemoteHold()
    assert (hold.idle, hold.hold) == (2.0, REMOTE_LOCK_HOLD)
    monkeypatch.setenv("REMIRROR_REMOTE_LOCK_IDLE", "-1")
    assert RemoteHold().idle == REMOTE_LOCK_IDLE


def test_the_agent_lets_go_of_an_idle_remote_hold_so_the_site_takes_its_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")  # this process's locks where the agent's are
    agent = serve_agent(
        tmp_path,
        SSH_CONNECTION="192.0.2.1 40000 192.0.2.2 22",  # as sshd starts it: the closed protocol
        REMIRROR_REMOTE_LOCK_IDLE="1",
    )

    def ask(request: dict[str, Any]) -> dict[str, Any]:
        return dict(ask_agent(agent, request))

    try:
        assert ask(LOCK)["locked"] is True
        with pytest.raises(lock.Busy):  # the site's own verb meanwhile: busy
            lock.take("site", "remirror promote (the DR site's)", 0)
        time.sleep(2.5)
        # The site's own verb takes it now; the remote controller's steps are refused.
        with lock.holding("site", "remirror promote (the DR site's)", 0):
            assert "hold of the site lock ended" in ask(RUN)["error"]
        assert ask({"op": "unlock", "name": "site"}) == {"protocol": 3, "commands": 0}
        assert ask(LOCK)["locked"] is True  # a new command starts afresh
    finally:
        agent.communicate(timeout=30)
