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

from remirror.facts.generations import Generation, LegRecord, MiB
from remirror.facts.site import SiteFacts
from remirror.profile.model import Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.names import leg_device


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
    legs: list[PrimaryLeg | ReplicaLeg] = [mirror.primary, *mirror.replicas]
    for leg in legs:
        site = facts.get(leg.site)
        record = None
        if site is not None:
            used = site.disks.get(leg_device(mirror, leg, site.dm))
            seen = used if used is not None and used.exists else site.disks.get(leg.disk)
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
            0, ReplicaLeg(site=home.site, disk=home.disk, portal=home.portal, iqn=home.iqn, cache=home.cache)
        )
    leg = PrimaryLeg(
        site=promoted.site, disk=promoted.disk, cache=promoted.cache, portal=promoted.portal, iqn=promoted.iqn
    )
    return mirror.model_copy(update={"primary": leg, "replicas": replicas})


def profile_as_run(profile: Profile, primaries: Mapping[str, str]) -> Profile:
    """The profile with each mirror named in `primaries` (mirror -> site) run by that site."""
    mirrors = [as_run(m, primaries.get(m.name, m.primary.site)) for m in profile.mirrors]
    return profile.model_copy(update={"mirrors": mirrors})


# md stops this short of a leg's end: the leg record's MiB, plus a bound on
# the data offset mdadm picks (1-2 MiB, growing to 128 MiB on large disks:
# about a thousandth of the device, super1.c's headroom).
def md_size(leg_bytes: list[int]) -> int:
    """The `--size` (bytes, whole MiB) for a new array whose legs have these sizes."""
    smallest = min(leg_bytes)
    data_offset_bound = 2 * MiB + min(128 * MiB, -(-smallest // 1024 // MiB) * MiB)
    return (smallest - data_offset_bound - MiB) // MiB * MiB
