"""Plan the md RAID1 array on the primary: create, assemble, rebuild, tune, stop. Pure: no I/O.

Every path that could write over a leg is decided here, from what the legs
hold: a leg with this mirror's superblock is assembled or rebuilt from,
never created over; anything else on a disk is named in the action's
`destructive` (docs/safety.md).
"""

from __future__ import annotations

import dataclasses

from remirror.facts.model import MdArray, Signature
from remirror.facts.seed import SeedHeader
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import CHANGE, CREATE, DELETE, Action, PlanError, Verb
from remirror.plan.bad_blocks import bad_block_actions
from remirror.plan.keep_data import kept_data
from remirror.plan.md_create import create_actions
from remirror.plan.resync_limit import resync_limit_actions, resync_limit_steps
from remirror.plan.safe_mode import SAFE_MODE_DELAY, safe_mode_is_set, safe_mode_step
from remirror.plan.seed import without_seed
from remirror.profile.model import Mirror, Profile
from remirror.protocol.commands import MdBitmap, MdMember, MdStop
from remirror.protocol.steps import (
    AssembleArray,
    LegRecordCreate,
    LegRecordJoin,
    LocalLegLast,
    SetMdAttribute,
    SetMemberState,
    Step,
    WaitPath,
)
from remirror.roles import has_room_for_record, replica_session


def _foreign(disk: DiskFacts, uuid_: str) -> list[Signature]:
    """Signatures that are not this mirror's: its md superblock, and on a leg with metadata 1.0
    (keep_data) whatever lies in the array's data, from byte 0: the mirror's own file system."""
    sb = disk.superblock
    if sb is None or sb.array_uuid != uuid_:
        return list(disk.signatures)
    content = sb.data_end if sb.version == "1.0" and sb.data_end is not None else 0
    return [s for s in disk.signatures if s.kind != "md" and s.offset >= content]


def destroys(site: str, disk: DiskFacts, uuid_: str) -> str:
    """What writing over `disk` would destroy besides this mirror's own superblock; empty: nothing."""
    found = _foreign(disk, uuid_)
    if not found:
        return ""
    return f"site {site}: {disk.path} holds " + ", ".join(dict.fromkeys(s.describe() for s in found))


def stop_array_action(site: str, device: str, why: str, repair: bool = False) -> Action:
    """`mdadm --stop` of an array on `site`; `why` says what becomes of it (shown in the plan).
    md writes out its write-behind queue before the array stops. `repair`: the reconciler may
    stop it too (only an array that never ran)."""
    return Action(site, Verb.STOP_ARRAY, f"{device} ({why})", DELETE, (MdStop(device),), repair=repair)


def runs_under_its_name(mirror: Mirror, site: SiteFacts, array: MdArray) -> bool:
    """Whether the profile's device, /dev/md/NAME, is a link to the running `array` at the site."""
    return mirror.md_device.removeprefix("/dev/md/") in site.array_links.get(array.kernel_name, ())


def stand_down_former_primary(mirror: Mirror, site: SiteFacts, leg: DiskFacts, uuid_: str) -> list[Action]:
    """A replica site still running the array on its own leg: a former primary, back after a
    forced promotion (docs/failover.md). Its array stops so that its leg can be exported to the
    new primary; whether that leg may then rejoin is the reconciler's judgement (split brain)."""
    array = site.array_named(mirror.name, uuid_)
    if array is None or not leg.kernel_name or array.member(leg.kernel_name) is None:
        return []
    # By the name it runs under: after a clean reboot early boot starts it as md127, with
    # /dev/md/NAME_0 and no /dev/md/NAME (plan/boot_arrays.py), and `mdadm --stop` of a name
    # that is not there stops nothing.
    device = mirror.md_device if runs_under_its_name(mirror, site, array) else f"/dev/{array.kernel_name}"
    users = site.disks.get(device, DiskFacts(device, False)).users()
    if users:
        raise PlanError(
            f"site {site.name} still runs {device} from before {mirror.primary.site} was"
            f" promoted, and it is in use ({'; '.join(users)}): stop what uses it there first"
        )
    # (Not observed under another name: `mdadm --stop` refuses an array anything holds open.)
    return [
        stop_array_action(
            site.name, device, f"{array.kernel_name}: a former primary's; its leg keeps its data"
        )
    ]


