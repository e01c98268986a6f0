"""A mirror's state, after the TH-MSNS paper's table, from the sites' facts.

| state | meaning |
|---|---|
| MIRRORED | every leg in sync |
| SYNCING | a leg is being brought up to date (progress known) |
| MIRROR_DEFUNCT | a replica leg is down or lacks writes it failed; the replica falls behind |
| LOCAL_DEFUNCT | the primary leg is down; a replica serves reads and writes |
| DEGRADED_WAITING | the link is down under `on_link_loss: wait`: I/O queues until it returns |
| SPLIT_BRAIN | a replica took writes the array does not know: a person must decide |
| DEFUNCT | no leg can serve: the array is not running |
| ABSENT | never built here: `remirror apply` builds it |
| UNKNOWN | the primary site could not be observed |

Worst first: a mirror with a replica down *and* a resync elsewhere is
MIRROR_DEFUNCT, because that is what an operator must know first.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from remirror.facts.generations import Generation
from remirror.facts.model import MdArray, MdMember
from remirror.facts.site import SiteFacts
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import array_uuid, leg_device
from remirror.roles import leg_records, ran_without_primary, replica_session, roles, superblock_of
from remirror.units import format_size


class State(StrEnum):
    """The states a mirror can be in; see the module's table."""

    MIRRORED = "MIRRORED"
    SYNCING = "SYNCING"
    MIRROR_DEFUNCT = "MIRROR_DEFUNCT"
    LOCAL_DEFUNCT = "LOCAL_DEFUNCT"
    DEGRADED_WAITING = "DEGRADED_WAITING"
    SPLIT_BRAIN = "SPLIT_BRAIN"
    DEFUNCT = "DEFUNCT"
    ABSENT = "ABSENT"
    UNKNOWN = "UNKNOWN"


# A leg's status in the array. INCOMPLETE: md counts it in sync, but its bad block log lists
# writes it failed, which md acknowledged all the same (remirror.agent.md_legs): it lacks them.
IN_SYNC, SYNCING, FAULTY, MISSING = "in_sync", "syncing", "faulty", "missing"
INCOMPLETE = "incomplete"


@dataclass(frozen=True)
class LegHealth:
    """One leg as the running array sees it."""

    site: str
    disk: str
    role: str  # "primary" or "replica"
    status: str  # IN_SYNC, INCOMPLETE, SYNCING, FAULTY or MISSING
    member: str = ""  # kernel name in the array (sda, dm-0); empty when it has none
    session: str = ""  # replica legs: the iSCSI session state, empty when there is none
    write_mostly: bool = False
    # INCOMPLETE: the array's byte ranges (offset, length) it lacks, from its bad block log.
    missed: tuple[tuple[int, int], ...] = ()

    @property
    def missed_words(self) -> str:
        """What it lacks, for people: `1MiB at 64MiB`, `2 ranges, 1536KiB from 64MiB`."""
        total = sum(length for _, length in self.missed)
        if not self.missed:
            return ""
        if len(self.missed) == 1:
            return f"{format_size(total)} at {format_size(self.missed[0][0])}"
        return f"{format_size(total)} in {len(self.missed)} ranges from {format_size(self.missed[0][0])}"


@dataclass(frozen=True)
class MirrorHealth:
    """A mirror's state, why, and its legs."""

    mirror: str
    state: State
    reason: str
    legs: tuple[LegHealth, ...] = ()
    progress: tuple[int, int] | None = None  # (done, total) sectors of a resync


