"""CDP on the site that runs the mirror: build or activate the stack, take, prune, view and copy points.

Everything here acts on the local kernel (it runs where md is assembled:
the `cdp` verbs run on the primary host, apply reaches it through the
agent). The decisions (when a point is due, pruning) are pure, in
remirror.plan.cdp; the formats and the stack's layout in remirror.facts.cdp;
the design in docs/cdp.md.
"""

from __future__ import annotations

import mmap
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from remirror.agent import lock, taken_down
from remirror.agent.direct import read_direct, write_direct
from remirror.agent.taken_down import mark_taken_down, taken_down_mark
from remirror.errors import CommandError, RemirrorError
from remirror.facts.cdp import (
    INDEX_SLOT,
    SECTOR,
    EraStatus,
    Layout,
    RecoveryPoint,
    ThinPoolStatus,
    changed_bytes,
    is_leg_points,
    layout,
    parse_era_invalidate,
    parse_era_status,
    parse_thin_pool_status,
    snapshot_table,
    stack_names,
    tables,
    view_name,
)
from remirror.facts.cdp_index import INDEX_SLOTS, CdpIndex, decode_index, encode_index, index_slot_for
from remirror.runner.local import LocalRunner

if TYPE_CHECKING:  # the agent imports the catalogue where it decodes a step
    from remirror.protocol.steps import CdpDeactivate, CdpStack

_runner = LocalRunner("cdp")
COPY_BLOCK = 1024 * 1024


class CdpError(RemirrorError):
    """A CDP operation that cannot be done (the reason in one line)."""


def dm_exists(name: str) -> bool:
    return _runner.run(["dmsetup", "info", name], ok_codes=[0, 1]).returncode == 0


def read_index(md_path: str) -> CdpIndex | None:
    """The index at the start of the mirror, or None if it holds none."""
    return decode_index(read_direct(md_path, 0, INDEX_SLOT * INDEX_SLOTS), INDEX_SLOT)


def write_index(md_path: str, index: CdpIndex) -> CdpIndex:
    """Write the next version of the index into the older slot; the version written."""
    index = replace(index, sequence=index.sequence + 1)
    try:
        slot = encode_index(index, INDEX_SLOT)
    except ValueError as error:  # more points than the slot holds: said, not a crash of cdp run
        raise RemirrorError(f"{md_path}: {error}: prune (remirror cdp prune) or keep fewer") from None
    write_direct(md_path, index_slot_for(index) * INDEX_SLOT, slot)
    return index


def era_status(mirror: str) -> EraStatus:
    """The volume's era."""
    return parse_era_status(_runner.run(["dmsetup", "status", stack_names(mirror)["volume"]]).stdout)


def pool_status(mirror: str) -> ThinPoolStatus:
    """The pool's use."""
    return parse_thin_pool_status(_runner.run(["dmsetup", "status", stack_names(mirror)["pool"]]).stdout)


def _zero(md_path: str, start: int, sectors: int) -> None:
    """Zero a slice (new metadata must start zeroed: the targets format it then).

    In 1 MiB writes, offsets in bytes: the slices are 28 MiB on a new stack, and one
    512-byte direct write at a time made that 57344 round trips through a sync mirror
    (over 15 minutes in the lab with 8 ms disks, far longer over a WAN).
    """
    where = [f"of={md_path}", f"seek={start * 512}", f"count={sectors * 512}"]
    flags = ["oflag=seek_bytes,direct", "iflag=count_bytes", "conv=notrunc", "status=none"]
    _runner.run(["dd", "if=/dev/zero", "bs=1M", *where, *flags], timeout=600)


