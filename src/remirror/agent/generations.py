"""Leg records on the devices themselves (docs/failover.md): read, and the steps that write them.

The formats are pure (remirror.facts.generations); here is only the I/O.
A record sits in the last MiB of the leg's device; a write goes to the slot
not holding the newest version, so a crash mid-write leaves the other.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from remirror.agent.digest import data_offset
from remirror.agent.direct import read_direct, write_direct
from remirror.errors import RemirrorError
from remirror.facts.generations import (
    RECORD_BYTES,
    RECORD_SLOT,
    SAVE_NAME,
    SAVED_DIR,
    LegRecord,
    MiB,
    decode_record,
    encode_record,
    first_record,
    record_offset,
    record_slot_for,
)
from remirror.facts.parsers import md_data_end, parse_bitmap_dirty, parse_bitmap_location
from remirror.files import only_ours
from remirror.runner.local import LocalRunner

if TYPE_CHECKING:  # the agent imports the catalogue where it decodes a step
    from remirror.protocol.steps import LegRecordCreate, LegRecordJoin, LegRecordPromote, SaveRanges

_runner = LocalRunner("agent")


def _size(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def read_record(path: str) -> LegRecord | None:
    """The leg record at the end of `path`, or None if it holds none (or has no room for one:
    a disk under a MiB, which the planner refuses as a leg)."""
    size = _size(path)
    if size < MiB:
        return None
    return decode_record(read_direct(path, record_offset(size), RECORD_BYTES))


def write_record(path: str, record: LegRecord) -> LegRecord:
    """Write the next version of `record` into the older slot; the version written."""
    record = replace(record, sequence=record.sequence + 1)
    offset = record_offset(_size(path)) + record_slot_for(record) * RECORD_SLOT
    write_direct(path, offset, encode_record(record))
    return record


def create_step(step: LegRecordCreate) -> None:
    """`leg_record_create`: generation 1 (the home primary) on every leg of a new array.

    `check_room`: the array runs already (its records were never written: a create cut
    short). Each leg is first checked to end md's data before the record's MiB: an array
    made otherwise (by hand, by an older tool) may use it, and the record would be written
    over the mirror's data.
    """
    now = time.time()
    if step.check_room:
        for path in step.devices:
            _check_room(path)
    for path in step.devices:
        # The new record must outrank whatever a mirror made on this disk before left in its
        # last MiB (wipefs clears the superblock, not the record): the newest slot is read by
        # its sequence, and a profile re-applied after `destroy` and a wipe derives the same
        # array UUID, so an old record with a higher sequence would name an old primary.
        earlier = read_record(path)
        record = first_record(step.mirror, step.array, step.site, now)
        write_record(path, replace(record, sequence=earlier.sequence if earlier is not None else 0))


def _check_room(path: str) -> None:
    examine = _runner.run(["mdadm", "--examine", path]).stdout
    end = md_data_end(examine)
    if end is None or end > record_offset(_size(path)):
        raise RemirrorError(
            f"{path}: md's data reaches into its last MiB (or its extent is unknown): no room for a"
            " leg record; this array was not made by remirror's apply, and it cannot be promoted"
            " safely (copy its data to a mirror apply builds)"
        )


def promote_step(step: LegRecordPromote) -> None:
    """`leg_record_promote`: a new generation naming `site` primary, on each of `devices`.

    Each device must hold a record of this array whose newest generation is
    `after` (what the plan saw): a leg that moved on since is not written,
    the promotion stops, and nothing of it is half-done on that leg.
    """
    now = time.time()
    for path in step.devices:
        record = read_record(path)
        if record is None or record.array_uuid != step.array:
            raise RemirrorError(f"{path}: no leg record of array {step.array} (was it made by remirror?)")
        if record.current.n != step.after:
            raise RemirrorError(
                f"{path}: its leg record moved on to generation {record.current.n} (site"
                f" {record.current.site}) since the plan saw {step.after}: plan again"
            )
        write_record(path, record.then(step.site, now, step.how, step.n))


def join_step(step: LegRecordJoin) -> None:
    """`leg_record_join`: a leg re-added to the array takes the array's generations (`source`:
    the primary's own leg). A leg that somehow knows a newer generation is never written over."""
    source = read_record(step.source)
    if source is None:
        return  # an array from before leg records: nothing to carry over
    joining = read_record(step.device)
    if joining is not None and joining.current.n > source.current.n:
        raise RemirrorError(
            f"{step.device} knows generation {joining.current.n}, newer than the array's"
            f" {source.current.n}: not writing over it"
        )
    sequence = joining.sequence if joining is not None else 0
    write_record(step.device, replace(source, sequence=sequence))


