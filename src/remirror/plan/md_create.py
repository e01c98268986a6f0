"""Plan a new array: `mdadm --create` on the primary, with or without the initial sync. Pure.

Split from remirror.plan.md (which decides between assembling, rebuilding,
creating and tuning) because a create has three ways: the usual one, whose
initial sync copies the primary leg onto the replicas, `initial_sync:
skip`'s, for legs each site proves blank, and `seeded`'s, for replicas that
hold a seed, caught up first (remirror.plan.seed).
"""

from __future__ import annotations

import dataclasses

from remirror.facts.seed import SeedHeader
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan.actions import CREATE, Action, Verb
from remirror.plan.keep_data import KeptData
from remirror.plan.resync_limit import resync_limit_steps
from remirror.plan.safe_mode import safe_mode_step
from remirror.plan.seed import SLOWEST_LINK, CatchUpSeed
from remirror.profile.model import Mirror
from remirror.protocol.commands import MdCreate
from remirror.protocol.steps import (
    AddReplicaLegs,
    ByteRange,
    CopySpans,
    DeviceUnwritten,
    DropBadBlockLog,
    LegRecordCreate,
    ProveBlank,
    SetMemberState,
    Step,
    WaitPath,
)
from remirror.roles import md_size

MiB = 1024 * 1024
# The slowest a disk is read to prove it blank, for how long the controller waits (a whole
# 2 TB disk at this rate is about a day; a healthy one takes hours).
PROVE_BLANK_RATE = 20 * 1000**2


def create_actions(
    mirror: Mirror,
    primary: SiteFacts,
    local: DiskFacts,
    replica_disks: list[DiskFacts],
    remote_paths: list[str],
    uuid_: str,
    destroyed: str,
    kept: KeptData | None = None,
    seed: SeedHeader | None = None,
) -> list[Action]:
    """A new array of `local` and the replicas' legs (nothing of this mirror on any of them);
    `destroyed`: what it writes over (remirror.plan.md.destroys), for the plan to show; `kept`:
    the file system it keeps in place (`keep_data`: metadata 1.0, remirror.plan.keep_data);
    `seed`: the seed the replicas hold (`initial_sync: seeded`, remirror.plan.seed)."""
    replication = mirror.replication
    # 1.2 keeps md's superblock and bitmap at a leg's start and its data after them; 1.0 keeps
    # them at the end, so that a kept file system stays at byte 0 of the leg and of the array.
    size = kept.array_size if kept else md_size([local.size, *(r.size for r in replica_disks)])
    create = MdCreate(
        mirror.md_device,
        mirror.name,
        uuid_,
        "1.0" if kept else "1.2",
        (),
        replication.bitmap_chunk,
        # Short of each leg's last MiB, the leg record's place (docs/failover.md).
        size // MiB * MiB,
        replication.effective_write_behind if replication.mode == "async" else None,
    )
    if replication.initial_sync == "skip":
        return _create_without_sync(
            mirror, primary, local, remote_paths, uuid_, create, destroyed, "the legs are blank"
        )
    if seed is not None:
        catch_up = [
            Action(
                primary.name,
                Verb.CATCH_UP_SEED,
                f"{path} from {local.path}: the chunks whose digests differ from seed {seed.seed[:8]}"
                f" at site {replica.site}",
                CREATE,
                (
                    CatchUpSeed(
                        mirror.name, seed.seed, local.path, path, replica.site, disk.path, create.size
                    ),
                ),
            )
            for replica, disk, path in zip(mirror.replicas, replica_disks, remote_paths, strict=True)
        ]
        caught_up = "the replicas hold the seed, caught up"
        # Nothing may write a leg between its catch-up and the create (legs made --assume-clean);
        # then each replica's first chunk, the file system's superblock, which an import leaves
        # out and the catch-up too: in the create's own request, so that no disk but the
        # primary's shows the file system to the primary's host before the array holds them.
        first = (ByteRange(0, MiB),)
        guards = (
            *(DeviceUnwritten(path) for path in (local.path, *remote_paths)),
            *(
                CopySpans(mirror.name, local.path, path, first, 60 + MiB / SLOWEST_LINK)
                for path in remote_paths
            ),
        )
        return catch_up + _create_without_sync(
            mirror, primary, local, remote_paths, uuid_, create, destroyed, caught_up, guards
        )
    # The replica legs take the array's first slots: md (raid1.c of Debian 12's 6.1) decides
    # whether a write goes behind on the first leg it writes to, so write-behind only works
    # with a write-mostly leg in slot 0 (bench/write_behind_order.sh). mdadm's create marks
    # every device after --write-mostly, the local leg too: so the array is created with
    # the replica slots missing and the local leg last, and each replica leg is added into
    # the first free slot, without md's bad block log (remirror.agent.md_legs: a write the
    # leg fails then fails it, and the bitmap keeps what it misses). Its recovery copies the
    # local leg, as a create's initial sync would, reading the local leg only. Then it is
    # made write-mostly through sysfs: `mdadm --add --write-mostly` leaves the new leg faulty
    # (mdadm 4.2, kernel 6.1: seen in the lab).
    create = dataclasses.replace(create, legs=(*["missing"] * len(remote_paths), local.path))
    mode = (
        f"async, write-behind {replication.effective_write_behind}" if replication.mode == "async" else "sync"
    )
    adds = [
        AddReplicaLegs(mirror.md_device, tuple(remote_paths)),
        *(SetMemberState(mirror.md_device, path, "writemostly") for path in remote_paths),
    ]
    return [
        Action(
            primary.name,
            Verb.CREATE_ARRAY,
            f"{mirror.md_device} RAID1 {local.path} + {len(remote_paths)} write-mostly leg(s) in the"
            f" first slot(s), {mode}" + (f"; {kept.describe()}" if kept else ""),
            CREATE,
            (
                create,
                WaitPath(mirror.md_device, 30),
                # Before the adds: each starts a recovery, the initial sync, over the link.
                *resync_limit_steps(mirror, primary.local_time),
                safe_mode_step(mirror.md_device),
                *adds,
                LegRecordCreate(mirror.name, uuid_, mirror.primary.site, (local.path, *remote_paths)),
            ),
            destructive=destroyed,
        )
    ]


