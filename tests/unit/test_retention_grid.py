"""Retention grids (`keep: {all: 1h, hourly: 1d, daily: 30d, weekly: 12w}`, remirror.retention):
which points each tier keeps, why the others go, and how the profile takes them. Pure."""

from __future__ import annotations

import math

import pytest

from remirror.errors import ProfileError
from remirror.facts.cdp import RecoveryPoint, layout
from remirror.facts.cdp_index import CdpIndex
from remirror.profile import parse_profile
from remirror.retention import DAY, HOUR, WEEK, Keep, kept_by, pruning, tier_counts, why_pruned
from tests.conftest import PROFILES

NOW = 1_796_000_000.0  # 2026-11-30 00:53 UTC, a Monday
GRID = Keep(all=HOUR, hourly=DAY, daily=30 * DAY, weekly=12 * WEEK)


def every(seconds: float, span: float) -> list[RecoveryPoint]:
    """A point every `seconds` for `span` up to NOW, oldest first."""
    count = int(span // seconds)
    return [RecoveryPoint(i + 1, NOW - (count - i) * seconds, i + 1) for i in range(count + 1)]


def expected(points: list[RecoveryPoint], now: float, keep: Keep) -> set[int]:
    """The grid as its documentation says it, written out plainly: every point younger than
    `all`; for each coarser tier, the oldest point of each of its periods (UTC hours, days, and
    weeks from Monday), if younger than the tier's age; the newest point whatever."""
    kept = {p.id for p in points if now - p.time <= keep.all}
    for period, age, shift in (
        (HOUR, keep.hourly, 0.0),
        (DAY, keep.daily, 0.0),
        (WEEK, keep.weekly, 3 * DAY),
    ):
        first: dict[int, RecoveryPoint] = {}
        for p in points:
            first.setdefault(math.floor((p.time + shift) / period), p)
        kept |= {p.id for p in first.values() if now - p.time <= age}
    return kept | {points[-1].id}


def test_a_grid_keeps_every_recent_point_then_the_first_of_each_hour_day_and_week() -> None:
    points = every(600, 120 * DAY)  # a point every 10 minutes for four months
    kept = kept_by(points, NOW, GRID)
    assert set(kept) == expected(points, NOW, GRID)
    counts = tier_counts(points, NOW, GRID)
    assert counts is not None
    assert counts["all"] == 7  # the last hour's, both ends included
    assert 22 <= counts["hourly"] <= 24  # the other hours of the last day
    assert 28 <= counts["daily"] <= 30
    assert 7 <= counts["weekly"] <= 9  # the weeks from 30 days back to 12 weeks
    assert sum(counts.values()) == len(kept)
    # Pruning leaves exactly the grid; what went says why.
    doomed = pruning(CdpIndex("m0", layout(1 << 30, 64 * 1024, 25), tuple(points), 1), NOW, GRID, None)
    assert {p.id for p in points} - {p.id for p in doomed.expired} == set(kept)
    reasons = {why_pruned(p, NOW, GRID) for p in doomed.expired}
    assert reasons == {
        "not the first point of its hour (hourly tier)",
        "not the first point of its day (UTC) (daily tier)",
        "not the first point of its week (UTC, from Monday) (weekly tier)",
        "older than 84d, the longest retention",
    }


def test_what_a_grid_keeps_later_it_kept_before_so_pruning_as_it_goes_loses_nothing_it_would_keep() -> None:
    """The periods nest (hours in days in weeks): pruning every hour leaves what one prune at the
    end would. The daemon prunes at every point; nothing it dropped would have been kept."""
    points = every(900, 20 * DAY)
    survivors = list(points[:1])
    for point in points[1:]:
        survivors.append(point)
        survivors = [p for p in survivors if p.id in kept_by(survivors, point.time, GRID)]
    assert {p.id for p in survivors} == set(kept_by(points, points[-1].time, GRID))


def test_an_age_is_a_grid_of_all_alone_and_prunes_as_it_always_did() -> None:
    points = every(60, 2 * HOUR)
    week = Keep(all=HOUR)
    assert set(kept_by(points, NOW, week)) == {p.id for p in points if NOW - p.time <= HOUR}
    assert tier_counts(points, NOW, week) is None  # status shows tiers of a grid only
    assert why_pruned(points[0], NOW, week) == "older than 1h, the longest retention"
    # The newest point stays, however old.
    assert kept_by(points[:1], NOW + 30 * DAY, week) == {points[0].id: "newest"}


def test_a_retention_crosses_the_wire_as_seconds_or_tiers_and_nothing_else() -> None:
    assert Keep.from_json(GRID.as_json()) == GRID
    assert Keep.from_json(3600) == Keep(all=3600.0)
    for bad in ({"all": 1, "yearly": 2}, {"all": -1}, {"all": True}, "7d", None, {"hourly": float("inf")}):
        with pytest.raises(ValueError, match="retention"):
            Keep.from_json(bad)


def cdp(keep: str) -> str:
    return (PROFILES / "lab.yaml").read_text() + f"    cdp: {{every: 60s, keep: {keep}}}\n"


def test_a_profile_writes_a_grid_as_a_mapping_of_tiers() -> None:
    mirror = parse_profile(cdp("{all: 1h, hourly: 1d, daily: 30d, weekly: 12w}")).mirrors[0]
    assert mirror.cdp is not None
    assert mirror.cdp.retention == GRID
    assert mirror.cdp.retention.shown() == "all 1h, hourly 1d, daily 30d, weekly 84d"
    assert parse_profile(cdp("7d")).mirrors[0].cdp.retention == Keep(all=7 * DAY)  # type: ignore[union-attr]
    # A point a minute for an hour, then hours, days and weeks: about 180 points, not 120,000.
    assert GRID.at_most(60) < 200


@pytest.mark.parametrize(
    ("keep", "message"),
    [
        ("{hourly: 1d, daily: 12h}", r"keep: daily \(43200s\) must keep longer than hourly \(86400s\)"),
        ("{all: 1h, hourly: 1h}", r"hourly \(3600s\) must keep longer than all"),
        ("{}", "a grid keeps at least one tier"),
        ("{all: 1h, monthly: 1y}", r"monthly"),
        ("{all: 30s}", "shorter than the interval between points"),
        ("{all: 42d}", r"keeps 60480 points: at most 60000"),
    ],
)
def test_a_grid_that_cannot_be_meant_is_refused_where_it_is_written(keep: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profile(cdp(keep), source="lab.yaml")
