"""A leg's own points as only the site that keeps them handles them (remirror.agent.own_points,
remirror.agent.taken_down): brought back as their index says and never made, taken down by its
operator or its own destroy, and then brought back only by that site. The device work is the
lab's (tests/lab/test_security.py); here, what is decided, with the kernel's devices stood in for
and the mark, the locks and the index lock real (in a temporary directory)."""

from __future__ import annotations

import fcntl
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import cdp as local
from remirror.agent import cdp_requests, lock, own_points, taken_down
from remirror.agent.cdp import CdpError
from remirror.agent.taken_down import taken_down_mark
from remirror.daemons import cdp as daemon
from remirror.facts.cdp import layout, stack_names
from remirror.facts.cdp_index import CdpIndex
from remirror.profile.layers import Cdp
from remirror.protocol.steps import CdpDeactivate, CdpStack

KEY = "m0.b"
NAMES = stack_names(KEY)
VIEW, DRILL = f"remirror-{KEY}-cdp-at-3", f"{NAMES['volume']}-drill"


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The site's devices and index, stood in for; what was done, recorded."""
    state: dict[str, Any] = {
        "dm": set(),
        "index": CdpIndex(KEY, layout(2 << 21, 64 * 1024, 25)),
        "activated": [],
        "created": [],
        "removed": [],
        "open": set(),
        "fail_removing": "",  # the device whose removal fails
    }
    monkeypatch.setattr(taken_down, "TAKEN_DOWN_DIR", tmp_path / "points")
    monkeypatch.setattr(lock, "LOCK_DIR", tmp_path / "locks")
    monkeypatch.setattr(taken_down, "FROM_ANOTHER_HOST", False)
    for module in (own_points, local):
        monkeypatch.setattr(module, "read_index", lambda disk: state["index"])
        monkeypatch.setattr(module, "dm_exists", lambda name: name in state["dm"])
    monkeypatch.setattr(own_points, "dm_names", lambda: sorted(state["dm"]))
    monkeypatch.setattr(own_points, "open_count", lambda name: int(name in state["open"]))

    def activate(key: str, disk: str, plan: object, new: bool) -> None:
        state["activated"].append((key, disk, new))
        state["dm"] |= set(NAMES.values())

    def deactivate(key: str, views: list[str]) -> None:
        for name in [*views, *reversed(list(NAMES.values()))]:
            if name in state["dm"]:
                if name == state["fail_removing"]:
                    raise CdpError(f"dmsetup remove {name}: Device or resource busy")
                state["dm"].discard(name)
                state["removed"].append(name)

    for module in (own_points, local):
        monkeypatch.setattr(module, "activate", activate)
        monkeypatch.setattr(module, "deactivate", deactivate)
    monkeypatch.setattr(local, "create", lambda key, disk, plan: state["created"].append(key))
    monkeypatch.setattr(local, "md_sectors", lambda disk: 2 << 21)
    monkeypatch.setattr(local, "blank", lambda disk, length: True)
    return state


def test_a_legs_points_are_brought_back_by_the_site_and_never_made(kernel: dict[str, Any]) -> None:
    assert own_points.activate_own(KEY, "/dev/b0") == "activated"  # a reboot left nothing up
    assert kernel["activated"] == [(KEY, "/dev/b0", False)]  # as the index says: never new
    assert own_points.activate_own(KEY, "/dev/b0") == "active"
    kernel["dm"].discard(NAMES["volume"])  # a deactivation left part of it
    assert own_points.activate_own(KEY, "/dev/b0") == "activated"
    # No index of these points on the disk (blank, or another's): nothing is made.
    kernel["dm"].clear()
    kernel["index"] = None
    assert own_points.activate_own(KEY, "/dev/b0") == "no_stack"
    kernel["index"] = CdpIndex("m1.b", layout(2 << 21, 64 * 1024, 25))
    assert own_points.activate_own(KEY, "/dev/b0") == "no_stack"
    assert len(kernel["activated"]) == 2
    assert kernel["created"] == []


