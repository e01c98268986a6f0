"""Resync limits by the clock (`replication.schedule`, profile/schedule.py) and the rates they are
written in (units.parse_rate): pure, no storage."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta, timezone

import pytest

from remirror.cli.status_view import status_text
from remirror.errors import ProfileError
from remirror.health import State
from remirror.health.report import MirrorReport
from remirror.profile import parse_profile
from remirror.profile.schedule import ResyncLimit, overlap, parse_window, resync_limit
from remirror.reconcile.watch import next_window_edge
from remirror.units import parse_rate
from tests.conftest import PROFILES

MONDAY = datetime(2026, 11, 30, tzinfo=timezone(timedelta(hours=1)))  # 00:00, a Monday
OFFICE = {"Mon-Fri 08:00-18:00": 1_250_000, "Sat,Sun 22:00-02:00": 6_000_000, "default": None}


@pytest.mark.parametrize(
    ("text", "bytes_per_second"),
    [
        ("50Mbit", 6_250_000),
        ("50Mbit/s", 6_250_000),
        ("50Mbps", 6_250_000),
        ("10mbit", 1_250_000),  # tc's spelling
        ("1Gbit/s", 125_000_000),
        ("100kbit", 12_500),
        ("6MB/s", 6_000_000),
        ("40MiB", 40 * 1024**2),
        ("40MiB/s", 40 * 1024**2),
        ("65536", 65536),
        (65536, 65536),
    ],
)
def test_a_rate_is_bits_as_links_are_sold_or_bytes_per_second(text: str | int, bytes_per_second: int) -> None:
    assert parse_rate(text) == bytes_per_second


@pytest.mark.parametrize("text", ["6Mb", "6Mb/s", "fast", "0Mbit", "-5MB/s", True])
def test_a_rate_that_could_be_bits_or_bytes_or_nothing_is_refused(text: str | bool) -> None:
    with pytest.raises(ValueError, match="rate"):
        parse_rate(text)


def test_windows_are_days_and_hours_of_the_week() -> None:
    assert parse_window("Mon-Fri 08:00-18:00").days == frozenset(range(5))
    assert parse_window("Fri-Mon 00:00-24:00").days == frozenset({4, 5, 6, 0})  # over the weekend
    assert parse_window("sat,Sun 09:00-13:00").days == frozenset({5, 6})
    assert parse_window("22:00-06:00").days == frozenset(range(7))  # every day
    night = parse_window("Mon 22:00-06:00")  # into Tuesday morning
    assert len(night.minutes()) == 8 * 60
    assert max(night.minutes()) == 1440 + 6 * 60 - 1
    assert len(parse_window("Sun 23:00-01:00").minutes() & set(range(60))) == 60  # wraps the week


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Mon-Fry 08:00-18:00", "'Fry' is not a day"),
        ("Mon 8-18", "is not a window"),
        ("Mon 08:00-25:00", "25:00 is not a time of day"),
        ("Mon 08:60-18:00", "08:60 is not a time of day"),
        ("Mon 24:00-06:00", "cannot start at 24:00"),
        ("Mon 08:00-08:00", "the window is empty"),
        ("Mon-Wed-Fri 08:00-18:00", "is not a day or a range of days"),
    ],
)
def test_a_window_that_does_not_read_is_refused_with_the_reason(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_window(text)


def test_overlapping_windows_are_found_whatever_their_order() -> None:
    windows = [
        parse_window("Mon-Fri 08:00-18:00"),
        parse_window("Sat 09:00-12:00"),
        parse_window("Fri 17:59-19:00"),
    ]
    assert overlap(windows) == (windows[0], windows[2])
    assert overlap(windows[:2]) is None
    assert overlap([parse_window("Sun 23:00-01:00"), parse_window("Mon 00:30-01:00")]) is not None


def test_the_limit_is_the_windows_until_its_edge_then_the_one_outside() -> None:
    def at(hours: float) -> datetime:
        return MONDAY + timedelta(hours=hours)

    assert resync_limit(None, OFFICE, at(9.5)) == ResyncLimit(1_250_000, "Mon-Fri 08:00-18:00", at(18))
    assert resync_limit(None, OFFICE, at(18)) == ResyncLimit(None, None, at(24 + 8))  # Tuesday 08:00
    assert resync_limit(None, OFFICE, at(7 + 59 / 60)) == ResyncLimit(None, None, at(8))
    # Friday evening to Saturday's window at 22:00.
    assert resync_limit(None, OFFICE, at(4 * 24 + 18)) == ResyncLimit(None, None, at(5 * 24 + 22))
    # Sunday 23:00 is in Sunday's night window, which ends on Monday 02:00 (the week wraps).
    assert resync_limit(None, OFFICE, at(6 * 24 + 23)) == ResyncLimit(
        6_000_000, "Sat,Sun 22:00-02:00", at(7 * 24 + 2)
    )
    # Without `default`, resync_max outside the windows; without a schedule, resync_max alone.
    office = {k: v for k, v in OFFICE.items() if k != "default"}
    assert resync_limit(40 << 20, office, at(20)) == ResyncLimit(40 << 20, None, at(32))
    assert resync_limit(40 << 20, None, at(9)) == ResyncLimit(40 << 20, None, None)
    assert resync_limit(None, None, at(9)) is None  # md's limits left alone
    # A clock not known: which window holds is not known either; md's limits are left as set.
    assert resync_limit(None, OFFICE, None) is None


def profile_with(replication: str) -> str:
    text = (PROFILES / "lab.yaml").read_text()
    return text.replace("      on_link_loss: degrade\n", f"      on_link_loss: degrade\n{replication}")


@pytest.mark.parametrize(
    ("replication", "message"),
    [
        ('      schedule:\n        "Mon-Fri 08:00-18:00": fast\n', r"'fast' is not a rate"),
        ('      schedule:\n        "Mon-Fri 08:00-18:00": 32KiB\n', r"at least 64KiB"),
        (
            '      schedule:\n        "Mon-Fry 08:00-18:00": 10Mbit\n',
            r"schedule: 'Mon-Fry 08:00-18:00': 'Fry' is not a day",
        ),
        (
            '      schedule:\n        "Mon-Fri 08:00-18:00": 10Mbit\n        "Fri 17:00-20:00": 20Mbit\n',
            r":\d+:\d+: mirrors\[0\]\.replication\.schedule\.Fri 17:00-20:00: overlaps 'Mon-Fri 08:00-18:00'",
        ),
        (
            "      resync_max: 40MiB\n      schedule:\n        default: unlimited\n",
            r"schedule\.default: says the same as resync_max",
        ),
        ("      resync_max: 6Mb\n", r"'6Mb' is not a rate"),
    ],
)
def test_a_schedule_that_cannot_hold_is_refused_where_it_is_written(replication: str, message: str) -> None:
    with pytest.raises(ProfileError, match=message):
        parse_profile(profile_with(replication), source="lab.yaml")


def test_resync_max_takes_the_link_units_and_md_holds_whole_kib() -> None:
    profile = parse_profile(profile_with("      resync_max: 10Mbit\n"))
    assert profile.mirrors[0].replication.resync_max == 1220 * 1024


def test_the_watch_wakes_a_second_past_the_next_windows_edge() -> None:
    profile = parse_profile(profile_with('      schedule:\n        "Mon-Fri 08:00-18:00": 10Mbit\n'))
    assert next_window_edge(profile, MONDAY + timedelta(hours=17, minutes=59, seconds=30)) == 31.0
    assert next_window_edge(profile, MONDAY + timedelta(hours=18)) == 14 * 3600 + 1.0
    assert next_window_edge(parse_profile(profile_with("")), MONDAY) is None


def test_status_says_the_schedules_limit_its_window_and_its_end() -> None:
    report = MirrorReport(
        mirror="lab0",
        device="/dev/md/lab0",
        mode="sync",
        state=State.MIRRORED,
        reason="every leg in sync",
        legs=(),
        schedule=ResyncLimit(1_250_000, "Mon-Fri 08:00-18:00", MONDAY + timedelta(hours=18)),
    )
    assert (
        "  resync limit 10Mbit/s by the schedule: window Mon-Fri 08:00-18:00, until Mon 18:00"
        in status_text([report], 0)
    )
    outside = ResyncLimit(None, None, MONDAY + timedelta(days=1, hours=8))
    assert (
        "resync limit unlimited (md's system limit) by the schedule: outside the schedule's windows, until Tue 08:00"
        in status_text([dataclasses.replace(report, schedule=outside)], 0)
    )


@pytest.mark.parametrize(
    "clock",
    [
        {"time": 1e18, "utc_offset": 0},  # past what a datetime holds
        {"time": 253402300799, "utc_offset": 0},  # the year 9999: a schedule's week would overflow
        {"time": 1_796_000_000, "utc_offset": 86400 * 2},
        {"time": "now", "utc_offset": 0},
        {"time": 1_796_000_000},
        None,
        "yesterday",
    ],
)
def test_a_clock_no_one_believes_is_no_clock(clock: object) -> None:
    """A site's clock comes from the site: what no clock says is taken as none (md left alone)."""
    from remirror.facts.site import site_facts

    assert site_facts("site-a", {"clock": clock}).local_time is None
    believed = site_facts("site-a", {"clock": {"time": 1_796_000_000.5, "utc_offset": 3600}}).local_time
    assert believed == datetime(2026, 11, 30, 1, 53, 20, 500000, tzinfo=timezone(timedelta(hours=1)))
