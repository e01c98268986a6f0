"""What `status`, `check` and `metrics` show: each mirror's state and, per leg, the numbers behind it.

Pure: built from the sites' facts, the profile, and when each replica was
last seen complete (`Seen`, kept in a small state file by the caller).

Where the numbers come from:

* out-of-sync bytes: the primary leg's write-intent bitmap as `mdadm -X`
  reads it from the disk, dirty chunks x chunk size. It bounds what a replica
  that is not in sync misses (whole chunks: a 4 KiB write dirties a chunk).
  A leg in sync misses nothing but, in async mode, the writes md still holds
  behind (at most `write_behind` of them).
* writes in flight: what md sent a replica leg and the leg has not yet
  completed (the block layer's `inflight` of its iSCSI disk). In async mode
  these are acknowledged writes site B may still lack: how far the replica
  trails, in writes (md does not count their bytes).
* RPO: how old the replica's copy is. 0 while the leg is in sync; otherwise
  the time since a remirror command last saw it in sync. Observations are
  what dates it, so its resolution is how often `reconcile`, `watch`,
  `status`, `check` or `metrics` run. A leg md counts in sync whose bad
  block log lists writes it failed is not in sync here (INCOMPLETE): what
  it lacks is out of sync, and its RPO runs.
* re-adds that failed: how many times the reconciler put a replica leg back
  since it was last in sync (health/seen.py), and until when it leaves the
  leg out after too many.
* link round trip: a TCP handshake with the replica's portal, timed by the
  primary site's agent.
* CDP (mirrors with `cdp`): the points the index on the mirror lists, the
  newest's age (overdue past twice `every`: a missed interval), the window
  actually kept, and the thin pool's use; for a replica's own points, the
  share of the pool at which `check` calls it CRITICAL (`pool_critical`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from remirror.facts.cdp import stack_names
from remirror.facts.mdadm_conf import managed_lines
from remirror.facts.model import CacheStatus, MdArray
from remirror.facts.site import SiteFacts
from remirror.health.drill import DrillReport, leg_drills
from remirror.health.seen import Seen
from remirror.health.state import IN_SYNC, INCOMPLETE, LegHealth, State, assess
from remirror.health.verify import VerifyRecord
from remirror.profile.layers import Cdp, Points
from remirror.profile.model import DERIVED_IQN_PREFIX, Mirror, Profile, scheduled_limit
from remirror.profile.names import array_uuid, cache_name, leg_device, points_key
from remirror.profile.schedule import ResyncLimit
from remirror.profile.wireguard import replica_portal
from remirror.retention import tier_counts
from remirror.roles import has_room_for_record, leg_records, own_leg, replica_session, roles

SECTOR = 512


@dataclass(frozen=True)
class Resync:
    """A resync or recovery md is running."""

    action: str  # md's sync_action: resync, recover, check, repair
    done_bytes: int
    total_bytes: int
    speed: int | None  # bytes/s
    eta_seconds: float | None

    @property
    def percent(self) -> float:
        """How far along, 0-100."""
        return 100.0 * self.done_bytes / self.total_bytes if self.total_bytes else 0.0


@dataclass(frozen=True)
class LegReport:
    """One leg and its numbers; None where a number cannot be known now."""

    site: str
    disk: str
    role: str  # primary or replica
    status: str  # in_sync, syncing, faulty, missing
    member: str = ""
    session: str = ""
    write_mostly: bool = False
    site_reachable: bool = True
    out_of_sync_bytes: int | None = None
    rpo_seconds: float | None = None
    rtt_seconds: float | None = None
    cache_dirty_blocks: int | None = None  # None: the leg has no cache
    cache_writeback_blocks: int | None = None  # being written back right now
    cache_block_bytes: int | None = None  # the cache's block size, when its table says it
    cache_error: int = 0  # the cache's error indicator (an errno): its writes may be lost
    writes_in_flight: int | None = None  # replica legs: writes sent and not completed
    points: CdpReport | None = None  # the points its site keeps of it (`replicas[].points`)
    drills: DrillReport | None = None  # its DR drills at its site (`replicas[].drill`)
    # What it lacks though md counts it in sync: the array's byte ranges its bad block log lists.
    missed: tuple[tuple[int, int], ...] = ()
    failed_readds: int = 0  # re-adds since it was last in sync (replica legs)
    held_until: float | None = None  # the reconciler leaves it out until then (READD_TRIES)


@dataclass(frozen=True)
class CdpReport:
    """A mirror's recovery points and the space they take."""

    points: int
    newest_age_seconds: float | None  # None: no point yet
    window_seconds: float  # age of the oldest point
    every_seconds: float
    keep_seconds: float  # the longest the retention keeps a point
    pool_used_bytes: int | None = None  # None: the pool is not active
    pool_total_bytes: int | None = None
    pool_mode: str = ""  # rw; ro, out_of_data_space, Fail: writes are at risk
    pool_critical: float | None = None  # a replica's own points: the share of the pool that is CRITICAL
    tiers: dict[str, int] | None = None  # a grid's points by the tier that keeps them (retention.tier_counts)

    @property
    def pool_filling(self) -> bool:
        """A replica's own points take `pool_critical` of their pool or more: its writes fail
        when it is full, so an operator must act before."""
        if self.pool_critical is None or not self.pool_total_bytes or self.pool_used_bytes is None:
            return False
        return self.pool_used_bytes >= self.pool_critical * self.pool_total_bytes

    @property
    def overdue(self) -> bool:
        """A point was missed: none yet, or the newest is more than two intervals old."""
        return self.newest_age_seconds is None or self.newest_age_seconds > 2 * self.every_seconds


