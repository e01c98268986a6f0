"""Diff a profile against the sites' facts into an ordered plan. Pure: no I/O.

This module only orders: the WireGuard tunnel (`transport: wireguard`) first;
then for each mirror, each replica site's cache or own points and export, the primary's
initiator toward it, then the primary's cache, array
and what it serves (CDP, export); each site's mdadm.conf around them. What
each subsystem needs is planned in its own module: `cache`, `lio`,
`initiator`, `md`, `cdp`, `points`, `mdadm_conf`. The names of what it makes come from
`remirror.profile.names`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import Action, MissingDisks, Plan, PlanError, SplitBrain, Verb
from remirror.plan.boot_arrays import release_misnamed_array, release_partial_assembly
from remirror.plan.cache import CacheError, cache_actions
from remirror.plan.cdp import CdpPlanError, cdp_actions, volume_path
from remirror.plan.initiator import initiator_actions, logout_actions
from remirror.plan.lio import export_actions, replica_export_actions
from remirror.plan.md import array_actions, destroys, stand_down_former_primary
from remirror.plan.md_create import prove_blank_actions
from remirror.plan.mdadm_conf import mdadm_conf_actions, with_mdadm_conf
from remirror.plan.points import points_actions
from remirror.plan.seed import seeding, without_seed
from remirror.plan.tunnel import tunnel_actions
from remirror.profile.model import Mirror, PrimaryLeg, Profile, ReplicaLeg
from remirror.profile.names import array_uuid, backstore_name, cache_name, leg_device, replica_path
from remirror.profile.wireguard import replica_portal
from remirror.roles import as_run, ran_without_primary
from remirror.units import format_size


def make_plan(profile: Profile, facts: Mapping[str, SiteFacts], secrets: Mapping[str, str]) -> Plan:
    """The actions that make the sites match the profile, replica sides first for each mirror."""
    _require_disks(profile, facts)
    actions, pending = tunnel_actions(profile, facts)  # before all that goes through the tunnel
    waiting: list[str] = []  # mirrors planned once their legs' points stacks are active
    recaching: list[str] = []  # mirrors planned once their legs' caches are made again
    for index, mirror in enumerate(profile.mirrors):
        if pending and mirror.transport == "wireguard":
            continue
        uuid_ = array_uuid(profile, mirror)
        renamed, primary = release_misnamed_array(mirror, facts[mirror.primary.site], uuid_)
        if renamed:
            facts = {**facts, primary.name: primary}  # the site as once that array is stopped
        again = caches_to_make_again(profile, index, mirror, facts, uuid_)
        if again:
            # Before any judgement of the legs: what a disk under a cache shows is not the leg.
            # (An array boot started under another name goes in the pass that assembles, unless
            # this one makes the primary's cache: then it holds the disk under it.)
            actions += (renamed if any(a.site == primary.name for a in again) else []) + again
            recaching.append(mirror.name)
            continue
        if primary.initiator is None:
            raise PlanError(
                f"site {primary.name}: no initiator name in /etc/iscsi/initiatorname.iscsi"
                " (is open-iscsi installed?)"
            )
        named = profile.sites[primary.name].initiator
        if named is not None and primary.initiator != named:
            # The DR sites' targets take an ACL for the named one only (docs/security.md).
            raise PlanError(
                f"{profile.where('sites', primary.name, 'initiator')}: site {primary.name}'s initiator"
                f" name is {primary.initiator} (/etc/iscsi/initiatorname.iscsi), not {named}"
            )
        if primary.array_named(mirror.name, uuid_) is None:
            # Decided before anything would assemble the legs: `mdadm --assemble` of legs that
            # each ran alone keeps the one with more events and drops the other's writes.
            split = ran_without_primary(profile, mirror, facts)
            if split:
                raise SplitBrain(mirror.name, split)
        # Legs with their own points: md's and LIO's leg is the stack's volume, which shows what
        # it holds only once active: a stack to activate first leaves the mirror for the next plan.
        leg_points = {
            leg.site: points_actions(profile, leg_where(index, mirror, leg), mirror, leg, facts[leg.site])
            for leg in mirror.legs
            if leg.points is not None
        }
        if any(p.device is None for p in leg_points.values()):
            actions += [a for p in leg_points.values() for a in p.actions]
            waiting.append(mirror.name)
            continue
        actions += renamed  # before the logins: nothing of the replicas near what boot started
        first = len(actions)  # where this mirror's actions begin
        seed = seeding(profile, index, mirror, facts, uuid_)  # checked before anything is done
        remote_paths = []
        replica_disks: list[DiskFacts] = []
        blank_proofs: list[tuple[str, DiskFacts]] = []
        for r, replica in enumerate(mirror.replicas):
            site = facts[replica.site]
            where = ("mirrors", index, "replicas", r)
            disk = site.disks[replica.disk]  # there: _require_disks checked every leg
            # LIO holds a disk it exports without showing in holders or /proc: ask it.
            if (
                replica.cache is not None
                and site.backstores.get(backstore_name(mirror, replica)) == disk.path
            ):
                raise PlanError(
                    f"{profile.where(*where, 'cache')}: site {site.name}: {replica.disk} is exported"
                    " without a cache: a cache can only be put in front of a disk nothing uses yet"
                    " (destroy the mirror, then apply)"
                )
            if replica.site in leg_points:
                actions += leg_points[replica.site].actions
                found = leg_points[replica.site].device
            else:
                actions += _cache_actions(profile, mirror, replica, site, disk, where)
                found = _leg_device(mirror, replica, site, disk)
            released, device = release_partial_assembly(site, found or disk, uuid_)
            actions += released
            actions += stand_down_former_primary(mirror, site, device, uuid_)
            # Sessions it kept from when it ran the mirror (a former primary's, toward the
            # other legs' old targets): they would retry forever.
            actions += logout_actions(profile, as_run(mirror, replica.site), site)
            replica_disks.append(device)
            blank_proofs.append((site.name, _as_it_is(site, disk, device)))
            iqn = profile.replica_iqn(mirror, replica)
            portal, chap = replica_portal(profile, mirror, replica), profile.replica_chap(mirror)
            actions += replica_export_actions(
                mirror,
                replica,
                site,
                device,
                iqn,
                portal,
                chap,
                primary.initiator,
                secrets,
                destroys(site.name, without_seed(device, seed), uuid_),
            )
            actions += initiator_actions(mirror, primary, iqn, portal, chap, secrets)
            remote_paths.append(replica_path(profile, mirror, replica))
        disk = primary.disks[mirror.primary.disk]
        if primary.name in leg_points:  # a promoted replica's: its data is in its points' volume
            actions += leg_points[primary.name].actions
            found = leg_points[primary.name].device
        else:
            actions += _cache_actions(
                profile, mirror, mirror.primary, primary, disk, ("mirrors", index, "primary")
            )
            found = _leg_device(mirror, mirror.primary, primary, disk)
        released, local = release_partial_assembly(primary, found or disk, uuid_)
        actions += released
        array = array_actions(
            profile, index, mirror, primary, local, replica_disks, remote_paths, uuid_, seed
        )
        actions += array
        new_array = any(a.verb == Verb.CREATE_ARRAY for a in array)
        if new_array and mirror.replication.initial_sync == "skip":
            # Before anything of the mirror (a cache, an export, a login): a leg that is not
            # blank stops the plan with every site as it was.
            blank_proofs.append((primary.name, _as_it_is(primary, disk, local)))
            actions[first:first] = prove_blank_actions(blank_proofs)
        actions += serving_actions(profile, index, mirror, primary, secrets, new_array)
    for names, once in (
        (waiting, "its sites' points volumes are active"),
        (recaching, "its legs' caches are back"),
    ):
        if names:
            later = f"the rest of {', '.join(names)} once {once}"
            pending = f"{pending}; {later}" if pending else later
    return Plan(tuple(with_mdadm_conf(actions, mdadm_conf_actions(profile, facts))), pending)


def leg_where(index: int, mirror: Mirror, leg: PrimaryLeg | ReplicaLeg) -> tuple[str | int, ...]:
    """The leg's place in the profile, for messages."""
    if isinstance(leg, ReplicaLeg):
        return ("mirrors", index, "replicas", mirror.replicas.index(leg))
    return ("mirrors", index, "primary")


