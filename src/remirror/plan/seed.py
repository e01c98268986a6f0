"""`initial_sync: seeded`: a new mirror over legs that hold a seed, brought up to date. Pure.

The primary made a seed of its disk (`remirror seed export`), each replica
site wrote it onto its disk (`seed import`), and meanwhile the primary's
disk went on changing. Before the array is made, each replica is caught up:
both sites hash their leg in chunks, and the primary copies only the chunks
whose digests differ through the replica's iSCSI disk (remirror.catch_up);
then the array is made over equal legs without an initial sync
(`--assume-clean`), as `initial_sync: skip` makes it over blank ones.

A digest pass tells apart every change since the seed, whatever its age,
on the disk the seed was made of. What it cannot tell apart is another
disk: a seed whose records do not agree, or whose file system is no longer
on the primary's disk or the replica's, is refused here with the reason,
before anything is written.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from remirror.facts.seed import SeedHeader, same_file_system
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import PlanError
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import cache_name
from remirror.protocol.steps import DeviceUnwritten, Step

Counters = tuple[int, int]  # a device's sectors written and discarded since boot
SLOWEST_LINK = 125_000  # bytes a second (1 Mbit/s): how long the controller waits for a copy to cross


@dataclass(frozen=True)
class CatchUpSeed(Step):
    """The controller's, not a site's: hash the primary's `source` and the replica site's
    `replica_device` chunk by chunk, then copy what differs onto `target` (the replica as the
    primary sees it) with `copy_spans` steps. `size`: the bytes the array will hold."""

    kind: ClassVar[str] = "catch_up_seed"
    mirror: str
    seed: str
    source: str
    target: str
    replica_site: str
    replica_device: str
    size: int


def measured(counters: Mapping[str, Counters], step: Step) -> Step:
    """`step`, or a DeviceUnwritten guard with what this apply's catch-up measured of its device
    (none measured: it stays unmeasured, and fails at the site)."""
    if not isinstance(step, DeviceUnwritten) or step.written >= 0 or step.device not in counters:
        return step
    written, discarded = counters[step.device]
    return dataclasses.replace(step, written=written, discarded=discarded)


def without_seed(disk: DiskFacts, seed: SeedHeader | None) -> DiskFacts:
    """`disk` as a new array's guards judge it: the seed's own file system on a replica (a create
    that failed after it copied the first chunk) is the seed, checked, not data to write over."""
    if seed is None:
        return disk
    return dataclasses.replace(
        disk, signatures=tuple(s for s in disk.signatures if not same_file_system(s, seed))
    )


def seeding(
    profile: Profile, index: int, mirror: Mirror, facts: Mapping[str, SiteFacts], uuid_: str
) -> SeedHeader | None:
    """The seed a new array of `mirror` is made over, every record and disk checked (PlanError
    saying why not); None when the mirror is not seeded or its array is not new (it exists, or
    a leg carries its superblock: it is assembled, never made again)."""
    if mirror.replication.initial_sync != "seeded":
        return None
    primary = facts[mirror.primary.site]
    if primary.array_named(mirror.name, uuid_) is not None:
        return None
    contents = {leg.site: _contents(facts[leg.site], mirror, leg.site, leg.disk) for leg in mirror.legs}
    if any(d.superblock is not None and d.superblock.array_uuid == uuid_ for d in contents.values()):
        return None
    where = profile.where("mirrors", index, "replication", "initial_sync")
    made = primary.seed(profile.name, mirror.name, "export")
    if made is None:
        raise PlanError(
            f"{where}: seeded, but site {primary.name} has made no seed of {mirror.name}: run"
            f" `remirror seed export {profile.name} {mirror.name} --to FILE` there, and import it at"
            " each replica site (docs/seeding.md)"
        )
    seed, disk = made.header, contents[primary.name]
    raw = primary.disks[mirror.primary.disk]
    if (
        made.disk != mirror.primary.disk
        or not any(same_file_system(s, seed) for s in disk.signatures)
        or (raw.size // seed.chunk - 1) * seed.chunk != seed.size
    ):
        raise PlanError(
            f"{where}: site {primary.name}'s {mirror.primary.disk} is no longer the disk seed"
            f" {_named(seed)} was made of ({made.disk}: {seed.fs_type} {seed.fs_uuid}, {seed.size}"
            " bytes): its changes since cannot be told apart from another disk's; export a new seed"
            " and import it"
        )
    for replica in mirror.replicas:
        site = facts[replica.site]
        _check_replica(where, profile, mirror, seed, site, site.disks[replica.disk], contents[replica.site])
    return seed


def _check_replica(
    where: str,
    profile: Profile,
    mirror: Mirror,
    seed: SeedHeader,
    site: SiteFacts,
    raw: DiskFacts,
    disk: DiskFacts,
) -> None:
    """The replica's disk holds the primary's newest seed, taken whole onto it, and nothing since:
    blank-looking, since an import leaves the first chunk (the file system's superblock) for the
    catch-up to copy last (remirror.agent.seed)."""
    taken = site.seed(profile.name, mirror.name, "import")
    if taken is None:
        raise PlanError(
            f"{where}: seeded, but site {site.name} holds no seed of {mirror.name}: run `remirror seed"
            f" import {profile.name} {mirror.name} --from FILE` there (docs/seeding.md)"
        )
    if taken.header.seed != seed.seed:
        raise PlanError(
            f"{where}: site {site.name} holds seed {_named(taken.header)}, and site {seed.site} last"
            f" made seed {_named(seed)}: import that one at {site.name}"
        )
    if (taken.disk, taken.disk_size) != (raw.path, raw.size):
        raise PlanError(
            f"{where}: site {site.name} took seed {_named(seed)} onto {taken.disk} ({taken.disk_size}"
            f" bytes), not {raw.path} ({raw.size} bytes): import it onto the profile's disk"
        )
    # Blank-looking, or (a create that failed after it copied the first chunk) the seed's own
    # file system alone: the catch-up compares every chunk again.
    ours = all(same_file_system(s, seed) for s in disk.signatures)
    if disk.leg_record is not None or not ours:
        held = "a leg record" if disk.leg_record else ", ".join(s.describe() for s in disk.signatures)
        raise PlanError(
            f"{where}: site {site.name}'s {disk.path} has been written since it took seed"
            f" {_named(seed)} (it holds {held}): import it again"
        )


def _contents(site: SiteFacts, mirror: Mirror, name: str, disk: str) -> DiskFacts:
    """What holds a leg's data now: its cache device if there is one, else its disk."""
    cached = site.disks.get(f"/dev/mapper/{cache_name(mirror, name)}")
    return cached if cached is not None and cached.exists else site.disks[disk]


def _named(seed: SeedHeader) -> str:
    """How a message names a seed: its id's start and when it was made (UTC)."""
    return f"{seed.seed[:8]} of {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(seed.created))}"