def activate(mirror: str, md_path: str, plan: Layout, new: bool) -> None:
    """Create whichever of the stack's devices are missing, in order; a new stack gets volume 0."""
    names = stack_names(mirror)
    wanted = tables(mirror, md_path, plan)
    for key in ("tmeta", "emeta", "tdata", "pool"):
        if not dm_exists(names[key]):
            _runner.run(["dmsetup", "create", names[key], "--table", wanted[key]])
    if new:
        _runner.run(["dmsetup", "message", names["pool"], "0", "create_thin", "0"])
    for key in ("thin", "volume"):
        if not dm_exists(names[key]):
            _runner.run(["dmsetup", "create", names[key], "--table", wanted[key]])
    # A metadata snapshot held by a run that died would block `changes` (dm-era allows one).
    if era_status(mirror).metadata_snap_held:
        _runner.run(["dmsetup", "message", names["volume"], "0", "drop_metadata_snap"])


def create(mirror: str, md_path: str, plan: Layout) -> CdpIndex:
    """A new stack on a mirror whose start is blank (the caller checked): zeroed metadata, volume 0, index.

    Devices left by a creation cut short (no index was written, so they hold
    nothing yet) are removed first: metadata is never zeroed under a live pool.
    """
    deactivate(mirror, [])
    for start, sectors in (plan.index, plan.tmeta, plan.emeta):
        _zero(md_path, start, sectors)
    activate(mirror, md_path, plan, new=True)
    return write_index(md_path, CdpIndex(mirror, plan))


def deactivate(mirror: str, views: list[str]) -> None:
    """Remove the stack's devices (and any point views), top down; the data stays on the mirror."""
    names = stack_names(mirror)
    for name in [*views, *reversed(list(names.values()))]:
        if dm_exists(name):
            remove_dm(name)


@contextmanager
def _suspended(*names: str) -> Iterator[None]:
    """Suspend devices in order, resume them in reverse.

    The top first: its suspend flushes in-flight writes and freezes a mounted filesystem.
    """
    done: list[str] = []
    try:
        for name in names:
            _runner.run(["dmsetup", "suspend", name], timeout=120)
            done.append(name)
        yield
    finally:
        for name in reversed(done):
            _runner.run(["dmsetup", "resume", name], timeout=120)


def take_point(
    mirror: str, md_path: str, index: CdpIndex, hooks: str = "", now: Callable[[], float] = time.time
) -> CdpIndex:
    """A recovery point: a thin snapshot of volume 0 taken while the era device and the volume are suspended.

    The resume starts a new era; the point records it, so that blocks of
    that era or later are exactly those written after the point.
    """
    names = stack_names(mirror)
    point_id = index.next_id
    with _suspended(names["volume"], names["thin"]):
        taken = now()  # nothing is written from here until the resume: the point's time
        try:
            _runner.run(["dmsetup", "message", names["pool"], "0", "create_snap", str(point_id), "0"])
        except CommandError as error:
            # A point whose snapshot was made but whose index write was lost (a crash):
            # its id is taken; drop that orphan and take the point again.
            if "exists" not in error.stderr_tail:
                raise
            _runner.run(["dmsetup", "message", names["pool"], "0", "delete", str(point_id)])
            _runner.run(["dmsetup", "message", names["pool"], "0", "create_snap", str(point_id), "0"])
    era = era_status(mirror).current_era
    point = RecoveryPoint(point_id, taken, era, hooks)
    return write_index(md_path, replace(index, points=(*index.points, point), next_id=point_id + 1))


def record_hooks(md_path: str, index: CdpIndex, point_id: int, hooks: str) -> CdpIndex:
    """A point's hooks' outcome changed (its after-hook failed once it was taken)."""
    points = tuple(replace(p, hooks=hooks) if p.id == point_id else p for p in index.points)
    return write_index(md_path, replace(index, points=points))


def delete_points(mirror: str, md_path: str, index: CdpIndex, doomed: list[RecoveryPoint]) -> CdpIndex:
    """Forget points (index first: a crash in between leaves an orphan snapshot, not a dangling point)."""
    if not doomed:
        return index
    gone = {p.id for p in doomed}
    index = write_index(md_path, replace(index, points=tuple(p for p in index.points if p.id not in gone)))
    pool = stack_names(mirror)["pool"]
    for point in doomed:
        view = view_name(mirror, point.id)
        if dm_exists(view):
            remove_dm(view)
        _runner.run(["dmsetup", "message", pool, "0", "delete", str(point.id)], ok_codes=[0, 1])
    return index


