"""Plan a mirror's resync limit: the profile's `resync_max` as md's per-array sync_speed_max. Pure.

What a resync or the initial sync may take of the link. md holds a resync to
sync_speed_max only while it runs faster than sync_speed_min (drivers/md/md.c,
md_do_sync): below that floor it never waits. md's floor is 1000 KiB/s unless
the system's is raised (an administrator after fast local rebuilds raises it to
tens of MB/s), so the array's own floor is set with its limit: no higher than
md's default, and no higher than the limit, which then holds whatever the
system's settings (a 10 Mbit/s link carries 1.2 MB/s: a limit under that needs
a floor under it too). Above its floor a resync also gives way to the array's
own I/O, as md does by default.

md keeps both in memory only: an array created or assembled starts without
them, so those steps set them at once (before a recovery gets far), and the
reconciler puts them back whenever they are found otherwise (a live change of
the profile too). A profile that sets none leaves md's limits alone: an
operator may tune them by hand (`echo 20000 > .../md/sync_speed_max`) and the
reconciler must not undo it.

A `schedule` changes the limit by the clock (profile/schedule.py): each plan
sets the one of the window the primary's clock is in, `unlimited` being md's
system-wide limit (`system` written to both files), and `remirror watch`
wakes at each window's edge to plan again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from remirror.facts.model import MdArray
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CHANGE, Action, Verb
from remirror.profile.model import Mirror
from remirror.profile.schedule import ResyncLimit, resync_limit
from remirror.protocol.steps import SetMdAttribute, Step
from remirror.units import format_size

# md's own floor (drivers/md/md.c, sysctl_speed_limit_min), bytes/s.
MD_DEFAULT_FLOOR = 1000 * 1024


def resync_limit_steps(mirror: Mirror, now: datetime | None) -> tuple[Step, ...]:
    """The limits of an array just created or assembled (its kernel name is known only on the
    site), at `now`, the primary's local time."""
    wanted = _wanted(_limit(mirror, now))
    if wanted is None:
        return ()
    return tuple(SetMdAttribute(mirror.md_device, name, _kib(value)) for name, value in wanted.items())


def resync_limit_actions(primary: SiteFacts, mirror: Mirror, array: MdArray) -> list[Action]:
    """The limits of a running array set to the profile's, live, if they are not."""
    limit = _limit(mirror, primary.local_time)
    wanted = _wanted(limit)
    if wanted is None or limit is None:
        return []
    found = {"sync_speed_max": array.sync_speed_max, "sync_speed_min": array.sync_speed_min}
    if found == wanted:
        return []
    limits = f"{_shown(array.sync_speed_max)} -> {_shown(wanted['sync_speed_max'])}"
    subject = f"{mirror.md_device} resync limit {limits}"
    if array.sync_speed_min != wanted["sync_speed_min"]:
        subject += f" (floor {_shown(array.sync_speed_min)} -> {_shown(wanted['sync_speed_min'])})"
    if limit.window is not None:
        subject += f", window {limit.window}"
    elif limit.until is not None:
        subject += ", outside the schedule's windows"
    steps = tuple(
        SetMdAttribute(f"/dev/{array.kernel_name}", name, _kib(value))
        for name, value in wanted.items()
        if found[name] != value
    )
    return [Action(primary.name, Verb.SET_RESYNC_LIMIT, subject, CHANGE, steps, repair=True)]


def _limit(mirror: Mirror, now: datetime | None) -> ResyncLimit | None:
    """The limit the profile asks for at `now`, the primary's clock (None: md's own left alone)."""
    return resync_limit(mirror.replication.resync_max, mirror.replication.schedule, now)


def _wanted(
    limit: ResyncLimit | None,
) -> dict[Literal["sync_speed_min", "sync_speed_max"], int | None] | None:
    """The array's limits for `limit`, bytes/s (the floor first: md reads both anyway); None for
    a limit: md's system-wide one."""
    if limit is None:
        return None
    if limit.rate is None:
        return {"sync_speed_min": None, "sync_speed_max": None}
    return {"sync_speed_min": min(limit.rate, MD_DEFAULT_FLOOR), "sync_speed_max": limit.rate}


def _kib(value: int | None) -> str:
    """What md's sync_speed files take: KiB/s, or `system` for the system-wide limit."""
    return "system" if value is None else str(value // 1024)


def _shown(limit: int | None) -> str:
    return "the system's" if limit is None else f"{format_size(limit)}/s"