def save_ranges_step(step: SaveRanges) -> None:
    """`save_ranges`: before a leg's writes are discarded (`remirror resolve`), copy the ranges its
    own bitmap marks dirty (what it wrote that the kept side may lack) into SAVED_DIR/`save` here:
    `MIRROR-SITE.img` (sparse, at the array's offsets) and `MIRROR-SITE.json` (the ranges)."""
    leg = step.leg
    examine = _runner.run(["mdadm", "--examine", leg]).stdout
    sb_offset, bitmap_offset = parse_bitmap_location(examine)
    start = sb_offset + bitmap_offset
    bitmap = read_direct(leg, start - start % 4096, 4096 + 1024 * 1024)  # header + 8M chunks' bits
    ranges = parse_bitmap_dirty(bitmap[start % 4096 :])
    base = data_offset(leg)
    name = f"{step.mirror}-{step.site}"
    directory = open_save_directory(step.save)
    try:
        with _create_private(f"{name}.img", directory) as out:
            for offset, length in ranges:
                out.seek(offset)
                for at in range(offset, offset + length, 1024 * 1024):
                    size = min(1024 * 1024, offset + length - at)
                    out.write(read_direct(leg, base + at, size))
        manifest = {"mirror": step.mirror, "site": step.site, "leg": leg, "ranges": ranges}
        with _create_private(f"{name}.json", directory) as out:
            out.write((json.dumps(manifest, indent=1) + "\n").encode())
        os.fsync(directory)
    finally:
        os.close(directory)


def open_save_directory(name: str, root: Path | None = None) -> int:
    """A file descriptor of `resolve --save NAME`'s directory, `root`/NAME (SAVED_DIR), each created
    0700 if it is not there.

    The saved writes are the only copy of what a discarded leg held: never
    through a symlink (somebody else's idea of where they go), never into a
    directory another user owns or can write (they could swap the files).
    """
    root = SAVED_DIR if root is None else root
    if not isinstance(name, str) or not SAVE_NAME.fullmatch(name):
        raise RemirrorError(f"--save {name!r}: a name (letters, digits, '.', '_', '-'), not a path")
    where = root / name
    try:
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        raise RemirrorError(f"--save {name}: cannot create {root}: {error.strerror}") from None
    parent = _private_directory(str(root), None, root)
    try:
        try:
            os.mkdir(name, mode=0o700, dir_fd=parent)
        except FileExistsError:
            pass
        except OSError as error:
            raise RemirrorError(f"--save {name}: cannot create {where}: {error.strerror}") from None
        return _private_directory(name, parent, where)
    finally:
        os.close(parent)


def _private_directory(path: str, dir_fd: int | None, shown: Path) -> int:
    """An open directory, not through a symlink, root's (this process's owner's) alone."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)
    except OSError as error:
        link = shown.is_symlink()
        why = "a symlink" if link else error.strerror
        raise RemirrorError(f"--save: {shown} is not a directory remirror writes into ({why})") from None
    info = os.fstat(fd)
    if not only_ours(info):
        os.close(fd)
        raise RemirrorError(
            f"--save: {shown} is owned by uid {info.st_uid} with mode {info.st_mode & 0o777:o}: it must"
            f" be {os.geteuid()}'s and writable by nobody else"
        )
    return fd


@contextmanager
def _create_private(name: str, directory: int) -> Iterator[BinaryIO]:
    """A new file `name` in `directory`, 0600, durable when the block ends; never an existing
    file or a symlink's target."""
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=directory)
    except FileExistsError:
        raise RemirrorError(
            f"{name} is already in the --save directory (an earlier save?): move it aside first"
        ) from None
    with os.fdopen(fd, "wb") as out:
        yield out
        out.flush()
        os.fsync(out.fileno())