def array_actions(
    profile: Profile,
    index: int,
    mirror: Mirror,
    primary: SiteFacts,
    local: DiskFacts,
    replica_disks: list[DiskFacts],
    remote_paths: list[str],
    uuid_: str,
    seed: SeedHeader | None = None,
) -> list[Action]:
    """The array: assembled, rebuilt onto a new primary disk, created, or tuned as the profile
    says; `seed`: the one its replicas hold, checked (remirror.plan.seed)."""
    replication = mirror.replication
    array = primary.array_named(mirror.name, uuid_)
    if array is None:
        if local.superblock is not None and local.superblock.array_uuid == uuid_:
            return [
                Action(
                    primary.name,
                    Verb.ASSEMBLE_ARRAY,
                    f"{mirror.md_device} from {local.path} and {len(remote_paths)} replica(s)",
                    CREATE,
                    assemble_steps(mirror, primary, uuid_, [local.path, *remote_paths]),
                )
            ]
        holders = [
            (disk, path)
            for disk, path in zip(replica_disks, remote_paths, strict=True)
            if disk.superblock is not None and disk.superblock.array_uuid == uuid_
        ]
        if holders:
            return _rebuild_primary_leg(mirror, primary, local, holders, uuid_)
        if local.users():
            raise PlanError(f"site {primary.name}: {local.path} is in use ({'; '.join(local.users())})")
        # Nothing of this mirror on any leg (else it is assembled or rebuilt above): every
        # signature, an md superblock of this mirror's too, is data a new array writes over,
        # but the file system keep_data keeps where it is (plan/keep_data.py).
        kept = None
        if mirror.primary.keep_data:
            where = profile.where("mirrors", index, "primary", "keep_data")
            # `local` is the cache device when the leg has a cache (one this plan makes shows
            # the disk's contents).
            kept = kept_data(where, mirror, local, replica_disks)
            local = dataclasses.replace(
                local, signatures=tuple(s for s in local.signatures if s != kept.signature)
            )
        destroyed = [d for d in [destroys(primary.name, local, "")] if d]
        replica_disks = [without_seed(r, seed) for r in replica_disks]
        destroyed += [destroys(r.path, r, "") for r in replica_disks if r.signatures]
        return create_actions(
            mirror, primary, local, replica_disks, remote_paths, uuid_, "; ".join(destroyed), kept, seed
        )
    actions: list[Action] = []
    md = f"/dev/{array.kernel_name}"  # the array's own node: the site resolves it
    resume: list[Action] = []
    if array.writes_suspended:
        why = "md holds every write to it: a move of its legs that did not finish"
        resume.append(
            _sysfs_repair(
                primary,
                Verb.RESUME_WRITES,
                f"{mirror.md_device} ({why})",
                SetMdAttribute(md, "suspend_hi", "0"),
            )
        )
    if array.syncs_held:
        why = "md holds its resyncs at a sector: an add of a leg that did not finish"
        subject = f"{mirror.md_device} ({why})"
        resume.append(
            _sysfs_repair(primary, Verb.RELEASE_RESYNCS, subject, SetMdAttribute(md, "sync_max", "max"))
        )
    if array.bitmap_chunk != replication.bitmap_chunk:
        # No way to change a bitmap's chunk in place: drop it and add a new one.
        # Write-behind needs a bitmap, so the backlog is restored afterwards.
        steps = (
            MdBitmap(mirror.md_device, None),
            MdBitmap(mirror.md_device, replication.bitmap_chunk),
        )
        actions.append(
            Action(
                primary.name,
                Verb.CHANGE_BITMAP,
                f"{mirror.md_device} chunk -> {replication.bitmap_chunk // 1024}KiB",
                CHANGE,
                steps,
            )
        )
    if array.backlog != replication.effective_write_behind or actions:
        subject = f"{mirror.md_device} backlog {array.backlog} -> {replication.effective_write_behind}"
        backlog = str(replication.effective_write_behind)
        actions.append(
            _sysfs_repair(
                primary, Verb.SET_WRITE_BEHIND, subject, SetMdAttribute(md, "bitmap/backlog", backlog)
            )
        )
    if array.safe_mode_delay is not None and not safe_mode_is_set(array.safe_mode_delay):
        subject = (
            f"{mirror.md_device} safe mode {array.safe_mode_delay:g}s -> {SAFE_MODE_DELAY:g}s"
            " (a clean mark costs the next write a superblock write on each leg, the replica's over the link)"
        )
        actions.append(_sysfs_repair(primary, Verb.SET_SAFE_MODE, subject, safe_mode_step(md)))
    actions += resync_limit_actions(primary, mirror, array)
    if array.sync_action == "check":
        # Debian's monthly checkarray (cron) or mdcheck (systemd timer) started it on every array:
        # md would read each replica leg whole, over the link. `remirror verify` reads each leg
        # on its own site and moves only digests (docs/safety.md, "Debian's own mdadm jobs").
        subject = (
            f"{mirror.md_device} (md's check reads the replica legs over the link: `remirror verify` instead)"
        )
        actions.append(
            _sysfs_repair(primary, Verb.STOP_CHECK, subject, SetMdAttribute(md, "sync_action", "idle"))
        )
    actions += _missing_leg_records(
        profile, mirror, primary, array, local, replica_disks, remote_paths, uuid_
    )
    for member in array.members:
        if member.device == local.kernel_name and member.is_write_mostly:
            # The primary's own leg, write-mostly from when it was a replica (before a promotion):
            # reads would go over the link.
            subject = f"{mirror.md_device} member {member.device} (the local leg: reads stay here)"
            state = SetMemberState(md, f"/dev/{member.device}", "-writemostly")
            actions.append(_sysfs_repair(primary, Verb.CLEAR_WRITE_MOSTLY, subject, state))
        if member.device != local.kernel_name and not member.is_write_mostly and not member.is_faulty:
            subject = f"{mirror.md_device} member {member.device}"
            state = SetMemberState(md, f"/dev/{member.device}", "writemostly")
            actions.append(_sysfs_repair(primary, Verb.SET_WRITE_MOSTLY, subject, state))
    # A leg re-added without its log is out for a moment: the legs move at the next plan.
    drops = bad_block_actions(profile, mirror, primary, array)
    return resume + actions + drops + ([] if drops else _local_leg_last(mirror, primary, array, local))