def changed_since(mirror: str, point: RecoveryPoint, plan: Layout) -> list[tuple[int, int]]:
    """Byte ranges (offset, length) of the volume written since `point`, at era-block granularity."""
    name = stack_names(mirror)["volume"]
    emeta = f"/dev/mapper/{stack_names(mirror)['emeta']}"
    # The current era's writes reach the metadata at a checkpoint; then read a snapshot of it.
    _runner.run(["dmsetup", "message", name, "0", "checkpoint"])
    _runner.run(["dmsetup", "message", name, "0", "take_metadata_snap"])
    try:
        out = _runner.run(
            ["era_invalidate", "--metadata-snapshot", "--written-since", str(point.era), emeta], timeout=600
        ).stdout
    finally:
        _runner.run(["dmsetup", "message", name, "0", "drop_metadata_snap"])
    return changed_bytes(parse_era_invalidate(out), plan.era_block, plan.volume_sectors * 512)


def view(mirror: str, plan: Layout, point: RecoveryPoint) -> str:
    """The point as a read-only device; its path."""
    name = view_name(mirror, point.id)
    if not dm_exists(name):
        table = snapshot_table(mirror, plan, point.id)
        _runner.run(["dmsetup", "create", "--readonly", name, "--table", table])
    return f"/dev/mapper/{name}"


def copy_ranges(source: str, target: str, ranges: list[tuple[int, int]]) -> int:
    """Copy byte ranges from one device to another, O_DIRECT; the bytes copied."""
    buffer = mmap.mmap(-1, COPY_BLOCK)
    copied = 0
    src = os.open(source, os.O_RDONLY | os.O_DIRECT)
    dst = os.open(target, os.O_WRONLY | os.O_DIRECT)
    try:
        for offset, length in ranges:
            end = offset + length
            while offset < end:
                size = min(COPY_BLOCK, end - offset)
                view_ = memoryview(buffer)[:size]
                if os.preadv(src, [view_], offset) != size:
                    raise CdpError(f"short read from {source} at {offset}")
                os.pwritev(dst, [view_], offset)
                offset += size
                copied += size
        os.fsync(dst)
    finally:
        os.close(src)
        os.close(dst)
    return copied


def open_count(name: str) -> int:
    """How many openers a dm device has (a mounted filesystem counts)."""
    out = _runner.run(["dmsetup", "info", "-c", "--noheadings", "-o", "open", name]).stdout
    return int(out.strip() or 0)


@dataclass(frozen=True)
class Rollback:
    """What a rollback did."""

    undo_point: RecoveryPoint
    bytes_copied: int


def rollback(mirror: str, md_path: str, index: CdpIndex, point: RecoveryPoint) -> tuple[CdpIndex, Rollback]:
    """Make the volume equal to `point`, copying back only the blocks written since.

    First a point of the present is taken (the undo). The volume must not be
    open: a mounted filesystem would not see the blocks change under it.
    """
    name = stack_names(mirror)["volume"]
    if open_count(name):
        raise CdpError(f"{name} is open (mounted or in use): unmount it before a rollback")
    index = take_point(mirror, md_path, index)
    undo = index.points[-1]
    ranges = changed_since(mirror, point, index.layout)
    source = view(mirror, index.layout, point)
    try:
        copied = copy_ranges(source, f"/dev/mapper/{name}", ranges)
    finally:
        remove_view(mirror, point.id)
    return index, Rollback(undo, copied)


def md_sectors(md_path: str) -> int:
    """The mirror's size in sectors."""
    return int(_runner.run(["blockdev", "--getsz", md_path]).stdout)


def blank(md_path: str, length: int) -> bool:
    """Whether the first `length` bytes of the mirror (where the stack's metadata goes) are all zeros."""
    chunk = 4 * 1024 * 1024
    return not any(
        any(read_direct(md_path, offset, min(chunk, length - offset))) for offset in range(0, length, chunk)
    )