def test_the_operator_takes_them_down_and_nothing_brings_them_back_until_up(kernel: dict[str, Any]) -> None:
    kernel["dm"] |= {*NAMES.values(), VIEW, DRILL, f"{DRILL}-data", f"{VIEW}x"}
    removed = own_points.take_down_own(KEY)
    # A drill's data before its copy, the views, then the stack top down; no other name.
    assert removed[:3] == [f"{DRILL}-data", DRILL, VIEW]
    assert removed[3:] == list(reversed(list(NAMES.values())))
    assert kernel["dm"] == {f"{VIEW}x"}
    assert "cdp down --leg" in taken_down_mark(KEY).read_text()
    assert own_points.activate_own(KEY, "/dev/b0") == "taken_down"
    # Another site's apply does not bring them back either; this site's `cdp up` does.
    taken_down.FROM_ANOTHER_HOST = True
    with pytest.raises(
        CdpError, match=r"taken down by this site's operator .* `remirror cdp up --leg` there"
    ):
        local.ensure_stack(_stack_step())
    assert kernel["activated"] == []
    disk = taken_down.TAKEN_DOWN_DIR.parent / "b0"
    disk.write_bytes(b"")
    answer = cdp_requests.answer({"do": "up", "mirror": KEY, "md": str(disk), "wait": 0})
    assert answer == {"ok": True, "state": "activated"}
    assert not taken_down_mark(KEY).exists()


@pytest.mark.parametrize("busy", [NAMES["volume"], VIEW, f"{DRILL}-data"])
def test_points_in_use_are_not_taken_down_and_not_marked(kernel: dict[str, Any], busy: str) -> None:
    kernel["dm"] |= {*NAMES.values(), VIEW, f"{DRILL}-data", DRILL}
    kernel["open"] = {busy}  # LIO exports the volume, a view is mounted, a drill's copy too
    with pytest.raises(CdpError, match="is in use"):
        own_points.take_down_own(KEY)
    assert kernel["removed"] == []
    assert not taken_down_mark(KEY).exists()


def test_a_drill_running_holds_them_up(kernel: dict[str, Any]) -> None:
    kernel["dm"] |= set(NAMES.values())
    lock.LOCK_DIR.mkdir()
    with (lock.LOCK_DIR / f"drill-{KEY}.lock").open("w") as drill:  # the drill's process holds it
        fcntl.flock(drill, fcntl.LOCK_EX)
        with pytest.raises(lock.Busy):
            own_points.take_down_own(KEY)
    assert not taken_down_mark(KEY).exists()
    assert kernel["removed"] == []


def test_a_take_down_that_fails_with_the_volume_still_up_leaves_no_mark(kernel: dict[str, Any]) -> None:
    kernel["dm"] |= set(NAMES.values())
    kernel["fail_removing"] = NAMES["volume"]  # udev holds it a moment too long
    with pytest.raises(CdpError, match="busy"):
        own_points.take_down_own(KEY)
    assert not taken_down_mark(KEY).exists()  # still in service: points go on being taken
    kernel["fail_removing"] = NAMES["pool"]  # the volume went, the pool did not
    with pytest.raises(CdpError, match="busy"):
        own_points.take_down_own(KEY)
    assert taken_down_mark(KEY).exists()  # nothing serves the leg: the operator's word stands


def test_the_sites_own_destroy_marks_them_and_its_own_apply_brings_them_back(kernel: dict[str, Any]) -> None:
    kernel["dm"] |= set(NAMES.values())
    local.deactivate_step(CdpDeactivate(KEY, ()))  # what its destroy sends its own agent
    assert kernel["dm"] == set()
    assert "destroy" in taken_down_mark(KEY).read_text()
    assert own_points.activate_own(KEY, "/dev/b0") == "taken_down"  # its `cdp run`, meanwhile
    local.ensure_stack(_stack_step())  # its own apply, later
    assert kernel["activated"] == [(KEY, "/dev/b0", False)]
    assert not taken_down_mark(KEY).exists()


