"""The `cdp` request: `remirror cdp` verbs, carried out by the agent of the site that runs the mirror.

`{"op": "cdp", "do": "list"|"point"|"prune"|"changes"|"restore"|"rollback"|"up"|"down",
"mirror": NAME, "md": DEVICE, ...}`. The CLI reaches the site through the
controller, like every other verb; the site reads the index, decides with
remirror.retention, and acts with remirror.agent.cdp, holding the mirror's
index lock from the read to the write. `point_and_prune` is also the
`cdp run` daemon's tick (remirror.daemons.cdp): one way to take a point.

The answer is `{"ok": true, ...}`, or `{"ok": false, "message": ...,
"usage": bool}`: a refusal the operator's input caused (no such point, the
mirror not assembled here) is a usage error, as it was when the CLI did it.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from remirror.agent import cdp as local
from remirror.agent import lock, own_points
from remirror.agent.hooks import Hooks, around, run_owed
from remirror.agent.taken_down import taken_down_mark
from remirror.errors import RemirrorError
from remirror.facts.cdp import RecoveryPoint, is_leg_points
from remirror.facts.cdp_index import CLEAN, FAILED, CdpIndex
from remirror.retention import Keep, point_due, pruning, why_pruned


class Refused(RemirrorError):
    """The request cannot be met as asked: the operator's input (a usage error)."""


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """Carry out one `cdp` request."""
    do, mirror = str(request.get("do")), str(request["mirror"])
    verb = VERBS.get(do)
    if verb is None:
        return {"ok": False, "message": f"unknown cdp request {do!r}", "usage": False}
    handler, locked = verb
    wait = float(request.get("wait", local.INDEX_LOCK_WAIT))
    try:
        # Activating a leg's own points writes the stack: under the index lock, a verb's own or
        # one taken for it (`down` finds them as they are; `up` removes the mark first).
        activating = is_leg_points(mirror) and do not in ("down", "up")
        with local.index_locked(mirror, f"cdp {do}", wait) if locked or activating else nullcontext():
            index = _index(mirror, str(request["md"]), activate=activating)
            return {"ok": True, **handler(request, index)}
    except lock.Busy as busy:
        return {"ok": False, "message": f"cdp {do}: {mirror}: {busy}", "usage": False}
    except Refused as refused:
        return {"ok": False, "message": str(refused), "usage": True}
    except (RemirrorError, OSError) as error:
        text = error.one_line() if isinstance(error, RemirrorError) else str(error)
        return {"ok": False, "message": text, "usage": False}


def point_and_prune(
    mirror: str,
    md: str,
    index: CdpIndex,
    every: float,
    keep: Keep,
    force: bool,
    hooks: Hooks | None = None,
    early: float | None = None,
) -> dict[str, Any]:
    """A point if one is due (or `force`), between its hooks if it has any, then pruning: what
    was done. The index lock is the caller's; `early`, how much before `every` counts as on
    time (retention.point_due).

    With hooks, the point is written as not clean and made clean once its after-hook passed:
    a run that dies in between (a kill, the watchdog) leaves it not clean, and its after-hook
    owed (remirror.agent.hooks), which the next run here runs first, due or not."""
    env = {"REMIRROR_CDP_MIRROR": mirror, "REMIRROR_CDP_DEVICE": md}
    owed = run_owed(mirror, env)
    taken = None
    if force or point_due(index, time.time(), every, early):
        started = time.monotonic()
        with around(hooks, env, mirror) as ran:
            index = local.take_point(mirror, md, index, hooks=FAILED if hooks is not None else "")
        newest = index.points[-1]
        if hooks is not None and ran.outcome == CLEAN:
            index = local.record_hooks(md, index, newest.id, CLEAN)
            newest = index.points[-1]
        seconds = round(time.monotonic() - started, 3)
        taken = {**_point_json(newest), "seconds": seconds, "hook_failures": ran.failures}
    # A leg's own points go by age only (facts.cdp.is_leg_points): never early for space.
    doomed = pruning(index, time.time(), keep, None if is_leg_points(mirror) else local.pool_status(mirror))
    local.delete_points(mirror, md, index, list(doomed.points))
    return {
        "taken": taken,
        "expired": [p.id for p in doomed.expired],
        "for_space": [p.id for p in doomed.for_space],
        # An after-hook a run that died owed, run first: its exit code (None: none was owed).
        "owed_after_hook": None if owed is None else owed.exit_code,
    }


def _index(mirror: str, md: str, activate: bool = True) -> CdpIndex:
    if not Path(md).exists():
        raise Refused(f"cdp: {md} is not assembled on this host (run cdp on the primary)")
    if activate and own_points.activate_own(mirror, md) == "taken_down":
        # The site's own points come back as their index says, with no word from another site
        # (a reboot left them inactive; nothing else may build them here: docs/security.md),
        # unless its operator took them down.
        raise Refused(
            f"cdp: {mirror}'s points were taken down here: `remirror cdp up --leg` brings them back"
        )
    index = local.read_index(md)
    if index is None or index.mirror != mirror:
        raise Refused(f"cdp: {md} carries no CDP stack of {mirror} (apply builds it)")
    return index