def serving_actions(
    profile: Profile,
    index: int,
    mirror: Mirror,
    primary: SiteFacts,
    secrets: Mapping[str, str],
    new_array: bool = False,
) -> list[Action]:
    """What the primary serves on top of the array: the CDP stack, then the export."""
    try:
        actions = cdp_actions(profile, index, mirror, primary, new_array)
    except CdpPlanError as error:
        raise PlanError(str(error)) from None
    # With CDP, applications (and the export) use the volume on top of the mirror.
    exported = volume_path(mirror) if mirror.cdp is not None else mirror.md_device
    device = primary.disks.get(exported, DiskFacts(exported, exists=False))
    return actions + export_actions(mirror, primary, device, secrets)


def caches_to_make_again(
    profile: Profile, index: int, mirror: Mirror, facts: Mapping[str, SiteFacts], uuid_: str
) -> list[Action]:
    """The caches of the mirror's legs to make again, alone, before anything else of the mirror.

    A boot loses a cache's dm table; its disks keep both halves, and the disk under a writecache
    lacks what the cache holds, md's superblock included (md's flushes commit to the cache, not
    to the disk). So a leg whose disk carries the mirror's superblock and whose cache device is
    gone has its cache made again first (adopting the superblock on its fast disk), after the
    inactive array that boot may have made of the bare disk is stopped, and the mirror is
    planned once the cache is back (Plan.pending): its legs are judged, and assembled or
    exported, through their caches, never from the disks under them."""
    actions: list[Action] = []
    for leg in mirror.legs:
        site = facts[leg.site]
        if leg.cache is None or leg.points is not None or cache_name(mirror, leg.site) in site.dm:
            continue
        disk = site.disks[leg.disk]
        fast = site.disks.get(leg.cache.disk)
        ours = disk.superblock is not None and disk.superblock.array_uuid == uuid_
        # Its superblock may never have left the cache (writecache writes back only above its
        # watermark): a blank disk behind a fast disk holding a writecache is such a leg. A
        # disk holding anything else is left to the whole plan, which judges what it writes.
        kept = fast is not None and fast.first_sector == "writecache" and not disk.signatures
        if not (ours or kept):
            continue  # a leg not yet the mirror's: its cache is made with the rest of the plan
        if disk.path in site.backstores.values():
            continue  # exported without a cache: the rest of the plan refuses to slide one under
        released, bare = release_partial_assembly(site, disk, uuid_)
        actions += released + _cache_actions(profile, mirror, leg, site, bare, leg_where(index, mirror, leg))
    return actions


