"""CDP's retention policy: when a recovery point is due, which points go. Pure: no I/O.

Below the planner and the agent (docs/design.md, layers): the site's agent
takes and prunes points by it (`remirror cdp point`, the `cdp run` daemon),
health reports the window it keeps. The design, and why, is docs/cdp.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from remirror.facts.cdp import RecoveryPoint, ThinPoolStatus
from remirror.facts.cdp_index import CdpIndex
from remirror.units import format_duration

# The pool's low-water mark and remirror's own early pruning: keep this much of the
# pool's data free.
FREE_RESERVE = 0.10


def point_due(index: CdpIndex, now: float, every: float, early: float | None = None) -> bool:
    """Whether a point is due: none yet, or the newest is `every` old.

    A caller a little early counts as on time: by default within a tenth of `every`, so a
    timer firing every `every` never skips one. CDP's daemon, which looks every few seconds,
    passes half its own period instead: with a tenth, a point every hour came every 54
    minutes (the bench's daemon took its points at 0.9 of `every`, 2026-12-03).
    """
    if not index.points:
        return True
    return now - index.points[-1].time >= every - (every * 0.1 if early is None else early)


HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
# The grid's tiers, finest first: each keeps, for points up to its age, the oldest point of each
# of its periods (`all`: every point). Periods are whole hours, days and weeks (from Monday) of
# UTC: they nest, so the point a day keeps is one its hour kept, and a point once kept by a
# coarser tier was kept by every finer one before it.
TIERS: tuple[tuple[str, float], ...] = (("all", 0.0), ("hourly", HOUR), ("daily", DAY), ("weekly", WEEK))
_MONDAY = 3 * DAY  # the epoch was a Thursday: weeks are counted from the Monday before it


@dataclass(frozen=True)
class Keep:
    """How long points are kept: `keep: 7d` is every point for 7 days (`all` alone); a grid
    `{all: 1h, hourly: 1d, daily: 30d, weekly: 12w}` keeps every point for an hour, the first of
    each hour for a day, of each day for 30 days, of each week for 12 weeks. A tier of 0 is not
    kept. The newest point always stays."""

    all: float
    hourly: float = 0.0
    daily: float = 0.0
    weekly: float = 0.0

    @property
    def longest(self) -> float:
        """The age past which no point is kept (the window `status` shows)."""
        return max(self.all, self.hourly, self.daily, self.weekly)

    def ages(self) -> tuple[tuple[str, float, float], ...]:
        """(tier, its period, how old its points may be) of each tier kept, finest first."""
        return tuple((name, period, getattr(self, name)) for name, period in TIERS if getattr(self, name) > 0)

    def at_most(self, every: float) -> float:
        """How many points it keeps at most, with a point every `every` seconds."""
        count = self.all / every
        for name, period, age in self.ages():
            if name != "all":
                count += math.ceil(age / max(period, every)) + 1
        return count

    @property
    def is_grid(self) -> bool:
        """More than an age: a tier coarser than `all`."""
        return bool(self.hourly or self.daily or self.weekly)

    def shown(self) -> str:
        """`7d` for an age, `all 1h, hourly 1d, daily 30d` for a grid."""
        if not self.is_grid:
            return format_duration(self.all)
        return ", ".join(f"{name} {format_duration(age)}" for name, _, age in self.ages())

    def widest(self, other: Keep) -> Keep:
        """Each tier as long as the longer of the two (two profiles' retentions at one site)."""
        return Keep(*(max(getattr(self, name), getattr(other, name)) for name, _ in TIERS))

    def as_json(self) -> dict[str, float]:
        return {name: getattr(self, name) for name, _ in TIERS}

    @classmethod
    def from_json(cls, value: Any) -> Keep:
        """A retention from a request: seconds (age only) or `{tier: seconds}`; ValueError else."""
        if isinstance(value, int | float) and not isinstance(value, bool):
            tiers: Mapping[str, Any] = {"all": value}
        elif isinstance(value, dict) and set(value) <= {name for name, _ in TIERS}:
            tiers = value
        else:
            raise ValueError(f"a retention is seconds or {{tier: seconds}}, not {str(value)[:60]!r}")
        ages = {name: tiers.get(name, 0.0) for name, _ in TIERS}
        if not all(_seconds(age) for age in ages.values()):
            raise ValueError(f"a retention's ages are seconds: {str(value)[:60]!r}")
        return cls(**{name: float(age) for name, age in ages.items()})


def _seconds(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 1e10


def kept_by(points: Sequence[RecoveryPoint], now: float, keep: Keep) -> dict[int, str]:
    """Each point the grid keeps now, by id, with the finest tier that keeps it; the newest
    point is kept whatever its age ("newest" when no tier would)."""
    kept: dict[int, str] = {}
    for name, period, age in keep.ages():
        periods: set[int] = set()
        for point in points:  # oldest first: the first of each period is its one
            if name != "all":
                period_of = _bucket(point, period)
                if period_of in periods:
                    continue
                periods.add(period_of)
            if now - point.time <= age:
                kept.setdefault(point.id, name)
    if points and points[-1].id not in kept:
        kept[points[-1].id] = "newest"
    return kept


def tier_counts(points: Sequence[RecoveryPoint], now: float, keep: Keep) -> dict[str, int] | None:
    """How many of the points each tier of a grid keeps now (by the finest that keeps it;
    "newest" for a newest point no tier keeps): what `status` shows. None: an age, not a grid."""
    if not keep.is_grid:
        return None
    counts = {name: 0 for name, _, _ in keep.ages()}
    for tier in kept_by(points, now, keep).values():
        counts[tier] = counts.get(tier, 0) + 1
    return counts


def _bucket(point: RecoveryPoint, period: float) -> int:
    offset = _MONDAY if period == WEEK else 0.0
    return math.floor((point.time + offset) / period)


def why_pruned(point: RecoveryPoint, now: float, keep: Keep) -> str:
    """Why the grid lets `point` go (one it does not keep)."""
    age = now - point.time
    if age > keep.longest:
        return f"older than {format_duration(keep.longest)}, the longest retention"
    within = [(name, period) for name, period, tier_age in keep.ages() if age <= tier_age and name != "all"]
    if not within:
        return f"older than all: {format_duration(keep.all)}, and no coarser tier keeps it"
    name, _ = within[0]
    return f"not the first point of its {_PERIOD_WORD[name]} ({name} tier)"


_PERIOD_WORD = {"hourly": "hour", "daily": "day (UTC)", "weekly": "week (UTC, from Monday)"}


@dataclass(frozen=True)
class Pruning:
    """Which points to delete now, and why."""

    expired: tuple[RecoveryPoint, ...]  # older than the window
    for_space: tuple[RecoveryPoint, ...]  # within the window, but the pool is running out

    @property
    def points(self) -> tuple[RecoveryPoint, ...]:
        """All points to delete, oldest first."""
        return self.expired + self.for_space


def pruning(index: CdpIndex, now: float, keep: Keep | float, pool: ThinPoolStatus | None) -> Pruning:
    """The points `keep` does not keep go (retention by age, or a grid: kept_by); the newest
    point always stays.

    When the pool's free data is below FREE_RESERVE, the oldest remaining
    point goes too (one per call: what it frees shows in the pool's status
    only after the delete), so that the volume never runs out of space for
    new writes: the window shrinks instead, and `status` says so.
    """
    keep = keep if isinstance(keep, Keep) else Keep(all=keep)
    points = list(index.points)
    kept = kept_by(points, now, keep)
    expired = tuple(p for p in points if p.id not in kept)
    left = [p for p in points[:-1] if p.id in kept]
    for_space: tuple[RecoveryPoint, ...] = ()
    if pool is not None and pool.data_total and left:
        free = 1 - (pool.data_used / pool.data_total)
        if free < FREE_RESERVE:
            for_space = (left[0],)
    return Pruning(expired, for_space)
