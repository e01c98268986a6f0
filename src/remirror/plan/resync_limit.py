"""Plan a mirror's resync limit: the profile's `resync_max` as md's per-array sync_speed_max. Pure.

What a resync or the initial sync may take of the link. md keeps the limit
in memory only: an array created or assembled starts without it, so those
steps set it at once (before a recovery gets far), and the reconciler puts
it back whenever it is found otherwise (a live change of the profile too).
A profile that sets none leaves md's limit alone: an operator may tune it by
hand (`echo 20000 > .../md/sync_speed_max`) and the reconciler must not undo it.
"""

from __future__ import annotations

from remirror.facts.model import MdArray
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CHANGE, Action, Verb
from remirror.plan.steps import Step, WriteDiskSysfs, WriteSysfs
from remirror.profile.model import Mirror
from remirror.units import format_size


def resync_limit_steps(mirror: Mirror) -> tuple[Step, ...]:
    """The limit on an array just created or assembled (its kernel name is known only on the site)."""
    if mirror.replication.resync_max is None:
        return ()
    return (WriteDiskSysfs(mirror.md_device, "md/sync_speed_max", _sysfs_value(mirror)),)


def resync_limit_actions(primary: SiteFacts, mirror: Mirror, array: MdArray) -> list[Action]:
    """The limit of a running array set to the profile's, live, if it is not."""
    wanted = mirror.replication.resync_max
    if wanted is None or array.sync_speed_max == wanted:
        return []
    path = f"/sys/block/{array.kernel_name}/md/sync_speed_max"
    subject = f"{mirror.md_device} resync limit {_shown(array.sync_speed_max)} -> {_shown(wanted)}"
    return [
        Action(
            primary.name,
            Verb.SET_RESYNC_LIMIT,
            subject,
            CHANGE,
            (WriteSysfs(path, _sysfs_value(mirror)),),
            repair=True,
        )
    ]


def _sysfs_value(mirror: Mirror) -> str:
    """What sync_speed_max takes: KiB/s."""
    return str((mirror.replication.resync_max or 0) // 1024)


def _shown(limit: int | None) -> str:
    return "the system's" if limit is None else f"{format_size(limit)}/s"