def _create_without_sync(
    mirror: Mirror,
    primary: SiteFacts,
    local: DiskFacts,
    remote_paths: list[str],
    uuid_: str,
    create: MdCreate,
    destroyed: str,
    why: str,
    guards: tuple[Step, ...] = (),
) -> list[Action]:
    """`initial_sync: skip`: once each site has proved its leg all zeros (`prove_blank_actions`,
    which the planner puts first), the array is created with every leg at once,
    `--assume-clean`: blank legs are equal legs, so nothing is copied; `seeded`: once each
    replica is caught up with the primary (`why` says which). The replica legs take
    the first slots, as an added leg would (write-behind needs one in slot 0), lose the bad
    block log mdadm gave them (re-added without it) and are made write-mostly through sysfs."""
    create = dataclasses.replace(create, legs=(*remote_paths, local.path), assume_clean=True)
    return [
        Action(
            primary.name,
            Verb.CREATE_ARRAY,
            f"{mirror.md_device} RAID1 {local.path} + {len(remote_paths)} write-mostly leg(s) in the"
            f" first slot(s), no initial sync ({why})",
            CREATE,
            (
                *guards,
                create,
                WaitPath(mirror.md_device, 30),
                # Each made with a bad block log: dropped in place, nothing to resync.
                *(DropBadBlockLog(mirror.md_device, path) for path in remote_paths),
                *(SetMemberState(mirror.md_device, path, "writemostly") for path in remote_paths),
                safe_mode_step(mirror.md_device),
                *resync_limit_steps(mirror, primary.local_time),
                LegRecordCreate(mirror.name, uuid_, mirror.primary.site, (local.path, *remote_paths)),
            ),
            destructive=destroyed,  # a disk with a signature fails its proof; still shown as such
        ),
    ]


def prove_blank_actions(legs: list[tuple[str, DiskFacts]]) -> list[Action]:
    """`initial_sync: skip`'s proofs: each site reads its own leg, and only the verdict crosses
    the link; a byte that is not zero fails the step, and with it the plan."""
    return [
        Action(
            site,
            Verb.PROVE_BLANK,
            f"{disk.path} (initial_sync: skip: every byte must be zero)",
            CREATE,
            (ProveBlank(disk.path, 60 + disk.size / PROVE_BLANK_RATE),),
        )
        for site, disk in legs
    ]