def _sysfs_repair(
    site: SiteFacts, verb: Verb, subject: str, write: SetMdAttribute | SetMemberState
) -> Action:
    """A setting md forgot (or was left with), put back by one sysfs write: the reconciler's too."""
    return Action(site.name, verb, subject, CHANGE, (write,), repair=True)


def _local_leg_last(mirror: Mirror, primary: SiteFacts, array: MdArray, local: DiskFacts) -> list[Action]:
    """An async mirror's local leg into the array's last slot, if it is not there.

    md (raid1.c of Debian 12's 6.1) lets a write go behind only when the first
    leg it writes to, in slot order, is write-mostly: with the local leg first,
    async writes wait for the replica like sync ones. Arrays this version
    creates have it last; older ones, and one assembled on a promoted site
    (its own leg was a replica's), do not. Moving it needs every leg in sync
    (remirror.agent.md_slots): until then the plan leaves it, and status says
    why writes still wait. Sync mirrors need no move (nothing goes behind).
    """
    if mirror.replication.mode != "async" or not array.is_ahead(local.kernel_name) or not is_whole(array):
        return []
    slot = next(m.slot for m in array.members if m.device == local.kernel_name)
    return [
        Action(
            primary.name,
            Verb.REORDER_LEGS,
            f"{mirror.md_device}: the local leg {local.path} from slot {slot} to the last, so that writes"
            " go behind the replicas (md holds writes for a few seconds meanwhile)",
            CHANGE,
            (LocalLegLast(mirror.md_device, local.path),),
        )
    ]


def is_whole(array: MdArray) -> bool:
    """Every slot holds a leg in sync (none lacking writes its disk failed) and md is doing
    nothing else: a reshape may start."""
    return (
        array.degraded == 0
        and array.sync_action in ("idle", "")
        and len(array.members) == array.raid_disks
        and all(m.is_in_sync and not m.is_faulty and not m.bad_blocks for m in array.members)
    )