def kernel_path(md_path: str) -> str:
    """/dev/md/NAME resolved (for messages)."""
    return str(Path(md_path).resolve())


def remove_view(mirror: str, point: int) -> None:
    """Take a point's read-only device away again."""
    remove_dm(view_name(mirror, point))


def remove_dm(name: str) -> None:
    """Remove a dm device; `--retry`: udev's probe of a device just created or written to holds
    it open for a moment (seen in the lab: `remove ioctl ... Device or resource busy`)."""
    _runner.run(["dmsetup", "remove", "--retry", name], timeout=120)


def check_target(target: str, allow_destructive: bool, size: int) -> None:
    """A restore target: a block device of `size` bytes or more, unused, and blank unless allowed."""
    from remirror.facts.parsers import parse_wipefs_json

    real = Path(target).resolve()
    if not real.is_block_device():
        raise CdpError(f"{target}: not a block device")
    room = int(_runner.run(["blockdev", "--getsize64", str(real)]).stdout)
    if room < size:
        raise CdpError(f"{target}: {room} bytes, the point needs {size}")
    holders = list(Path(f"/sys/class/block/{real.name}/holders").glob("*"))
    if holders:
        raise CdpError(f"{target}: in use by {', '.join(h.name for h in holders)}: not a restore target")
    signatures = parse_wipefs_json(_runner.run(["wipefs", "--no-act", "--json", str(real)]).stdout)
    if signatures and not allow_destructive:
        raise CdpError(
            f"{target} carries a {signatures[0].describe()}: not overwritten without --allow-destructive"
        )


def ensure_stack(step: CdpStack) -> None:
    """The `cdp_stack` step: activate the stack the mirror carries, or create one where that is safe."""
    with index_locked(step.mirror, "agent: cdp_stack"):
        _ensure_stack(step)


def _ensure_stack(step: CdpStack) -> None:
    mirror, md_path = step.mirror, step.md
    index = read_index(md_path)
    if index is not None:
        if index.mirror != mirror:
            raise CdpError(f"{md_path} carries the CDP stack of mirror {index.mirror}, not {mirror}")
        if taken_down_mark(mirror).exists():
            if taken_down.FROM_ANOTHER_HOST:
                raise CdpError(
                    f"{mirror}'s points were taken down by this site's operator (`remirror cdp down"
                    " --leg`, or its destroy): `remirror cdp up --leg` there brings them back"
                )
            taken_down_mark(mirror).unlink()  # this site's own apply brings them back
        activate(mirror, md_path, index.layout, new=False)
        return
    plan = layout(md_sectors(md_path), step.chunk, step.history)
    if not (step.fresh or step.allow_data) and not blank(md_path, plan.data[0] * SECTOR):
        raise CdpError(
            f"{md_path} holds data where CDP's metadata goes: apply again, and the plan shows it"
            " as destructive"
        )
    taken_down_mark(mirror).unlink(missing_ok=True)  # no index: the mark refers to nothing here
    create(mirror, md_path, plan)


def deactivate_step(step: CdpDeactivate) -> None:
    """The `cdp_deactivate` step. A leg's own points (only this site's own `destroy` sends it
    for them: remirror.agent.policy) are marked taken down first, so that its `cdp run` does
    not bring them back under the disk its operator is done with."""
    with index_locked(step.mirror, "agent: cdp_deactivate"):
        if is_leg_points(step.mirror):
            mark_taken_down(step.mirror, "destroy")
        deactivate(step.mirror, list(step.views))


# What reads the CDP index, changes the pool and writes the index back (a point, a pruning,
# a rollback, a restore's view, the stack's set-up) holds this lock: two at once would
# each write the index they read, and one's points (or an undo point) would be lost.
INDEX_LOCK_WAIT = 60.0


@contextmanager
def index_locked(mirror: str, verb: str, wait: float = INDEX_LOCK_WAIT) -> Iterator[None]:
    """Hold `mirror`'s CDP index lock for the block (remirror.agent.lock), as `remirror VERB`."""
    with lock.holding(f"cdp-{mirror}", lock.holder(verb), wait):
        yield