def assess(profile: Profile, mirror: Mirror, facts: Mapping[str, SiteFacts | None]) -> MirrorHealth:
    """The mirror's state from what its sites hold (None: a site could not be observed)."""
    primary = facts.get(mirror.primary.site)
    if primary is None:
        return MirrorHealth(mirror.name, State.UNKNOWN, f"site {mirror.primary.site} could not be observed")
    uuid_ = array_uuid(profile, mirror)
    now = roles(mirror, leg_records(mirror, uuid_, facts))
    if now.conflict:
        return MirrorHealth(mirror.name, State.SPLIT_BRAIN, now.conflict)
    array = primary.array_named(mirror.name, uuid_)
    if array is None:
        return _stopped(profile, mirror, facts, primary, now.generation)
    legs = _legs(profile, mirror, primary, array)
    local, replicas = legs[0], legs[1:]
    # Only a leg out of the array is judged (a member is the array's again: see ran_without_primary).
    members = frozenset(r.site for r in replicas if r.status in (IN_SYNC, INCOMPLETE, SYNCING))
    diverged = ran_without_primary(profile, mirror, facts, members)
    if diverged:
        return MirrorHealth(mirror.name, State.SPLIT_BRAIN, diverged, legs)
    progress = array.sync_completed if array.sync_action in ("resync", "recover") else None
    if array.array_state == "broken":
        # Kernel 6.1: md does not fail the last leg in sync when it fails a write; it refuses every
        # write to the array until it is stopped.
        return MirrorHealth(
            mirror.name,
            State.DEFUNCT,
            f"md marked {mirror.md_device} broken (its last leg in sync failed a write): it takes no"
            " writes until it is stopped and assembled again",
            legs,
        )
    if local.status in (FAULTY, MISSING):
        if any(r.status in (IN_SYNC, INCOMPLETE) for r in replicas):
            lacking = "; ".join(
                f"the replica leg on {r.site} lacks {r.missed_words}"
                for r in replicas
                if r.status == INCOMPLETE
            )
            return MirrorHealth(
                mirror.name,
                State.LOCAL_DEFUNCT,
                f"the primary leg {local.disk} is {local.status}: a replica serves reads and writes"
                + (f" ({lacking}: writes its disk failed)" if lacking else ""),
                legs,
            )
        return MirrorHealth(mirror.name, State.DEFUNCT, f"no leg of {mirror.md_device} is in sync", legs)
    down = [r for r in replicas if r.status in (FAULTY, MISSING)]
    holes = [r for r in replicas if r.status == INCOMPLETE]
    if down or holes:
        return MirrorHealth(
            mirror.name,
            State.MIRROR_DEFUNCT,
            "; ".join(
                [f"replica leg on {r.site} is {r.status}{_session_words(r)}" for r in down]
                + [
                    f"replica leg on {r.site} lacks {r.missed_words} of acknowledged writes (its disk"
                    " failed them; md's bad block log): `remirror reconcile` rewrites them"
                    for r in holes
                ]
            ),
            legs,
            progress,
        )
    waiting = [r for r in replicas if r.session not in ("", "LOGGED_IN")]
    if waiting and mirror.replication.on_link_loss == "wait":
        return MirrorHealth(
            mirror.name,
            State.DEGRADED_WAITING,
            "; ".join(f"session to {r.site} is {r.session}: writes wait for the link" for r in waiting),
            legs,
            progress,
        )
    if waiting:
        # md fails the leg at the next write; the replica is already out of reach.
        return MirrorHealth(
            mirror.name,
            State.MIRROR_DEFUNCT,
            "; ".join(
                f"session to {r.site} is {r.session}: md fails the leg at its next write" for r in waiting
            ),
            legs,
            progress,
        )
    if progress is not None or any(leg.status == SYNCING for leg in legs):
        return MirrorHealth(mirror.name, State.SYNCING, f"md is running {array.sync_action}", legs, progress)
    if local.status == INCOMPLETE:
        # Still mirrored (the replicas hold every write); the report makes it CRITICAL.
        return MirrorHealth(
            mirror.name,
            State.MIRRORED,
            f"every replica leg is in sync; the primary leg lacks {local.missed_words} (writes its disk"
            " failed: md reads them from a replica, the only good copy)",
            legs,
        )
    return MirrorHealth(mirror.name, State.MIRRORED, "every leg is in sync", legs)