def test_points_laid_new_on_a_cleared_disk_are_not_marked(kernel: dict[str, Any]) -> None:
    taken_down.TAKEN_DOWN_DIR.mkdir()
    taken_down_mark(KEY).write_text("")
    kernel["index"] = None  # the operator cleared the disk
    taken_down.FROM_ANOTHER_HOST = True  # the primary's apply lays new points on it
    local.ensure_stack(_stack_step())
    assert kernel["created"] == [KEY]
    assert not taken_down_mark(KEY).exists()


def test_a_verb_on_points_taken_down_says_how_to_bring_them_back(
    kernel: dict[str, Any], tmp_path: Path
) -> None:
    disk = tmp_path / "b0"
    disk.write_bytes(b"")
    kernel["dm"] |= set(NAMES.values())
    own_points.take_down_own(KEY)
    answer = cdp_requests.answer({"do": "list", "mirror": KEY, "md": str(disk), "wait": 0})
    assert answer["ok"] is False
    assert answer["usage"] is True
    assert "were taken down here" in answer["message"]
    assert "`remirror cdp up --leg`" in answer["message"]
    assert kernel["activated"] == []


def test_cdp_run_brings_them_back_before_its_tick_and_respects_the_mark(
    kernel: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = tmp_path / "b0"
    disk.write_bytes(b"")
    protected = daemon.Protected(KEY, str(disk), Cdp(every=60, keep=3600), "b", "m0 (b's own leg)")
    ticks: list[str] = []
    monkeypatch.setattr(daemon, "_tick", lambda p, emit, period: ticks.append(p.name))
    events: list[dict[str, Any]] = []
    daemon.tick(protected, lambda line: events.append(json.loads(line)), period=0.0)
    assert events == [{"event": "activated", "mirror": "m0 (b's own leg)"}]
    assert ticks == [KEY]  # then its point, as every tick
    own_points.take_down_own(KEY)
    events.clear()
    daemon.tick(protected, lambda line: events.append(json.loads(line)), period=0.0)
    assert [e["event"] for e in events] == ["no_stack"]
    assert "taken down by its operator" in events[0]["reason"]
    assert ticks == [KEY]
    assert kernel["dm"] == set()


def _stack_step() -> CdpStack:
    """The `cdp_stack` step an apply sends for the points."""
    return CdpStack(mirror=KEY, md="/dev/b0", chunk=64 * 1024, history=25, fresh=False, allow_data=False)


def test_cdp_run_holds_each_point_to_every_within_half_its_own_period(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The daemon looks every tenth of `every` (5 s at most) and passes half that as the slack
    # a point may come early by (retention.point_due), not a timer's tenth of `every`.
    protected = daemon.Protected(KEY, str(tmp_path / "b0"), Cdp(every=60, keep=3600), "b", "m0 (b's own leg)")
    stop = threading.Event()
    periods: list[float] = []

    def tick(_: daemon.Protected, emit: Any, period: float) -> None:
        periods.append(period)
        stop.set()

    monkeypatch.setattr(daemon, "tick", tick)
    daemon.run([protected], stop, lambda line: None)
    assert periods == [5.0]
    asked: dict[str, Any] = {}

    def point_and_prune(*args: Any, **kwargs: Any) -> dict[str, Any]:
        asked.update(kwargs)
        return {"owed_after_hook": None, "taken": None, "expired": [], "for_space": []}

    index = object()  # what the tick read, handed on as it is
    monkeypatch.setattr(local, "read_index", lambda device: index)
    monkeypatch.setattr(daemon, "point_and_prune", point_and_prune)
    daemon._tick(protected, lambda line: None, periods[0])
    assert asked["early"] == 2.5
    assert asked["force"] is False
    assert asked["hooks"] is None