def point_named(request: dict[str, Any], index: CdpIndex) -> RecoveryPoint:
    """The point the request names: `at` (an id, as the operator gave it), or `at_time`: the
    newest point at or before it."""
    at = str(request["at"])
    when = request.get("at_time")
    point = index.point(at) if when is None else index.at_or_before(float(when))
    if point is None:
        raise Refused(f"cdp: --at {at}: no such point (see `remirror cdp list`)")
    return point


def _point_json(point: RecoveryPoint) -> dict[str, Any]:
    return {"id": point.id, "time": point.time, "era": point.era, "hooks": point.hooks}


def _list(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    pool = local.pool_status(str(request["mirror"]))
    return {
        "points": [_point_json(p) for p in index.points],
        "chunk": index.layout.chunk,
        "pool": {
            "data_used": pool.data_used,
            "data_total": pool.data_total,
            "metadata_used": pool.metadata_used,
            "metadata_total": pool.metadata_total,
            "mode": pool.mode,
        },
    }


def _point(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    try:
        keep, hooks = Keep.from_json(request["keep"]), Hooks.from_json(request.get("hooks"))
    except ValueError as error:
        raise Refused(f"cdp point: {error}") from None
    return point_and_prune(
        str(request["mirror"]),
        str(request["md"]),
        index,
        float(request["every"]),
        keep,
        bool(request.get("force")),
        hooks,
    )


def _changes(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    ranges = local.changed_since(str(request["mirror"]), point_named(request, index), index.layout)
    return {"ranges": [list(r) for r in ranges]}


def _restore(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    """A read-only view of the point, or (`target`) a copy of it. Under the index lock: a pruning
    meanwhile would delete the point being copied."""
    mirror, chosen = str(request["mirror"]), point_named(request, index)
    size = index.layout.volume_sectors * 512
    target = request.get("target")
    if target is not None:
        local.check_target(str(target), bool(request.get("allow_destructive")), size)
    path = local.view(mirror, index.layout, chosen)
    if target is None:
        return {"point": _point_json(chosen), "view": path}
    copied = local.copy_ranges(path, str(target), [(0, size)])
    local.remove_view(mirror, chosen.id)
    return {"point": _point_json(chosen), "copied": copied}


def _rollback(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    """Under the index lock from the read to the write with the undo point: a point or a pruning
    between would write an index without it (and could reuse its id)."""
    mirror, chosen = str(request["mirror"]), point_named(request, index)
    if not request.get("yes"):
        raise Refused(f"cdp rollback: replaces {mirror}'s content by point #{chosen.id}: add --yes")
    _, done = local.rollback(mirror, str(request["md"]), index, chosen)
    return {"point": _point_json(chosen), "undo": _point_json(done.undo_point), "copied": done.bytes_copied}


def _prune(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    """The operator's pruning now (`remirror cdp prune`): the points the profile's retention
    (`keep`), or an age the operator gives (`older_than`), does not keep go, the newest always
    stays; without `yes` only what would go is said, each with why. For a replica's own
    points, the way to make room in a pool they fill: they are never pruned for space by
    themselves (a flood of writes must not erase the history: docs/security.md)."""
    mirror, md, now = str(request["mirror"]), str(request["md"]), time.time()
    try:
        keep = Keep.from_json(request["older_than"] if "older_than" in request else request["keep"])
    except ValueError as error:
        raise Refused(f"cdp prune: {error}") from None
    doomed = pruning(index, now, keep, None).expired
    if request.get("yes"):
        local.delete_points(mirror, md, index, list(doomed))
    return {
        "pruned": [{**_point_json(p), "why": why_pruned(p, now, keep)} for p in doomed],
        "deleted": bool(request.get("yes")),
    }


def _down(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    """`cdp down --leg`: this site's operator takes its own leg's points down (before the disk
    goes to other use); nothing brings them back until `cdp up --leg`."""
    mirror = str(request["mirror"])
    if not is_leg_points(mirror):
        raise Refused(
            f"cdp down: {mirror}'s CDP stack goes with `remirror destroy`; --leg takes a leg's points down"
        )
    return {"removed": own_points.take_down_own(mirror)}


def _up(request: dict[str, Any], index: CdpIndex) -> dict[str, Any]:
    """`cdp up --leg`: the mark of `cdp down --leg` removed, the points brought back as their index says."""
    mirror = str(request["mirror"])
    if not is_leg_points(mirror):
        raise Refused(
            f"cdp up: {mirror}'s CDP stack is built by `remirror apply`; --leg brings a leg's own points up"
        )
    taken_down_mark(mirror).unlink(missing_ok=True)
    return {"state": own_points.activate_own(mirror, str(request["md"]))}


# do -> (handler, whether it holds the index lock: it writes the index, or needs its points to stay)
VERBS = {
    "down": (_down, True),
    "up": (_up, True),
    "list": (_list, False),
    "changes": (_changes, False),
    "point": (_point, True),
    "prune": (_prune, True),
    "restore": (_restore, True),
    "rollback": (_rollback, True),
}
