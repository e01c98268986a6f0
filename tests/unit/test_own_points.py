"""A leg's own points as only the site that keeps them handles them (remirror.agent.own_points):
brought back as their index says and never made, taken down by its operator alone. The device
work is the lab's (tests/lab/test_security.py); here, what is decided, with the kernel's
answers stood in for."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest

from remirror.agent import cdp as local
from remirror.agent import own_points
from remirror.agent.cdp import CdpError
from remirror.daemons import cdp as daemon
from remirror.facts.cdp import CdpIndex, layout, stack_names
from remirror.profile.layers import Cdp

KEY = "m0.b"
NAMES = stack_names(KEY)


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The site's devices, index and marks, stood in for; what was done, recorded."""
    state: dict[str, Any] = {
        "dm": set(),
        "index": CdpIndex(KEY, layout(2 << 21, 64 * 1024, 25)),
        "activated": [],
        "removed": [],
        "open": 0,
    }
    monkeypatch.setattr(local, "TAKEN_DOWN_DIR", tmp_path / "points")
    monkeypatch.setattr(own_points, "read_index", lambda disk: state["index"])
    monkeypatch.setattr(own_points, "dm_exists", lambda name: name in state["dm"])
    monkeypatch.setattr(own_points, "dm_names", lambda: sorted(state["dm"]))
    monkeypatch.setattr(own_points, "open_count", lambda name: state["open"])

    def activate(key: str, disk: str, plan: object, new: bool) -> None:
        state["activated"].append((key, disk, new))
        state["dm"] |= set(NAMES.values())

    def deactivate(key: str, views: list[str]) -> None:
        for name in [*views, *reversed(list(NAMES.values()))]:
            if name in state["dm"]:
                state["dm"].discard(name)
                state["removed"].append(name)

    monkeypatch.setattr(own_points, "activate", activate)
    monkeypatch.setattr(own_points, "deactivate", deactivate)
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


def test_the_operator_takes_them_down_and_nothing_brings_them_back_until_up(kernel: dict[str, Any]) -> None:
    view, drill = f"remirror-{KEY}-cdp-at-3", f"{NAMES['volume']}-drill"
    kernel["dm"] |= {*NAMES.values(), view, drill, f"{drill}-data", "remirror-m0.b-cdp-at-3x"}
    removed = own_points.take_down_own(KEY)
    # A drill's data before its copy, the views, then the stack top down; no other name.
    assert removed[:3] == [f"{drill}-data", drill, view]
    assert removed[3:] == list(reversed(list(NAMES.values())))
    assert kernel["dm"] == {"remirror-m0.b-cdp-at-3x"}
    assert own_points.activate_own(KEY, "/dev/b0") == "taken_down"
    assert kernel["activated"] == []
    local.taken_down_mark(KEY).unlink()  # what `cdp up --leg` does first
    assert own_points.activate_own(KEY, "/dev/b0") == "activated"


def test_points_in_use_are_not_taken_down(kernel: dict[str, Any]) -> None:
    kernel["dm"] |= set(NAMES.values())
    kernel["open"] = 1  # LIO exports the volume, or md holds it
    with pytest.raises(CdpError, match="is in use"):
        own_points.take_down_own(KEY)
    assert kernel["removed"] == []
    assert not local.taken_down_mark(KEY).exists()


def test_cdp_run_brings_them_back_before_its_tick_and_respects_the_operators_mark(
    kernel: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = tmp_path / "b0"
    disk.write_bytes(b"")
    protected = daemon.Protected(KEY, str(disk), Cdp(every=60, keep=3600), "b", "m0 (b's own leg)")
    monkeypatch.setattr(local, "index_locked", lambda *args: contextlib.nullcontext())
    ticks: list[str] = []
    monkeypatch.setattr(daemon, "_tick", lambda p, emit: ticks.append(p.name))
    events: list[dict[str, Any]] = []
    daemon.tick(protected, lambda line: events.append(json.loads(line)))
    assert events == [{"event": "activated", "mirror": "m0 (b's own leg)"}]
    assert ticks == [KEY]  # then its point, as every tick
    local.taken_down_mark(KEY).parent.mkdir(parents=True)
    local.taken_down_mark(KEY).write_text("")
    kernel["dm"].clear()
    events.clear()
    daemon.tick(protected, lambda line: events.append(json.loads(line)))
    assert [e["event"] for e in events] == ["no_stack"]
    assert "taken down by its operator" in events[0]["reason"]
    assert ticks == [KEY]
    assert kernel["dm"] == set()


def test_another_sites_apply_does_not_bring_back_points_taken_down_but_lays_new_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The `cdp_stack` step the primary's apply or reconcile sends (remirror.agent.cdp).
    monkeypatch.setattr(local, "TAKEN_DOWN_DIR", tmp_path / "points")
    monkeypatch.setattr(local, "index_locked", lambda *args: contextlib.nullcontext())
    index: list[CdpIndex | None] = [CdpIndex(KEY, layout(2 << 21, 64 * 1024, 25))]
    done: list[str] = []
    monkeypatch.setattr(local, "read_index", lambda disk: index[0])
    monkeypatch.setattr(local, "activate", lambda *args, **kwargs: done.append("activate"))
    monkeypatch.setattr(local, "create", lambda *args: done.append("create"))
    monkeypatch.setattr(local, "md_sectors", lambda disk: 2 << 21)
    monkeypatch.setattr(local, "blank", lambda disk, length: True)
    step = {
        "mirror": KEY,
        "md": "/dev/b0",
        "chunk": 64 * 1024,
        "history": 25,
        "fresh": False,
        "allow_data": False,
    }
    local.TAKEN_DOWN_DIR.mkdir()
    local.taken_down_mark(KEY).write_text("")
    with pytest.raises(
        CdpError, match=r"taken down by this site's operator .* `remirror cdp up --leg` there"
    ):
        local.ensure_stack(step)
    assert done == []
    index[0] = None  # the operator cleared the disk: points laid on it now are new ones
    local.ensure_stack(step)
    assert done == ["create"]
    assert not local.taken_down_mark(KEY).exists()