def _missing_leg_records(
    profile: Profile,
    mirror: Mirror,
    primary: SiteFacts,
    array: MdArray,
    local: DiskFacts,
    replica_disks: list[DiskFacts],
    remote_paths: list[str],
    uuid_: str,
) -> list[Action]:
    """Generation 1 on the legs of a running array none of whose legs holds a leg record: its
    create was cut short before it wrote them (docs/failover.md). Without them it could never be
    promoted, and nothing would say so. The agent first checks that md leaves each leg's last
    MiB alone (an array made by hand may use it)."""
    if any(d.leg_record is not None and d.leg_record.array_uuid == uuid_ for d in [local, *replica_disks]):
        return []
    legs = [local]  # the legs in the array now; one out of it gets its record when it rejoins
    for replica, path, disk in zip(mirror.replicas, remote_paths, replica_disks, strict=True):
        session = replica_session(profile, mirror, replica, primary)
        member = array.member(session.disk) if session is not None and session.disk else None
        if member is not None and not member.is_faulty:
            legs.append(dataclasses.replace(disk, path=path))  # written through its session
    if not all(has_room_for_record(d) for d in legs):
        return []  # made before leg records, over the whole disk: status says it cannot be promoted
    members = tuple(d.path for d in legs)
    step = LegRecordCreate(mirror.name, uuid_, mirror.primary.site, members, check_room=True)
    return [
        Action(
            primary.name,
            Verb.WRITE_LEG_RECORDS,
            f"{mirror.name} generation 1: {mirror.primary.site} primary, on {len(members)} leg(s) (never"
            " written: a create cut short; promote needs them)",
            CHANGE,
            (step,),
        )
    ]


def assemble_steps(
    mirror: Mirror, site: SiteFacts, uuid_: str, devices: list[str], bad_block_log: bool = False
) -> tuple[Step, ...]:
    """`mdadm --assemble --run` past udev's partial assemblies, then its device node, then what
    md keeps in memory only, which an assembled array starts without: the profile's resync limit
    and remirror's safe mode. `bad_block_log`: the legs get md's bad block log (a site's own leg
    that runs it alone)."""
    md = mirror.md_device
    return (
        AssembleArray(md, uuid_, tuple(devices), bad_block_log),
        WaitPath(md, 30),
        *resync_limit_steps(mirror, site.local_time),
        safe_mode_step(md),  # after the limits, which protect the link: this one is for speed
    )


def _rebuild_primary_leg(
    mirror: Mirror,
    primary: SiteFacts,
    local: DiskFacts,
    holders: list[tuple[DiskFacts, str]],
    uuid_: str,
) -> list[Action]:
    """The primary's leg holds nothing of the mirror (a new disk in a dead one's place) while
    replica legs hold its data: run the array from them and copy it all onto the new disk.

    Never a new array: `mdadm --create` with its initial sync would copy the blank disk over
    the replicas. The legs used are those whose leg record knows the newest generation.
    """
    newest = max((d.leg_record.current.n for d, _ in holders if d.leg_record is not None), default=None)
    if newest is not None:
        holders = [
            (d, p) for d, p in holders if d.leg_record is not None and d.leg_record.current.n == newest
        ]
    if local.users():
        raise PlanError(f"site {primary.name}: {local.path} is in use ({'; '.join(local.users())})")
    smallest = min(d.size for d, _ in holders)
    if local.size < smallest:
        raise PlanError(
            f"site {primary.name}: {local.path} ({local.size} bytes) is smaller than the replica leg"
            f" holding {mirror.md_device} ({smallest} bytes): it cannot take the mirror's data"
        )
    sources = [p for _, p in holders]
    return [
        Action(
            primary.name,
            Verb.ASSEMBLE_ARRAY,
            f"{mirror.md_device} from the replica leg(s) alone ({', '.join(sources)}):"
            f" {local.path} holds no copy of the mirror (a new disk?)",
            CREATE,
            assemble_steps(mirror, primary, uuid_, sources),
        ),
        Action(
            primary.name,
            Verb.REBUILD_LEG,
            f"{local.path} into {mirror.md_device} (in full: every block copied from the replica leg)",
            CHANGE,
            (MdMember(mirror.md_device, "add", local.path), LegRecordJoin(sources[0], local.path)),
            destructive=destroys(primary.name, local, ""),
        ),
    ]
