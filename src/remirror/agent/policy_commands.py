"""What each command of the protocol may name at this site (remirror.agent.policy).

A command arrives as its typed class (remirror.protocol.commands), and the
site builds its argv from the fields checked here: an md array, a leg, a
device-mapper name and table, a target and its portal, each whole and in the
site's scope. No command line of the sender's is run, and none is parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from remirror.agent.policy import UUID, Checker, Refused
from remirror.agent.policy_iscsi import node_command, node_update
from remirror.protocol import commands
from remirror.protocol.wire import Step

MAX_LEGS = 16  # md RAID1 takes more; a mirror of remirror's has a leg per site
MAX_WRITE_BEHIND = 16383  # md's own limit (COUNTER_MAX)
MiB = 1024 * 1024


def codes(step: commands.Command) -> None:
    """Exit codes the step takes as "already so", or explains: a tool's codes are 0 to 255."""
    if not all(0 <= code <= 255 for code in (*step.ok_codes, *step.explain)):
        raise Refused(f"{step.kind}: its exit codes are 0 to 255")


def _member(check: Checker, step: commands.MdMember) -> None:
    check.device(step.md)
    if step.op in ("fail", "remove") and step.device in ("detached", "failed"):
        return  # md's own words for the members whose disk went or failed
    check.device(step.device)


def _bitmap_chunk(chunk: int | None, what: str) -> None:
    if chunk is not None and not (4096 <= chunk <= 1 << 40 and chunk % 1024 == 0):
        raise Refused(f"{what}: a bitmap chunk of {chunk} bytes is not one remirror makes")


def _bitmap(check: Checker, step: commands.MdBitmap) -> None:
    check.device(step.md)
    _bitmap_chunk(step.chunk, "md_bitmap")


def _dm_create(check: Checker, step: commands.DmCreate) -> None:
    check.dm_name(step.name)
    check.dm_target(step.table)


def _create(check: Checker, step: commands.MdCreate) -> None:
    check.device(step.md)
    check.mirror(step.name)
    if not UUID.fullmatch(step.uuid):
        raise Refused(f"md_create: {step.uuid[:40]!r} is not an md array UUID")
    made = check.scope.array_ids.get(step.name, frozenset()) if check.scope is not None else None
    if made is not None and (step.md, step.uuid) not in made:
        # Another array's UUID (the host's own system array's, which boot would then assemble
        # from these legs) or another mirror's device: not this mirror's array.
        raise Refused(f"md_create: {step.md} with UUID {step.uuid} is not mirror {step.name}'s array here")
    if not 1 <= len(step.legs) <= MAX_LEGS:
        raise Refused(f"md_create: {len(step.legs)} legs")
    for leg in step.legs:
        if leg != "missing":  # md's own word for a slot left free
            check.device(leg)
    _bitmap_chunk(step.bitmap_chunk, "md_create")
    if not (0 < step.size < 1 << 60 and step.size % MiB == 0):
        raise Refused(f"md_create: {step.size} bytes is not a size in MiB")
    if step.write_behind is not None and not 0 <= step.write_behind <= MAX_WRITE_BEHIND:
        raise Refused(f"md_create: write-behind {step.write_behind} (at most {MAX_WRITE_BEHIND})")


def _checked(check_fields: Callable[[Checker, Any], None]) -> Callable[[Checker, Any], None]:
    def checked(check: Checker, step: commands.Command) -> None:
        codes(step)
        check_fields(check, step)

    return checked


COMMAND_CHECKS: dict[type[Step], Callable[[Checker, Any], None]] = {
    commands.MdStop: _checked(lambda check, step: check.device(step.md)),
    commands.MdReadWrite: _checked(lambda check, step: check.device(step.md)),
    commands.MdMember: _checked(_member),
    commands.MdZeroSuperblock: _checked(lambda check, step: check.device(step.device)),
    commands.MdBitmap: _checked(_bitmap),
    commands.MdCreate: _checked(_create),
    commands.IscsiNode: _checked(node_command),
    commands.IscsiNodeUpdate: _checked(node_update),
    commands.DmCreate: _checked(_dm_create),
    commands.DmRemove: _checked(lambda check, step: check.dm_name(step.name)),
    commands.ZeroHead: _checked(lambda check, step: check.device(step.device)),
}
