"""Arrays boot assembled by itself, out of a mirror's legs, released before a plan assembles the
mirror as `apply` judges it. Pure: no I/O.

Early boot (Debian's initramfs, whose mdadm.conf is as old as its last rebuild) and udev assemble
arrays from what the disks say, not from the profile: a leg whose partner is at another site
(docs/safety.md, "Boot").
"""

from __future__ import annotations

import dataclasses

from remirror.facts.model import MdArray
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import Action, PlanError
from remirror.plan.md import runs_under_its_name, stop_array_action
from remirror.profile.model import Mirror


def release_partial_assembly(site: SiteFacts, leg: DiskFacts, uuid_: str) -> tuple[list[Action], DiskFacts]:
    """Stop the inactive arrays holding a leg of the mirror; the leg without them.

    udev assembles arrays incrementally (`mdadm --incremental`) from the
    devices a change event shows: a leg record written to a stopped leg, a
    boot with the other legs away. What it builds stays inactive until every
    leg is there: it never ran, so it holds no write, but it holds the leg,
    and neither `mdadm --assemble` nor LIO can open it then.
    """
    if leg.superblock is None or leg.superblock.array_uuid != uuid_:
        return [], leg  # not the mirror's leg (yet): nothing of ours to free
    partial = [h for h in leg.holders if h in site.inactive_arrays]
    # The reconciler may stop them too (Action.repair): they hold no write, and until they are
    # gone a DR site that booted cannot export its disk (seen in the hosts' lab: Debian's
    # initramfs, whose mdadm.conf predates the `<ignore>` line, takes the replica disk).
    actions = [
        stop_array_action(
            site.name,
            f"/dev/{md}",
            f"inactive: assembled in part from {leg.path} by udev; never started",
            repair=True,
        )
        for md in partial
    ]
    return actions, dataclasses.replace(leg, holders=tuple(h for h in leg.holders if h not in partial))


def release_misnamed_array(mirror: Mirror, site: SiteFacts, uuid_: str) -> tuple[list[Action], SiteFacts]:
    """Stop the mirror's array where it runs under another name than the profile's device; the
    site as if it did not run.

    After a clean shutdown in which the replica's session ended first (its leg failed), the
    primary's own leg is all the array expects: early boot, without the ARRAY line, starts it as
    md127 (`/dev/md/m0_0`), auto-read-only, and `/dev/md/m0`, which fstab and every action name,
    never appears (seen in the hosts' lab, Debian 12). Auto-read-only, it has taken no write
    since: stopped (md refuses while anything holds it open), it is assembled again under its
    name with the legs `apply` judges. Written since, it is an operator's to stop.
    """
    array = misnamed_array(mirror, site, uuid_)
    if array is None:
        return [], site
    device = f"/dev/{array.kernel_name}"
    if array.array_state != "read-auto":
        raise PlanError(
            f"site {site.name}: mirror {mirror.name}'s array runs as {device}, not {mirror.md_device},"
            f" and has been written as such ({array.array_state}): stop what uses it and the array"
            f" (mdadm --stop {device}), then apply"
        )
    stop = stop_array_action(
        site.name,
        device,
        f"mirror {mirror.name}'s, started at boot under another name than {mirror.md_device}"
        " and never written since: assembled again under its name",
    )  # not a repair: stopping a running array is apply's, and start's in the plan that assembles it
    held = {
        path: dataclasses.replace(disk, holders=tuple(h for h in disk.holders if h != array.kernel_name))
        for path, disk in site.disks.items()
    }
    rest = tuple(a for a in site.arrays if a is not array)
    return [stop], dataclasses.replace(site, arrays=rest, disks=held)


def misnamed_array(mirror: Mirror, site: SiteFacts, uuid_: str) -> MdArray | None:
    """The mirror's array where it runs only under other /dev/md names than the profile's device.
    One with no name yet (udev not done with it) is not taken for misnamed."""
    ours = [a for a in site.arrays if a.uuid == uuid_]
    if not ours or any(runs_under_its_name(mirror, site, a) for a in ours):
        return None
    named = [a for a in ours if site.array_links.get(a.kernel_name)]
    return named[0] if named else None
