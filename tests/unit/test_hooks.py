"""Hooks around a recovery point or a drill (`cdp.hooks`, `drill.hooks`, remirror.agent.hooks): the
after-hook runs whatever happened, a point records whether they ran clean, and a request from
another site never names the commands. Real `sh`, no storage."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import cdp as local
from remirror.agent import cdp_requests, policy
from remirror.agent.hooks import CLEAN, FAILED, Hooks, around
from remirror.errors import ProfileError
from remirror.facts.cdp import CdpIndex, RecoveryPoint, decode_index, encode_index, layout
from remirror.profile import parse_profile
from remirror.retention import Keep
from tests.conftest import PROFILES


def test_the_after_hook_runs_when_the_before_hook_fails_and_when_the_body_raises(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    hooks = Hooks(before=f"echo before >> {trail}; exit 3", after=f"echo after >> {trail}", timeout=10)
    with around(hooks, {}) as ran:
        trail.open("a").write("point\n")  # a crash-consistent point is still taken
    assert trail.read_text() == "before\npoint\nafter\n"
    assert ran.outcome == FAILED
    assert ran.failures == ["before hook exited 3: "]
    trail.unlink()
    with (
        pytest.raises(RuntimeError, match="the point failed"),
        around(Hooks(after=f"echo after >> {trail}"), {}),
    ):
        raise RuntimeError("the point failed")
    assert trail.read_text() == "after\n"


def test_a_hook_past_its_time_is_killed_and_the_after_hook_still_runs(tmp_path: Path) -> None:
    trail = tmp_path / "trail"
    hooks = Hooks(before="sleep 30", after=f"echo thawed > {trail}", timeout=1.5)
    with around(hooks, {}) as ran:
        pass
    assert ran.outcome == FAILED
    assert ran.before is not None
    assert ran.before.exit_code == -1
    assert "killed after 1.5s" in ran.failures[0]
    assert trail.read_text() == "thawed\n"
    with around(Hooks(before="true", after="true"), {}) as clean:
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
    [("true", "true", [CLEAN]), ("exit 1", "true", [FAILED]), ("true", "exit 1", [CLEAN, FAILED])],
)
def test_a_point_records_whether_its_hooks_ran_clean(
    monkeypatch: pytest.MonkeyPatch, before: str, after: str, recorded: list[str]
) -> None:
    """What the index holds after each write: a failed after-hook is written once the point is."""
    written: list[str] = []

    def take(mirror: str, md: str, index: CdpIndex, hooks: str = "") -> CdpIndex:
        written.append(hooks)
        return dataclasses.replace(
            index, points=(*index.points, RecoveryPoint(index.next_id, time.time(), 1, hooks))
        )

    def rewrite(md: str, index: CdpIndex, point_id: int, hooks: str) -> CdpIndex:
        written.append(hooks)
        return dataclasses.replace(
            index, points=tuple(dataclasses.replace(p, hooks=hooks) for p in index.points)
        )

    monkeypatch.setattr(local, "take_point", take)
    monkeypatch.setattr(local, "record_hooks", rewrite)
    monkeypatch.setattr(local, "pool_status", lambda name: None)
    monkeypatch.setattr(local, "delete_points", lambda *args: None)
    done = cdp_requests.point_and_prune(
        "m0", "/dev/md/m0", index_of(), 60, Keep(3600), True, Hooks(before, after)
    )
    assert written == recorded
    assert done["taken"]["hooks"] == recorded[-1]
    assert bool(done["taken"]["hook_failures"]) == (recorded[-1] == FAILED)


def test_the_index_keeps_each_points_hooks_and_reads_an_index_from_before_hooks() -> None:
    index = index_of(
        RecoveryPoint(1, 10.0, 1), RecoveryPoint(2, 20.0, 2, CLEAN), RecoveryPoint(3, 30.0, 3, FAILED)
    )
    assert decode_index(encode_index(index, 1 << 20), 1 << 20) == dataclasses.replace(index, sequence=0)
    # Written before points had hooks: [id, time, era] each.
    old = encode_index(index_of(RecoveryPoint(1, 10.0, 1)), 1 << 20)
    assert decode_index(old, 1 << 20).points == (RecoveryPoint(1, 10.0, 1, ""),)  # type: ignore[union-attr]


LAB = (PROFILES / "lab.yaml").read_text()


def test_a_point_asked_by_another_site_runs_this_sites_hooks_never_the_requests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.agent.serve import _Gate

    hooks = "    cdp:\n      every: 1h\n      keep: 7d\n      hooks: {before: 'sync', after: 'true', timeout: 5s}\n"
    (tmp_path / "lab.yaml").write_text(LAB + hooks)
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
        "hooks": sent,
    }
    assert gate.refusal(asked) is None
    assert gate.as_taken(asked)["hooks"] == {"before": "sync", "after": "true", "timeout": 5.0}
    # A profile here without hooks: none run, whatever the request says.
    (tmp_path / "lab.yaml").write_text(LAB + "    cdp: {every: 1h, keep: 7d}\n")
    assert _Gate(checked=True).as_taken(asked)["hooks"] is None
    # Two profiles here that give the mirror different hooks: no point at another site's word.
    (tmp_path / "lab.yaml").write_text(LAB + hooks)
    (tmp_path / "other.yaml").write_text((LAB + hooks).replace("'sync'", "'sync; sync'"))
    assert "different hooks" in str(_Gate(checked=True).refusal(asked))


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
