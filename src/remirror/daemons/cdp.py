"""The CDP daemon: a recovery point at least every `cdp.every`, pruning after each.

Runs on the mirror's primary host (contrib/systemd/remirror-cdp@.service):
a point is a few dmsetup calls on the local kernel and must not wait on a
WAN. Each tick is the agent's `point_and_prune`, the same as `remirror cdp
point`: the decisions are remirror.retention's, the device work remirror.agent.cdp's.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

from remirror.agent import cdp as local
from remirror.agent.cdp_requests import point_and_prune
from remirror.errors import RemirrorError
from remirror.profile.layers import Cdp
from remirror.profile.model import Mirror
from remirror.systemd import notify, watchdog_period

TICK_LOCK_WAIT = 5.0


def tick(mirror: Mirror, emit: Callable[[str], None]) -> None:
    """One round: a point if due, then pruning; one JSON line per thing done."""
    settings = mirror.cdp
    if settings is None:
        return
    if not Path(mirror.md_device).exists():
        emit(json.dumps({"event": "no_stack", "mirror": mirror.name, "reason": "mirror not assembled here"}))
        return
    # A rollback or a restore holds the index for as long as it copies: this tick is then
    # reported as failed (busy), and the next one takes the point.
    with local.index_locked(mirror.name, "cdp run", TICK_LOCK_WAIT):
        _tick(mirror, settings, emit)


def _tick(mirror: Mirror, settings: Cdp, emit: Callable[[str], None]) -> None:
    index = local.read_index(mirror.md_device)
    if index is None:
        emit(json.dumps({"event": "no_stack", "mirror": mirror.name}))
        return
    done = point_and_prune(mirror.name, mirror.md_device, index, settings.every, settings.keep, force=False)
    taken = done["taken"]
    if taken is not None:
        emit(json.dumps({
            "event": "point", "mirror": mirror.name, "id": taken["id"], "era": taken["era"],
            "seconds": taken["seconds"],
        }))  # fmt: skip
    if done["expired"] or done["for_space"]:
        emit(json.dumps({
            "event": "pruned", "mirror": mirror.name,
            "expired": done["expired"], "for_space": done["for_space"],
        }))  # fmt: skip


def run(mirrors: list[Mirror], stop: threading.Event, emit: Callable[[str], None]) -> None:
    """Tick until `stop`, about ten times per shortest `every` (a point is never much late).

    A mirror not assembled here (yet) is reported once per tick as `no_stack`
    and taken up when it appears.
    """
    intervals = [m.cdp.every for m in mirrors if m.cdp is not None]
    period = max(0.5, min(min(intervals, default=5.0) / 10, 5.0))
    ping = watchdog_period()
    notify("READY=1")
    while not stop.is_set():
        for mirror in mirrors:
            try:
                tick(mirror, emit)
            except (RemirrorError, OSError) as error:
                text = error.one_line() if isinstance(error, RemirrorError) else str(error)
                emit(json.dumps({"event": "failed", "mirror": mirror.name, "error": text}))
        if ping is not None:
            notify("WATCHDOG=1")
        stop.wait(period)
    notify("STOPPING=1")
