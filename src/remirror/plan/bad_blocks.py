"""Plan the replica legs' bad block logs away. Pure: no I/O.

A replica leg has no bad block log (remirror.agent.md_legs says why: with
one, md absorbs a write the leg failed and the bitmap forgets it). New legs
are added without one; a leg in sync that still has one (an array made
before, the old primary's leg after a promotion, a leg added while the
array was busy) loses it here, and a leg whose log lists sectors (writes it
failed, that md acknowledged) has them rewritten by the same re-add. Both
are repairs: the reconciler makes them too, so that a hole is filled
without waiting for an operator.
"""

from __future__ import annotations

from remirror.facts.model import MdArray
from remirror.facts.site import SiteFacts
from remirror.plan.actions import CHANGE, Action, Verb
from remirror.profile.model import Mirror, Profile
from remirror.profile.names import replica_path
from remirror.protocol.steps import DropBadBlockLog
from remirror.roles import replica_session
from remirror.units import format_size


def bad_block_actions(profile: Profile, mirror: Mirror, primary: SiteFacts, array: MdArray) -> list[Action]:
    """A re-add without its log for one replica leg in sync that has one (one a plan: the leg is
    out for a moment, and every other leg must hold the whole array meanwhile)."""
    if (
        array.sync_action not in ("idle", "")
        or array.degraded
        or array.array_state in ("read-auto", "readonly")
        or len(array.members) != array.raid_disks
    ):
        return []  # md is busy or a leg is missing: the next plan, once it is MIRRORED
    for replica in mirror.replicas:
        session = replica_session(profile, mirror, replica, primary)
        member = array.member(session.disk) if session is not None and session.disk else None
        if member is None or session is None or session.state != "LOGGED_IN":
            continue  # a leg out of the array, or its link down: the re-add first
        others = [m for m in array.members if m.device != member.device]
        if not member.is_in_sync or any(m.bad_blocks or not m.is_in_sync or m.is_faulty for m in others):
            # Out even for a second, it might take the only good copy of a sector another leg's
            # disk failed (the primary's, which keeps its log): that disk is replaced first.
            continue
        path = replica_path(profile, mirror, replica)
        disk = primary.disks.get(path)
        has_log = disk is not None and disk.superblock is not None and disk.superblock.bad_block_log
        if not has_log and not member.bad_blocks:
            continue
        if member.bad_blocks:
            subject = (
                f"{path} in {mirror.md_device}: {format_size(member.missed_bytes)} of writes {replica.site}"
                " failed (its bad block log) rewritten, then no log: a write it fails fails the leg"
            )
        else:
            subject = (
                f"{path} in {mirror.md_device}: md's bad block log off ({replica.site}'s leg: a write it"
                " fails then fails the leg, and the bitmap keeps what it missed)"
            )
        return [
            Action(
                primary.name,
                Verb.DROP_BAD_BLOCK_LOG,
                subject,
                CHANGE,
                (DropBadBlockLog(mirror.md_device, path),),
                # A leg in sync out for a moment; what it missed resynced by the bitmap.
                repair=True,
                target=profile.replica_iqn(mirror, replica),  # whose leg: the reconciler counts it
            )
        ]
    return []