@dataclass(frozen=True)
class MirrorReport:
    """One mirror: its state, why, its legs and what md is doing."""

    mirror: str
    device: str
    mode: str  # sync or async
    state: State
    reason: str
    legs: tuple[LegReport, ...]
    resync: Resync | None = None
    write_behind: int | None = None  # md's backlog limit (async mode)
    write_behind_high_water: int | None = None  # the most writes md held behind at once
    resync_max: int | None = None  # bytes/s the array's resyncs are held to; None: the system's
    schedule: ResyncLimit | None = None  # with `replication.schedule`: its limit now, and until when
    verify: VerifyRecord | None = None  # the last `remirror verify` from this host (monitor.py)
    cdp: CdpReport | None = None  # mirrors with `cdp`
    primary: str = ""  # the site running it now (a promotion moves it: docs/failover.md)
    notes: tuple[str, ...] = ()  # what an operator should know though the mirror works (a WARNING)
    writes_held: bool = False  # md holds every write (a leg move that never finished): CRITICAL
    syncs_held: bool = False  # md holds every resync at a sector (an add that never finished): CRITICAL

    @property
    def out_of_sync_bytes(self) -> int | None:
        """The most any leg misses."""
        known = [leg.out_of_sync_bytes for leg in self.legs if leg.out_of_sync_bytes is not None]
        return max(known) if known else None

    @property
    def rpo_seconds(self) -> float | None:
        """The oldest replica copy's age."""
        known = [leg.rpo_seconds for leg in self.legs if leg.rpo_seconds is not None]
        return max(known) if known else None


def report(
    profile: Profile, facts: Mapping[str, SiteFacts | None], seen: Seen, now: float
) -> list[MirrorReport]:
    """Every mirror of the profile, as the sites show it now."""
    strays = unmanaged(profile, facts)
    reports = []
    for mirror in profile.mirrors:
        found = _mirror(profile, mirror, facts, seen, now)
        nearby = tuple(note for site in mirror.sites for note in strays.get(site, []))
        reports.append(dataclasses.replace(found, notes=found.notes + nearby))
    return reports


def unmanaged(profile: Profile, facts: Mapping[str, SiteFacts | None]) -> dict[str, list[str]]:
    """Per site, what remirror built for this profile that the profile no longer names, still
    running: arrays its mdadm.conf block names, and targets with the names it derives for this
    profile (a mirror dropped from the profile, never taken apart: docs/safety.md, flow 9)."""
    ours = {array_uuid(profile, m) for m in profile.mirrors}
    derived = f"{DERIVED_IQN_PREFIX}:{profile.name}."
    targets = {f"{derived}{m.name}.{site}" for m in profile.mirrors for site in m.sites}
    found: dict[str, list[str]] = {}
    for name, site in facts.items():
        if site is None:
            continue
        for iqn in sorted(site.targets):
            if iqn.startswith(derived) and iqn not in targets:
                found.setdefault(name, []).append(
                    f"site {name} exports {iqn}, which remirror built for this profile but the profile"
                    " no longer names: remirror leaves it alone (`remirror destroy` it with the profile"
                    " that had it)"
                )
        for uuid_ in managed_lines(site.mdadm_conf):
            running = next((a for a in site.arrays if a.uuid == uuid_), None)
            if uuid_ in ours or running is None:
                continue
            found.setdefault(name, []).append(
                f"site {name} runs {running.kernel_name} ({running.name}, UUID {uuid_}), which remirror"
                " built but the profile no longer names: remirror leaves it, and its mdadm.conf line,"
                " alone (`remirror destroy` it with the profile that had it, or stop it yourself)"
            )
    return found


