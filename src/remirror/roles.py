"""Which site runs a mirror now, from the generations on its legs (docs/failover.md). Pure.

The profile names a mirror's home roles. After a promotion the disks say
otherwise: the newest generation found on any leg names the primary, and
every planner works on the mirror as it runs (`as_run`), so that `apply`
and the reconciler on the new primary build the same things the home
roles would, the other way round.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from remirror.facts.cdp import ThinPoolStatus, stack_names
from remirror.facts.generations import Generation, LegRecord, MiB, record_offset
from remirror.facts.model import IscsiSession, MdSuperblock
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.profile.model import Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.names import array_uuid, leg_device, points_key, replica_path
from remirror.profile.wireguard import replica_portal


@dataclass(frozen=True)
class Roles:
    """A mirror's primary now, the generation that made it so, and each leg's record."""

    primary: str
    generation: Generation | None  # None: no leg holds a record (never built, or built before records)
    records: Mapping[str, LegRecord | None]
    conflict: str = ""  # two legs claim the same generation for different sites: nobody may act

    def behind(self) -> list[str]:
        """Sites whose leg record is older than the newest generation (former primaries, legs cut off)."""
        if self.generation is None:
            return []
        return [site for site, r in self.records.items() if r is not None and r.current.n < self.generation.n]


def leg_records(
    mirror: Mirror, uuid_: str, facts: Mapping[str, SiteFacts | None]
) -> dict[str, LegRecord | None]:
    """Each leg's record as its own site read it, through the leg's cache device when there is
    one (the disk under a writecache may be stale), else from the disk.

    A record counts only on a leg that carries the array's md superblock too:
    a disk wiped and reused keeps its last MiB, and an old record there must
    not move a new mirror's primary. None: not read, none there, or stale.
    """
    records: dict[str, LegRecord | None] = {}
    legs = mirror.legs
    for leg in legs:
        site = facts.get(leg.site)
        record = None
        if site is not None:
            seen = own_leg(mirror, leg, site)
            if (
                seen is not None
                and seen.leg_record is not None
                and seen.leg_record.array_uuid == uuid_
                and seen.superblock is not None
                and seen.superblock.array_uuid == uuid_
            ):
                record = seen.leg_record
        records[leg.site] = record
    return records


def replica_session(
    profile: Profile, mirror: Mirror, replica: ReplicaLeg, primary: SiteFacts
) -> IscsiSession | None:
    """The primary's session to the replica's target, where iSCSI reaches it (`replica_portal`)."""
    portal = replica_portal(profile, mirror, replica)
    return primary.session_for(profile.replica_iqn(mirror, replica), portal.address, portal.port)


def own_leg(mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, site: SiteFacts) -> DiskFacts | None:
    """A leg as its own site sees it: through its cache device when there is one, else the disk
    (after a restart the cache device may not exist yet; the disk carries the superblock)."""
    used = site.disks.get(leg_device(mirror, leg, site.dm))
    if used is not None and used.exists:
        return used
    return site.disks.get(leg.disk)


def has_room_for_record(disk: DiskFacts) -> bool:
    """Whether md's data on this leg ends before the leg record's MiB (apply's `--size`): an
    array made otherwise (by hand, or before remirror kept records) may use it."""
    end = disk.superblock.data_end if disk.superblock is not None else None
    return end is not None and end <= record_offset(disk.size)


def superblock_of(
    mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, site: SiteFacts | None, uuid_: str
) -> MdSuperblock | None:
    """This mirror's md superblock on a leg, read on the leg's own site; None without one."""
    disk = own_leg(mirror, leg, site) if site is not None else None
    if disk is None or disk.superblock is None or disk.superblock.array_uuid != uuid_:
        return None
    return disk.superblock


def ran_without_primary(
    profile: Profile,
    mirror: Mirror,
    facts: Mapping[str, SiteFacts | None],
    members: frozenset[str] = frozenset(),
) -> str:
    """Why a replica leg of `mirror` (as it runs) must not be put together with the primary's, or "".

    Two signs, read from the replica leg's own superblock, that it was
    assembled and written without the primary leg (a DR site ran on it, or
    the old primary did after a forced promotion):

    * its Array State records the primary's slot as missing. A leg that was
      only cut off keeps the state it last shared with the array (`AA`); the
      primary's own superblock says where the primary sits.
    * it counts more events than the primary's leg.

    And one that it may hold writes the primary's leg lacks without having
    run alone: a promotion by force left it behind (its record does not know
    that generation: the old primary's leg, or another replica's that was
    away), and its superblock is not `clean`. Writes were pending then: write-behind's tail, or writes in
    flight on its leg and not the other's. The bits that marked them in the
    promoted leg's bitmap may be gone (md loads them as not needed when that
    leg is assembled alone with its bitmap's events up to date, and clears
    them), so a re-add would copy only what was written since and leave
    those blocks differing, unseen. `clean` is proof there were none: md
    marks the array clean only when no write is pending on any leg, a
    write-behind copy included.

    md itself checks neither: recorded in the lab (fixtures/lab-6.1), a leg
    that ran on its own counted *fewer* events than the array, and md took
    it back with `--re-add` at once, leaving its writes on one leg only; and
    `mdadm --assemble` of two such legs keeps the one with more events.

    The same judgement whether the array runs or not: before a re-add, and
    before any assemble (after both sites restarted). `members`: sites whose
    leg is a member of the running array; they are the array's again and
    md writes their superblocks with the primary's (read a moment after it,
    one can count an event more: not a sign of anything).
    """
    uuid_ = array_uuid(profile, mirror)
    primary = facts.get(mirror.primary.site)
    own = superblock_of(mirror, mirror.primary, primary, uuid_)
    if primary is None or own is None:
        return ""
    records = leg_records(mirror, uuid_, facts)
    for replica in mirror.replicas:
        if replica.site in members:
            continue
        # The primary's view through iSCSI when it has one (what md would take), else the site's own.
        seen = primary.disks.get(replica_path(profile, mirror, replica))
        theirs = seen.superblock if seen is not None else None
        if theirs is None or theirs.array_uuid != uuid_:
            theirs = superblock_of(mirror, replica, facts.get(replica.site), uuid_)
        if theirs is None:
            continue
        why = ""
        if own.slot is not None and theirs.recorded_missing(own.slot):
            why = (
                f"its superblock records an array without the primary leg (Array State {theirs.array_state})"
            )
        elif theirs.events > own.events:
            why = f"it counts {theirs.events} events, the array {own.events}"
        elif theirs.clean is not True and _forced_over(records[mirror.primary.site], records[replica.site]):
            why = (
                f"it did not stop cleanly (its superblock's State is not clean) before"
                f" {mirror.primary.site} was promoted by force without it: it may hold writes"
                f" {mirror.primary.site} never got (write-behind's tail, writes in flight), which a"
                " re-add by the bitmap would leave on it unseen"
            )
        if why:
            return (
                f"the replica leg on {replica.site} ran without the primary: {why};"
                " both sides took writes the other lacks: nothing is put together until someone decides"
                f" which side wins (remirror resolve PROFILE {mirror.name} --keep SITE)"
            )
    return ""


def _forced_over(newest: LegRecord | None, theirs: LegRecord | None) -> bool:
    """Whether a promotion by force (in the running leg's record) left this leg behind: it
    does not know that generation (not reached by it, not re-added since), or it has no
    record to say. The old primary's leg, or another replica's that was away."""
    forced = [g for g in newest.generations if g.how == "forced"] if newest is not None else []
    if not forced:
        return False
    return theirs is None or not theirs.knows(forced[-1])


def roles(mirror: Mirror, records: Mapping[str, LegRecord | None]) -> Roles:
    """The primary by the newest generation on any leg; the profile's when no leg has a record."""
    known = {site: r for site, r in records.items() if r is not None}
    if not known:
        return Roles(mirror.primary.site, None, records)
    newest = max(r.current.n for r in known.values())
    claims = {r.current.site for r in known.values() if r.current.n == newest}
    current = next(r.current for r in known.values() if r.current.n == newest)
    conflict = ""
    if len(claims) > 1:
        conflict = (
            f"the legs disagree on generation {newest}: {', '.join(sorted(claims))} each claim it"
            " (two promotions that did not see each other): resolve with remirror resolve"
        )
    return Roles(current.site, current, records, conflict)


def as_run(mirror: Mirror, primary: str) -> Mirror:
    """The mirror with `primary` running it: its leg becomes the primary leg, the home primary a
    replica (only if the profile gives it a portal: otherwise it cannot serve as one)."""
    promoted = next((r for r in mirror.replicas if r.site == primary), None)
    if promoted is None:  # the home primary, or a site the profile no longer has a leg on
        return mirror
    home = mirror.primary
    replicas = [r for r in mirror.replicas if r.site != primary]
    if home.portal is not None:
        replicas.insert(
            0,
            ReplicaLeg(
                site=home.site,
                disk=home.disk,
                portal=home.portal,
                iqn=home.iqn,
                cache=home.cache,
                points=home.points,
            ),
        )
    leg = PrimaryLeg(
        site=promoted.site,
        disk=promoted.disk,
        cache=promoted.cache,
        portal=promoted.portal,
        iqn=promoted.iqn,
        points=promoted.points,  # the leg's data lives in its points' volume, wherever it runs
    )
    return mirror.model_copy(update={"primary": leg, "replicas": replicas})


def running_primaries(profile: Profile, facts: Mapping[str, SiteFacts | None]) -> dict[str, str]:
    """Which site runs each mirror now, as its legs' generations say (docs/failover.md)."""
    return {m.name: roles(m, leg_records(m, array_uuid(profile, m), facts)).primary for m in profile.mirrors}


def profile_as_run(profile: Profile, primaries: Mapping[str, str]) -> Profile:
    """The profile with each mirror named in `primaries` (mirror -> site) run by that site."""
    mirrors = [as_run(m, primaries.get(m.name, m.primary.site)) for m in profile.mirrors]
    return profile.model_copy(update={"mirrors": mirrors})


# md stops this short of a leg's end: the leg record's MiB, plus, with metadata 1.2, a bound
# on the data offset mdadm picks (1-2 MiB, growing to 128 MiB on large disks: about a
# thousandth of the device, super1.c's headroom). With 1.0 (keep_data) the data starts at
# byte 0 and md's own metadata lies after the record (plan/keep_data.py).
def md_size(leg_bytes: list[int], metadata: str = "1.2") -> int:
    """The `--size` (bytes, whole MiB) for a new array whose legs have these sizes."""
    smallest = min(leg_bytes)
    data_offset_bound = (
        0 if metadata == "1.0" else 2 * MiB + min(128 * MiB, -(-smallest // 1024 // MiB) * MiB)
    )
    return (smallest - data_offset_bound - MiB) // MiB * MiB


def points_pool(mirror: Mirror, site_name: str, site: SiteFacts | None) -> ThinPoolStatus | None:
    """The thin pool under the points `site_name` keeps of its leg of `mirror` (`replicas[].points`),
    as that site shows it; None when the leg keeps none or its stack is not active."""
    leg = next((leg for leg in mirror.legs if leg.site == site_name), None)
    if leg is None or leg.points is None or site is None:
        return None
    device = site.dm.get(stack_names(points_key(mirror, site_name))["pool"])
    return device.pool if device is not None else None
