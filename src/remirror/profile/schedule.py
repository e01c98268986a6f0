"""When resyncs may use the link, by the clock: `replication.schedule`. Pure.

An office wants its link to itself from 8 to 18 on weekdays and the sync at
full rate at night. A schedule maps windows of the week to a resync limit:

    schedule:
      "Mon-Fri 08:00-18:00": 10Mbit
      "Sat 09:00-13:00": 50Mbit
      default: unlimited

A window is `[DAYS ]HH:MM-HH:MM`: days as `Mon`, `Mon-Fri` (`Fri-Mon` runs
over the weekend) or a list `Sat,Sun`, none meaning every day; an end at or
before the start runs past midnight into the next day (`Mon-Fri 22:00-06:00`
starts on those days); `24:00` is the day's end. Windows may not overlap,
so which one holds is never a matter of order. Outside every window the
limit is `default`, or `replication.resync_max` (one of the two, never
both), or else `unlimited`: md's system-wide limit, which is what an array
with no limit of its own runs at.

Times are the primary site's local time, as its clock reads when the sites
are observed (so a plan made from another time zone sets the same limit).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
MINUTES_A_DAY = 24 * 60
MINUTES_A_WEEK = 7 * MINUTES_A_DAY
DEFAULT_KEY = "default"  # the schedule's key for the limit outside every window
UNLIMITED = "unlimited"  # a limit's word for md's system-wide one

_WINDOW_RE = re.compile(r"^(?:(?P<days>[A-Za-z,\- ]+?)\s+)?(?P<start>\d\d:\d\d)-(?P<end>\d\d:\d\d)$")


@dataclass(frozen=True)
class Window:
    """A window of the week, as the profile writes it."""

    text: str
    days: frozenset[int]  # 0 is Monday, as datetime.weekday()
    start: int  # minutes after midnight
    end: int  # minutes after midnight, 1..1440; at or before `start`: the next day's

    def minutes(self) -> frozenset[int]:
        """The minutes of the week (0 is Monday 00:00) the window covers."""
        length = self.end - self.start if self.end > self.start else self.end + MINUTES_A_DAY - self.start
        return frozenset(
            (day * MINUTES_A_DAY + self.start + offset) % MINUTES_A_WEEK
            for day in self.days
            for offset in range(length)
        )


def parse_window(text: str) -> Window:
    """A window from `Mon-Fri 08:00-18:00`, `Sat,Sun 00:00-24:00` or `22:00-06:00`."""
    match = _WINDOW_RE.match(text.strip())
    if not match:
        raise ValueError(
            f"{text!r} is not a window (examples: 'Mon-Fri 08:00-18:00', 'Sat,Sun 09:00-13:00',"
            " '22:00-06:00')"
        )
    start, end = _minute(match["start"], text), _minute(match["end"], text)
    if start == MINUTES_A_DAY:
        raise ValueError(f"{text!r}: a window cannot start at 24:00 (write 00:00 of the next day)")
    if start == end:
        raise ValueError(f"{text!r}: the window is empty (a whole day is 00:00-24:00)")
    days = frozenset(range(7)) if match["days"] is None else _days(match["days"], text)
    return Window(text, days, start, end)


def _minute(hhmm: str, text: str) -> int:
    hours, minutes = int(hhmm[:2]), int(hhmm[3:])
    if minutes > 59 or hours > 24 or (hours == 24 and minutes):
        raise ValueError(f"{text!r}: {hhmm} is not a time of day (00:00 to 24:00)")
    return hours * 60 + minutes


def _days(spec: str, text: str) -> frozenset[int]:
    days: set[int] = set()
    for part in spec.split(","):
        ends = [_day(name.strip(), text) for name in part.split("-")]
        if len(ends) == 1:
            days.add(ends[0])
        elif len(ends) == 2:
            first, last = ends
            days.update(day % 7 for day in range(first, last + 1 if last >= first else last + 8))
        else:
            raise ValueError(f"{text!r}: {part.strip()!r} is not a day or a range of days (Mon-Fri)")
    return frozenset(days)


def _day(name: str, text: str) -> int:
    for index, day in enumerate(DAYS):
        if name.lower() == day.lower():
            return index
    raise ValueError(f"{text!r}: {name!r} is not a day ({', '.join(DAYS)})")


def overlap(windows: list[Window]) -> tuple[Window, Window] | None:
    """The first two windows that share a minute of the week, if any."""
    for later, window in enumerate(windows):
        for earlier in windows[:later]:
            if window.minutes() & earlier.minutes():
                return earlier, window
    return None


@dataclass(frozen=True)
class ResyncLimit:
    """The limit a mirror's resyncs are held to now, and why."""

    rate: int | None  # bytes/s; None: md's system-wide limit (`unlimited`)
    window: str | None  # the window that sets it; None: outside every window (or no schedule)
    until: datetime | None  # when the schedule next changes it; None: never (no schedule)


def resync_limit(
    resync_max: int | None, schedule: Mapping[str, int | None] | None, now: datetime | None
) -> ResyncLimit | None:
    """What the array's limit should be at `now` (the primary's local time); None: remirror
    leaves md's limits alone (no limit and no schedule, or a schedule and no clock: which
    window holds is not known, and the limit as it is was set by the clock last known)."""
    if not schedule:
        return None if resync_max is None else ResyncLimit(resync_max, None, None)
    if now is None:
        return None
    outside = schedule.get(DEFAULT_KEY, resync_max)
    windows = [(parse_window(text), rate) for text, rate in schedule.items() if text != DEFAULT_KEY]
    owners = _owners([window for window, _ in windows])
    minute = _week_minute(now)
    owner = owners[minute]
    ahead = (k for k in range(1, MINUTES_A_WEEK) if owners[(minute + k) % MINUTES_A_WEEK] != owner)
    steps = next(ahead, None)  # None: one window all week, or none at all
    until = None if steps is None else now.replace(second=0, microsecond=0) + timedelta(minutes=steps)
    if owner is None:
        return ResyncLimit(outside, None, until)
    window, rate = windows[owner]
    return ResyncLimit(rate, window.text, until)


def _owners(windows: list[Window]) -> list[int | None]:
    """For each minute of the week, the index of the window covering it."""
    owners: list[int | None] = [None] * MINUTES_A_WEEK
    for index, window in enumerate(windows):
        for minute in window.minutes():
            owners[minute] = index
    return owners


def _week_minute(now: datetime) -> int:
    return now.weekday() * MINUTES_A_DAY + now.hour * 60 + now.minute