def _mirror(
    profile: Profile, mirror: Mirror, facts: Mapping[str, SiteFacts | None], seen: Seen, now: float
) -> MirrorReport:
    health = assess(profile, mirror, facts)
    primary = facts.get(mirror.primary.site)
    array = primary.array_named(mirror.name, array_uuid(profile, mirror)) if primary else None
    own = primary.disks.get(leg_device(mirror, mirror.primary, primary.dm)) if primary else None
    dirty = own.bitmap.dirty_bytes if own is not None and own.bitmap is not None else None
    resync = None
    if array is not None and array.sync_completed is not None and array.sync_action not in ("idle", ""):
        done, total = (n * SECTOR for n in array.sync_completed)
        # A bitmap-based recovery skips clean chunks: what is left is what the bitmap marks.
        left = dirty if dirty is not None and array.sync_action == "recover" else total - done
        eta = left / array.sync_speed if array.sync_speed else None
        resync = Resync(array.sync_action, done, total, array.sync_speed, eta)
    legs = health.legs or _unseen_legs(mirror)
    rtts = primary.portal_rtt if primary else {}
    reports = []
    for leg in legs:
        replica = next((r for r in mirror.replicas if r.site == leg.site), None)
        site = facts.get(leg.site)
        reachable = site is not None
        cache = site.dm.get(cache_name(mirror, leg.site)) if site is not None else None
        cache_status = cache.cache if cache is not None else None
        block = cache.table.block_size if cache is not None and cache.table is not None else None
        missed = sum(length for _, length in leg.missed)
        if leg.role == "primary" or replica is None:
            own_out = missed if leg.status in (IN_SYNC, INCOMPLETE) else None
            reports.append(_leg(leg, reachable, own_out, cache=cache_status, block=block))
            continue
        out_of_sync: int | None = 0
        rpo: float | None = 0.0
        if leg.status != IN_SYNC:
            last = seen.last(mirror.name, leg.site)
            out_of_sync, rpo = dirty, (max(0.0, now - last) if last is not None else None)
            if leg.status == INCOMPLETE:  # md cleared the bitmap's chunks of the writes it failed
                out_of_sync = (dirty or 0) + missed
        rtt = rtts.get(str(replica_portal(profile, mirror, replica)))
        member = array.member(leg.member) if array is not None and leg.member else None
        flying = member.writes_in_flight if member is not None else None
        report = _leg(leg, reachable, out_of_sync, rpo, rtt, cache_status, flying, block)
        points, drills = _leg_points(mirror, leg.site, site, now), leg_drills(mirror, replica, site, now)
        held = seen.held_until(mirror.name, leg.site) if leg.status != IN_SYNC else None
        readds = seen.failed_readds(mirror.name, leg.site) if leg.status != IN_SYNC else 0
        reports.append(
            dataclasses.replace(report, points=points, drills=drills, failed_readds=readds, held_until=held)
        )
    notes: tuple[str, ...] = ()
    if array is not None:
        notes = _record_notes(profile, mirror, facts)
        if primary is not None:
            notes += _async_notes(profile, mirror, primary, array, legs[0].member)
    return MirrorReport(
        notes=notes,
        writes_held=array is not None and array.writes_suspended,
        syncs_held=array is not None and array.syncs_held,
        mirror=mirror.name,
        device=mirror.md_device,
        mode=mirror.replication.mode,
        state=health.state,
        reason=health.reason,
        legs=tuple(reports),
        resync=resync,
        write_behind=array.backlog if array is not None else None,
        write_behind_high_water=array.max_backlog_used if array is not None else None,
        resync_max=array.sync_speed_max if array is not None else None,
        schedule=scheduled_limit(mirror.replication, primary.local_time if primary is not None else None),
        cdp=_cdp(mirror, primary, now),
        primary=mirror.primary.site,
    )


def _record_notes(profile: Profile, mirror: Mirror, facts: Mapping[str, SiteFacts | None]) -> tuple[str, ...]:
    """A running mirror none of whose legs holds a leg record cannot be promoted (flow 7)."""
    uuid_ = array_uuid(profile, mirror)
    if roles(mirror, leg_records(mirror, uuid_, facts)).generation is not None:
        return ()
    site = facts.get(mirror.primary.site)
    own = own_leg(mirror, mirror.primary, site) if site is not None else None
    if own is not None and has_room_for_record(own):
        return (
            f"no leg of {mirror.md_device} holds a leg record (its create was cut short): it cannot be"
            " promoted until `remirror apply` writes them",
        )
    return (
        f"no leg of {mirror.md_device} holds a leg record, and md uses the legs' last MiB (an array not"
        " made by remirror's apply): it cannot be promoted",
    )


