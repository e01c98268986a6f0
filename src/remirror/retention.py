"""CDP's retention policy: when a recovery point is due, which points go. Pure: no I/O.

Below the planner and the agent (docs/design.md, layers): the site's agent
takes and prunes points by it (`remirror cdp point`, the `cdp run` daemon),
health reports the window it keeps. The design, and why, is docs/cdp.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from remirror.facts.cdp import CdpIndex, RecoveryPoint, ThinPoolStatus

# The pool's low-water mark and remirror's own early pruning: keep this much of the
# pool's data free.
FREE_RESERVE = 0.10


def point_due(index: CdpIndex, now: float, every: float) -> bool:
    """Whether a point is due: none yet, or the newest is `every` old.

    A timer a little early (within a tenth of `every`) counts as on time, so a
    timer firing every `every` never skips one.
    """
    if not index.points:
        return True
    return now - index.points[-1].time >= every * 0.9


@dataclass(frozen=True)
class Pruning:
    """Which points to delete now, and why."""

    expired: tuple[RecoveryPoint, ...]  # older than the window
    for_space: tuple[RecoveryPoint, ...]  # within the window, but the pool is running out

    @property
    def points(self) -> tuple[RecoveryPoint, ...]:
        """All points to delete, oldest first."""
        return self.expired + self.for_space


def pruning(index: CdpIndex, now: float, keep: float, pool: ThinPoolStatus | None) -> Pruning:
    """Points older than `keep` go; the newest point always stays.

    When the pool's free data is below FREE_RESERVE, the oldest remaining
    point goes too (one per call: what it frees shows in the pool's status
    only after the delete), so that the volume never runs out of space for
    new writes: the window shrinks instead, and `status` says so.
    """
    points = list(index.points)
    expired = tuple(p for p in points[:-1] if now - p.time > keep)
    left = [p for p in points[:-1] if p not in expired]
    for_space: tuple[RecoveryPoint, ...] = ()
    if pool is not None and pool.data_total and left:
        free = 1 - (pool.data_used / pool.data_total)
        if free < FREE_RESERVE:
            for_space = (left[0],)
    return Pruning(expired, for_space)