def _stopped(
    profile: Profile,
    mirror: Mirror,
    facts: Mapping[str, SiteFacts | None],
    primary: SiteFacts,
    generation: Generation | None,
) -> MirrorHealth:
    """A mirror whose array does not run on its primary: judged from the legs' superblocks,
    before anything would assemble them (after both sites restarted, split brain first)."""
    uuid_ = array_uuid(profile, mirror)
    diverged = ran_without_primary(profile, mirror, facts)
    if diverged:
        return MirrorHealth(mirror.name, State.SPLIT_BRAIN, diverged)
    if superblock_of(mirror, mirror.primary, primary, uuid_) is not None:
        if generation is not None and generation.how == "forced" and generation.site == primary.name:
            # The legs name it primary, but it does not run the array: the promotion stopped
            # after writing the generation (docs/safety.md, flow 7).
            return MirrorHealth(
                mirror.name,
                State.DEFUNCT,
                f"{mirror.md_device} is not running on {primary.name}, which generation {generation.n}"
                f" made primary (a forced promotion that did not finish): `remirror promote PROFILE"
                f" {mirror.name} --site {primary.name} --force` finishes it",
            )
        return MirrorHealth(
            mirror.name, State.DEFUNCT, f"{mirror.md_device} is not running on {primary.name}"
        )
    holders = [
        r.site for r in mirror.replicas if superblock_of(mirror, r, facts.get(r.site), uuid_) is not None
    ]
    if holders:
        # A new (blank) disk in the primary's place: the replica holds the mirror's data.
        return MirrorHealth(
            mirror.name,
            State.DEFUNCT,
            f"the primary leg {mirror.primary.disk} on {primary.name} holds no copy of {mirror.md_device}"
            f" (a new disk?); the replica leg on {', '.join(holders)} holds its data: remirror apply"
            f" runs the mirror from it and copies it onto {mirror.primary.disk}",
        )
    return MirrorHealth(mirror.name, State.ABSENT, f"{mirror.md_device} was never built: run remirror apply")


def _session_words(leg: LegHealth) -> str:
    return f" (session {leg.session})" if leg.session else " (no session)"


def _legs(profile: Profile, mirror: Mirror, primary: SiteFacts, array: MdArray) -> tuple[LegHealth, ...]:
    """The primary leg, then each replica leg in profile order, matched to array members."""
    local_disk = primary.disks.get(leg_device(mirror, mirror.primary, primary.dm))
    local_name = local_disk.kernel_name if local_disk else ""
    own = array.member(local_name) if local_name else None
    status, name, write_mostly = _member_status(array, own)
    missed = own.missed() if own is not None and status == INCOMPLETE else ()
    local = LegHealth(
        mirror.primary.site, mirror.primary.disk, "primary", status, name, "", write_mostly, missed
    )
    # A replica's member is the disk of its session; a member whose disk is
    # gone (session logged out) is matched to the replicas left, in order.
    unclaimed = [m for m in array.members if m.device != local_name]
    sessions = []
    for replica in mirror.replicas:
        session = replica_session(profile, mirror, replica, primary)
        sessions.append(session)
        if session is not None and session.disk:
            unclaimed = [m for m in unclaimed if m.device != session.disk]
    legs = [local]
    for replica, session in zip(mirror.replicas, sessions, strict=True):
        member = array.member(session.disk) if session is not None and session.disk else None
        stale = False
        if member is None and unclaimed:
            member = unclaimed.pop(0)
            # The session has a disk, but md holds another one for this leg:
            # the disk of a session that was logged out, gone from the system.
            stale = session is not None and bool(session.disk)
        status, name, write_mostly = _member_status(array, member)
        if stale and status != MISSING:
            status = FAULTY
        legs.append(
            LegHealth(
                replica.site,
                replica.disk,
                "replica",
                status,
                name,
                session.state if session is not None else "",
                write_mostly,
                member.missed() if member is not None and status == INCOMPLETE else (),
            )
        )
    return tuple(legs)


def _member_status(array: MdArray, member: MdMember | None) -> tuple[str, str, bool]:
    if member is None:
        return MISSING, "", False
    if member.is_faulty:
        status = FAULTY
    elif member.is_in_sync:
        status = INCOMPLETE if member.bad_blocks else IN_SYNC
    elif array.sync_action in ("recover", "resync") or member.slot is not None:
        status = SYNCING
    else:
        status = MISSING  # a spare that is not being recovered onto
    return status, member.device, member.is_write_mostly