def _async_notes(
    profile: Profile, mirror: Mirror, primary: SiteFacts, array: MdArray, local: str
) -> tuple[str, ...]:
    """What keeps an async mirror from what async mode promises (docs/failover.md): writes that
    do not go behind (the local leg is not last: plan/md.py), or a session on which they may
    overtake each other (profile/timeouts.py)."""
    if mirror.replication.mode != "async":
        return ()
    notes = []
    own = array.member(local) if local else None
    if own is not None and array.is_ahead(own.device):
        notes.append(
            f"async writes wait for the replica: the local leg is in slot {own.slot} of"
            f" {mirror.md_device}, ahead of a replica leg, and md sends writes behind only from the first"
            " leg (`remirror apply` moves it once every leg is in sync)"
        )
    for replica in mirror.replicas:
        session = replica_session(profile, mirror, replica, primary)
        if session is not None and not session.sends_writes_in_order:
            notes.append(
                f"the session to {replica.site} lets writes overtake each other (InitialR2T"
                f" {'Yes' if session.initial_r2t else 'No'}, first burst {session.first_burst}): after a"
                f" disaster site {replica.site}'s copy may be torn (`remirror apply` logs in again)"
            )
    return tuple(notes)


def _cdp(mirror: Mirror, primary: SiteFacts | None, now: float) -> CdpReport | None:
    if mirror.cdp is None or primary is None:
        return None
    return _kept(mirror.cdp, mirror.name, mirror.md_device, primary, now)


def _leg_points(mirror: Mirror, site_name: str, site: SiteFacts | None, now: float) -> CdpReport | None:
    """The points a leg's site keeps of it (`replicas[].points`), from its disk's index as that
    site read it."""
    leg = next((leg for leg in mirror.legs if leg.site == site_name), None)
    if leg is None or leg.points is None or site is None:
        return None
    return _kept(leg.points, points_key(mirror, leg.site), leg.disk, site, now)


def _kept(settings: Cdp | Points, name: str, device: str, site: SiteFacts, now: float) -> CdpReport:
    """Points kept by a stack (`name`, its index at the start of `device`) on `site`."""
    disk = site.disks.get(device)
    points = disk.cdp_points if disk is not None else None
    pool_device = site.dm.get(stack_names(name)["pool"])
    pool = pool_device.pool if pool_device is not None else None
    newest = points.newest if points is not None else None
    oldest = points.oldest if points is not None else None
    return CdpReport(
        points=points.count if points is not None else 0,
        newest_age_seconds=max(0.0, now - newest) if newest is not None else None,
        window_seconds=max(0.0, now - oldest) if oldest is not None else 0.0,
        every_seconds=settings.every,
        keep_seconds=settings.retention.longest,
        pool_used_bytes=pool.data_used * settings.chunk if pool is not None else None,
        pool_total_bytes=pool.data_total * settings.chunk if pool is not None else None,
        pool_mode=pool.mode if pool is not None else "",
        pool_critical=settings.pool_critical / 100 if isinstance(settings, Points) else None,
        tiers=tier_counts(points.points, now, settings.retention) if points is not None else None,
    )


def _leg(
    leg: LegHealth,
    reachable: bool,
    out_of_sync: int | None,
    rpo: float | None = None,
    rtt: float | None = None,
    cache: CacheStatus | None = None,
    writes_in_flight: int | None = None,
    block: int | None = None,
) -> LegReport:
    return LegReport(
        site=leg.site,
        disk=leg.disk,
        role=leg.role,
        status=leg.status,
        member=leg.member,
        session=leg.session,
        write_mostly=leg.write_mostly,
        site_reachable=reachable,
        out_of_sync_bytes=out_of_sync,
        rpo_seconds=rpo,
        rtt_seconds=rtt,
        cache_dirty_blocks=cache.dirty if cache is not None else None,
        cache_writeback_blocks=cache.writeback if cache is not None else None,
        cache_block_bytes=block if cache is not None else None,
        cache_error=cache.error if cache is not None else 0,
        writes_in_flight=writes_in_flight,
        missed=leg.missed,
    )


def _unseen_legs(mirror: Mirror) -> tuple[LegHealth, ...]:
    """The profile's legs when no array could be looked at (absent, not running, primary unreachable)."""
    legs = [LegHealth(mirror.primary.site, mirror.primary.disk, "primary", "missing")]
    legs += [LegHealth(r.site, r.disk, "replica", "missing") for r in mirror.replicas]
    return tuple(legs)