def _cache_actions(
    profile: Profile,
    mirror: Mirror,
    leg: PrimaryLeg | ReplicaLeg,
    site: SiteFacts,
    disk: DiskFacts,
    where: tuple[str | int, ...],
) -> list[Action]:
    try:
        return cache_actions(mirror, leg, site, disk, profile.where(*where, "cache"))
    except CacheError as error:
        raise PlanError(str(error)) from None


def _leg_device(mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, site: SiteFacts, disk: DiskFacts) -> DiskFacts:
    """What md or LIO opens for the leg: its cache device, or its disk.

    A cache the same plan creates is not there yet: it shows the disk's
    contents (a cache is transparent), so the disk's signatures and md
    superblock stand in for it.
    """
    path = leg_device(mirror, leg, site.dm)
    if path == disk.path:
        return disk
    device = site.disks.get(path)
    if device is not None and device.exists:
        return device
    return dataclasses.replace(disk, path=path, kernel_name="", holders=(), mounts=(), openers=())


# Room for md's superblock and bitmap, the leg records' last MiB and some data; for a cache,
# its own metadata and some blocks. A disk smaller than this is a mistake (a loop device on an
# empty file, a partition of zero length), not a mirror to build.
SMALLEST = {"disk": 16 * 1024 * 1024, "cache disk": 4 * 1024 * 1024}


def _as_it_is(site: SiteFacts, disk: DiskFacts, device: DiskFacts) -> DiskFacts:
    """What holds a leg's contents now: its cache device if it exists, else its disk (a cache
    this plan creates shows the disk's contents)."""
    existing = site.disks.get(device.path)
    return device if existing is not None and existing.exists else disk


def _require_disks(profile: Profile, facts: Mapping[str, SiteFacts]) -> None:
    """Every disk and cache disk the profile names, on its site: the missing ones all in one
    error, a line each (two missing disks are fixed in one go, not found one run at a time)."""
    problems = []
    for index, mirror in enumerate(profile.mirrors):
        legs: list[tuple[tuple[str | int, ...], PrimaryLeg | ReplicaLeg]] = [
            (("mirrors", index, "replicas", r), replica) for r, replica in enumerate(mirror.replicas)
        ]
        legs.append((("mirrors", index, "primary"), mirror.primary))
        for where, leg in legs:
            site = facts[leg.site]
            wanted = [((*where, "disk"), "disk", leg.disk)]
            if leg.cache is not None:
                wanted.append(((*where, "cache"), "cache disk", leg.cache.disk))
            for at, what, path in wanted:
                disk = site.disks.get(path)
                if disk is None or not disk.exists:
                    problems.append(f"{profile.where(*at)}: site {site.name}: {what} {path} does not exist")
                elif not disk.offline and disk.size < SMALLEST[what]:  # offline: its size unread
                    problems.append(
                        f"{profile.where(*at)}: site {site.name}: {what} {path} holds {disk.size} bytes:"
                        f" too small for a {what} (at least {format_size(SMALLEST[what])})"
                    )
    if problems:
        raise MissingDisks(problems)
