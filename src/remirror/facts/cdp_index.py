"""CDP's index of points: the points of one stack, kept in two slots at its start (remirror.facts.slots)
so that a crash mid-write leaves one intact, and what `observe` reports of it. Pure.

Each point is `[id, time, era]`; what its hooks did (remirror.agent.hooks) is kept beside
them as runs of point ids (`"hooks": {"clean": [[first, last], ...], "failed": [...]}`):
a few bytes for thousands of points, and an index an older remirror reads as it did.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace
from typing import Any

from remirror.facts.cdp import Layout, RecoveryPoint
from remirror.facts.slots import SLOTS, decode_slots, encode_slot, slot_for

# What a point records of its hooks (remirror.agent.hooks); "": it had none.
CLEAN, FAILED = "clean", "failed"


@dataclass(frozen=True)
class CdpIndex:
    """The points of one mirror, as kept in the index slice on the mirror itself."""

    mirror: str
    layout: Layout
    points: tuple[RecoveryPoint, ...] = ()
    next_id: int = 1  # thin id 0 is the volume
    sequence: int = 0  # bumped on every write; the newer of the two slots wins

    def point(self, key: str) -> RecoveryPoint | None:
        """A point by its id (`7`, `#7`)."""
        wanted = key.lstrip("#")
        return next((p for p in self.points if str(p.id) == wanted), None)

    def at_or_before(self, when: float) -> RecoveryPoint | None:
        """The newest point taken at or before `when`."""
        earlier = [p for p in self.points if p.time <= when]
        return max(earlier, key=lambda p: p.time) if earlier else None


# The index slice holds two slots (remirror.facts.slots): a crash mid-write leaves one intact.
INDEX_MAGIC = b"RMRCDP01"
INDEX_SLOTS = SLOTS


def encode_index(index: CdpIndex, slot_size: int) -> bytes:
    """One slot's bytes (padded to `slot_size`)."""
    body = {
        "mirror": index.mirror,
        "layout": index.layout.as_json(),
        "next_id": index.next_id,
        # compact: [id, time, era] per point; a week of points a minute apart is ~300KiB
        "points": [[p.id, round(p.time, 3), p.era] for p in index.points],
    }
    if hooks := _outcome_runs(index.points):
        body["hooks"] = hooks
    return encode_slot(
        INDEX_MAGIC, index.sequence, body, slot_size, f"the index of {len(index.points)} points"
    )


def decode_index(data: bytes, slot_size: int) -> CdpIndex | None:
    """The newest intact slot of an index slice, or None if neither slot holds one."""
    found = decode_slots(INDEX_MAGIC, data, slot_size)
    if found is None:
        return None
    sequence, body = found
    return CdpIndex(
        mirror=body["mirror"],
        layout=Layout.from_json(body["layout"]),
        points=_with_outcomes(
            [RecoveryPoint(int(i), float(t), int(e)) for i, t, e in body["points"]], body.get("hooks", {})
        ),
        next_id=body["next_id"],
        sequence=sequence,
    )


def _outcome_runs(points: tuple[RecoveryPoint, ...]) -> dict[str, list[list[int]]]:
    """The points' hooks' outcomes as runs of consecutive points: {outcome: [[first id, last id]]}."""
    runs: dict[str, list[list[int]]] = {}
    previous = ""
    for point in points:
        if point.hooks and point.hooks == previous:
            runs[point.hooks][-1][1] = point.id
        elif point.hooks:
            runs.setdefault(point.hooks, []).append([point.id, point.id])
        previous = point.hooks
    return runs


def _with_outcomes(points: list[RecoveryPoint], runs: Any) -> tuple[RecoveryPoint, ...]:
    """The points with their hooks' outcomes (what does not read as runs of ours is left out)."""
    spans = sorted(
        (int(first), int(last), outcome)
        for outcome, found in (runs.items() if isinstance(runs, dict) else ())
        if outcome in (CLEAN, FAILED)
        for first, last in found
    )
    starts = [first for first, _, _ in spans]
    out = []
    for point in points:
        at = bisect.bisect_right(starts, point.id) - 1
        inside = at >= 0 and spans[at][0] <= point.id <= spans[at][1]
        out.append(replace(point, hooks=spans[at][2]) if inside else point)
    return tuple(out)


def index_slot_for(index: CdpIndex) -> int:
    """The slot a write of `index` goes to (slot 0, at the mirror's first sector, first: a new
    stack shows its magic there at once)."""
    return slot_for(index.sequence)


@dataclass(frozen=True)
class CdpPoints:
    """A mirror's points in short, as observe reports them (the index itself stays on the site)."""

    count: int
    oldest: float | None  # epoch seconds
    newest: float | None
    ids: tuple[int, ...] = ()  # each point's id and time, oldest first: the retention's tiers
    times: tuple[float, ...] = ()

    @classmethod
    def of(cls, index: CdpIndex) -> CdpPoints:
        """The summary of an index."""
        ids, times = tuple(p.id for p in index.points), tuple(p.time for p in index.points)
        return cls(len(times), min(times, default=None), max(times, default=None), ids, times)

    @classmethod
    def from_json(cls, info: dict[str, Any]) -> CdpPoints:
        """As observe sent it (lists for tuples)."""
        ids, times = tuple(map(int, info.get("ids", ()))), tuple(map(float, info.get("times", ())))
        return cls(int(info["count"]), info.get("oldest"), info.get("newest"), ids, times)

    @property
    def points(self) -> tuple[RecoveryPoint, ...]:
        """The points, oldest first, with no era (what the retention needs of them)."""
        return tuple(RecoveryPoint(i, t, 0) for i, t in zip(self.ids, self.times, strict=True))
