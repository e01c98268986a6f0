"""Hooks around a recovery point or a drill (`cdp.hooks`, `drill.hooks`, remirror.agent.hooks): the
after-hook runs whatever happened (and next time, if the run that owed it died), a point records
whether they ran clean, and a request from another site runs none. Real `sh`, no storage."""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import cdp as local
from remirror.agent import cdp_requests, hooks, policy
from remirror.agent.hooks import Hooks, around, run_line
from remirror.errors import ProfileError
from remirror.facts.cdp import RecoveryPoint, layout
from remirror.facts.cdp_index import CLEAN, FAILED, CdpIndex, decode_index, encode_index
from remirror.profile import parse_profile
from remirror.retention import Keep
from tests.conftest import PROFILES


@pytest.fixture(autouse=True)
def owed_here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The owed after-hooks' markers in the test's directory, not /run."""
    monkeypatch.setattr(hooks, "OWED_DIR", tmp_path / "owed")
    return tmp_path / "owed"


def test_the_after_hook_runs_when_the_before_hook_fails_and_when_the_body_raises(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    given = Hooks(before=f"echo before >> {trail}; exit 3", after=f"echo after >> {trail}", timeout=10)
    with around(given, {}, "m0") as ran, trail.open("a") as out:
        out.write("point\n")  # a crash-consistent point is still taken
    assert trail.read_text() == "before\npoint\nafter\n"
    assert ran.outcome == FAILED
    assert ran.failures == ["before hook exited 3: "]
    trail.unlink()
    thaw = Hooks(after=f"echo after >> {trail}")
    with pytest.raises(RuntimeError, match="the point failed"), around(thaw, {}, "m0"):
        raise RuntimeError("the point failed")
    assert trail.read_text() == "after\n"


def test_an_after_hook_owed_by_a_run_that_died_runs_first_next_time(tmp_path: Path, owed_here: Path) -> None:
    """The process running a point's hooks is killed (the watchdog, an operator) between them:
    the marker it left says the thaw is owed, and the next run here runs it before anything."""
    trail = tmp_path / "trail"
    given = Hooks(before="true", after=f"echo thawed >> {trail}", timeout=10)
    with around(given, {}, "m0") as ran:
        assert (owed_here / "m0").exists()  # while the point is taken
        assert ran.outcome == FAILED  # not clean until the after-hook has passed
    assert ran.outcome == CLEAN
    assert not (owed_here / "m0").exists()
    # A run killed mid-point: what its marker holds is run by the next, once.
    owed_here.joinpath("m0").write_text(f"10\necho thawed >> {trail}")
    owed = hooks.run_owed("m0", {})
    assert owed is not None
    assert owed.passed
    assert hooks.run_owed("m0", {}) is None
    assert trail.read_text() == "thawed\nthawed\n"


def test_a_hook_is_done_when_its_shell_is_whatever_it_left_running() -> None:
    """A hook that starts a daemon (`pg_ctl start`) leaves it running with the output open: the
    hook is done when its shell exits, and passes. One past its time is killed with its group;
    a child in a session of its own is not waited for."""
    started = time.monotonic()
    daemon = run_line("sleep 20 & echo started", {}, 10)
    assert (daemon.exit_code, daemon.output) == (0, "started\n")
    stuck = run_line("setsid sleep 20 & sleep 20", {}, 1.5)
    assert stuck.exit_code == -1
    assert "killed after 1.5s" in stuck.output
    assert time.monotonic() - started < 15  # neither waited for the 20 s sleeps


def test_a_hook_past_its_time_is_killed_and_the_after_hook_still_runs(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    given = Hooks(before="sleep 30", after=f"echo thawed > {trail}", timeout=1.5)
    with around(given, {}, "m0") as ran:
        pass
    assert ran.outcome == FAILED
    assert ran.before is not None
    assert ran.before.exit_code == -1
    assert "killed after 1.5s" in ran.failures[0]
    assert trail.read_text() == "thawed\n"
    with around(Hooks(before="true", after="true"), {}, "m0") as clean:
        pass
    assert clean.outcome == CLEAN


@pytest.mark.parametrize(
    "value",
    [
        {"before": "true", "after": None},
        {"before": "", "after": None, "timeout": 1},
        {"before": 7, "after": None, "timeout": 1},
        {"before": "true", "after": None, "timeout": 0},
        {"before": "true", "after": None, "timeout": True},
        {"before": "true", "after": None, "timeout": 1, "shell": "bash"},
        "true",
    ],
)
def test_hooks_cross_the_wire_only_as_the_profile_makes_them(value: Any) -> None:
    with pytest.raises(ValueError, match="hook"):
        Hooks.from_json(value)
    assert Hooks.from_json(None) is None
    assert Hooks.from_json(Hooks("a", "b", 5).as_json()) == Hooks("a", "b", 5.0)


def index_of(*points: RecoveryPoint) -> CdpIndex:
    return CdpIndex("m0", layout(2 << 21, 64 * 1024, 25), points, max((p.id for p in points), default=0) + 1)


@pytest.mark.parametrize(
    ("before", "after", "recorded"),
    [("true", "true", [FAILED, CLEAN]), ("exit 1", "true", [FAILED]), ("true", "exit 1", [FAILED])],
)
def test_a_point_is_recorded_clean_only_once_its_after_hook_passed(
    monkeypatch: pytest.MonkeyPatch, before: str, after: str, recorded: list[str]
) -> None:
    """What the index holds after each write: not clean until the after-hook has passed, so that
    a run that dies in between leaves it not clean."""
    written: list[str] = []

    def take(mirror: str, md: str, index: CdpIndex, hooks: str = "") -> CdpIndex:
        written.append(hooks)
        point = RecoveryPoint(index.next_id, time.time(), 1, hooks)
        return dataclasses.replace(index, points=(*index.points, point))

    def rewrite(md: str, index: CdpIndex, point_id: int, hooks: str) -> CdpIndex:
        written.append(hooks)
        return dataclasses.replace(
            index, points=tuple(dataclasses.replace(p, hooks=hooks) for p in index.points)
        )

    monkeypatch.setattr(local, "take_point", take)
    monkeypatch.setattr(local, "record_hooks", rewrite)
    monkeypatch.setattr(local, "pool_status", lambda name: None)
    monkeypatch.setattr(local, "delete_points", lambda *args: None)
    given = Hooks(before, after)
    done = cdp_requests.point_and_prune("m0", "/dev/md/m0", index_of(), 60, Keep(3600), True, given)
    assert written == recorded
    assert done["taken"]["hooks"] == recorded[-1]
    assert bool(done["taken"]["hook_failures"]) == (recorded[-1] == FAILED)
    assert done["owed_after_hook"] is None


def test_the_index_keeps_each_points_hooks_in_runs_beside_the_points_as_they_were() -> None:
    outcomes = ["", CLEAN, CLEAN, FAILED, CLEAN, CLEAN, CLEAN, "", FAILED]
    index = index_of(*(RecoveryPoint(i + 1, 10.0 * i, i, hooks) for i, hooks in enumerate(outcomes)))
    slot = encode_index(index, 1 << 20)
    assert decode_index(slot, 1 << 20) == dataclasses.replace(index, sequence=0)
    # Each point as an index without hooks holds it ([id, time, era]: what 0.1.0 reads), the
    # outcomes beside them as runs of ids.
    body = json.loads(slot[slot.index(b"{") :].rstrip(b"\0"))
    assert body["points"][1] == [2, 10.0, 1]
    assert body["hooks"] == {"clean": [[2, 3], [5, 7]], "failed": [[4, 4], [9, 9]]}
    # Sixty thousand points with hooks fit where they fitted without.
    many = index_of(*(RecoveryPoint(i, 1.8e9 + 60 * i, i, CLEAN) for i in range(100_000, 160_000)))
    assert len(encode_index(many, 2 << 20)) == 2 << 20


LAB = (PROFILES / "lab.yaml").read_text()


def test_a_point_asked_by_another_site_runs_no_hooks_and_is_never_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The site's own hooks run for its own operator and its own `cdp run` only: another site
    asking for points as often as it likes would freeze the application from afar."""
    from remirror.agent.serve import _Gate

    given = "    cdp:\n      every: 1h\n      keep: 7d\n      hooks: {before: 'sync', after: 'true', timeout: 5s}\n"
    (tmp_path / "lab.yaml").write_text(LAB + given)
    monkeypatch.setattr(policy, "PROFILE_DIR", tmp_path)
    gate = _Gate(checked=True)
    sent = {"before": "rm -rf /", "after": None, "timeout": 1}
    asked = {
        "op": "cdp",
        "do": "point",
        "mirror": "lab0",
        "md": "/dev/md/lab0",
        "every": 1,
        "keep": 0,
        "force": True,
        "hooks": sent,
    }
    assert gate.refusal(asked) is None
    taken = gate.as_taken(asked)
    assert (taken["hooks"], taken["force"], taken["every"]) == (None, False, 3600.0)


def test_hooks_are_refused_where_no_application_runs_and_where_they_run_nothing() -> None:
    leg_points = "        points: {every: 1h, keep: 7d, hooks: {before: sync}}\n"
    with_points = LAB.replace(
        "        portal: 192.0.2.2:3260\n", "        portal: 192.0.2.2:3260\n" + leg_points
    )
    assert with_points != LAB
    with pytest.raises(ProfileError, match=r"points\.hooks: hooks run where the application runs"):
        parse_profile(with_points, source="lab.yaml")
    with pytest.raises(ProfileError, match=r"cdp\.hooks: .*hooks without `before` or `after` run nothing"):
        parse_profile(LAB + "    cdp: {every: 1h, keep: 7d, hooks: {timeout: 5s}}\n", source="lab.yaml")
