"""Leg records on the devices themselves (docs/failover.md): read, and the steps that write them.

The formats are pure (remirror.facts.generations); here is only the I/O.
A record sits in the last MiB of the leg's device; a write goes to the slot
not holding the newest version, so a crash mid-write leaves the other.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from remirror.agent.digest import data_offset
from remirror.agent.direct import read_direct, write_direct
from remirror.errors import RemirrorError
from remirror.facts.generations import (
    RECORD_BYTES,
    RECORD_SLOT,
    LegRecord,
    decode_record,
    encode_record,
    first_record,
    record_offset,
    record_slot_for,
)
from remirror.facts.parsers import parse_bitmap_dirty, parse_bitmap_location
from remirror.runner.local import LocalRunner

_runner = LocalRunner("agent")


def _size(path: str) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


def read_record(path: str) -> LegRecord | None:
    """The leg record at the end of `path`, or None if it holds none."""
    return decode_record(read_direct(path, record_offset(_size(path)), RECORD_BYTES))


def write_record(path: str, record: LegRecord) -> LegRecord:
    """Write the next version of `record` into the older slot; the version written."""
    record = replace(record, sequence=record.sequence + 1)
    offset = record_offset(_size(path)) + record_slot_for(record) * RECORD_SLOT
    write_direct(path, offset, encode_record(record))
    return record


def create_step(step: dict[str, Any]) -> None:
    """`leg_record_create`: generation 1 (the home primary) on every leg of a new array."""
    now = time.time()
    for path in step["devices"]:
        write_record(path, first_record(step["mirror"], step["array"], step["site"], now))


def promote_step(step: dict[str, Any]) -> None:
    """`leg_record_promote`: a new generation naming `site` primary, on each of `devices`.

    Each device must hold a record of this array whose newest generation is
    `after` (what the plan saw): a leg that moved on since is not written,
    the promotion stops, and nothing of it is half-done on that leg.
    """
    now = time.time()
    for path in step["devices"]:
        record = read_record(path)
        if record is None or record.array_uuid != step["array"]:
            raise RemirrorError(f"{path}: no leg record of array {step['array']} (was it made by remirror?)")
        if record.current.n != step["after"]:
            raise RemirrorError(
                f"{path}: its leg record moved on to generation {record.current.n} (site"
                f" {record.current.site}) since the plan saw {step['after']}: plan again"
            )
        write_record(path, record.then(step["site"], now, step["how"], step.get("n")))


def join_step(step: dict[str, Any]) -> None:
    """`leg_record_join`: a leg re-added to the array takes the array's generations (`source`:
    the primary's own leg). A leg that somehow knows a newer generation is never written over."""
    source = read_record(step["source"])
    if source is None:
        return  # an array from before leg records: nothing to carry over
    joining = read_record(step["device"])
    if joining is not None and joining.current.n > source.current.n:
        raise RemirrorError(
            f"{step['device']} knows generation {joining.current.n}, newer than the array's"
            f" {source.current.n}: not writing over it"
        )
    sequence = joining.sequence if joining is not None else 0
    write_record(step["device"], replace(source, sequence=sequence))


def save_ranges_step(step: dict[str, Any]) -> None:
    """`save_ranges`: before a leg's writes are discarded (`remirror resolve`), copy the ranges its
    own bitmap marks dirty (what it wrote that the kept side may lack) into `dir` on this site:
    `MIRROR-SITE.img` (sparse, at the array's offsets) and `MIRROR-SITE.json` (the ranges)."""
    leg = step["leg"]
    examine = _runner.run(["mdadm", "--examine", leg]).stdout
    sb_offset, bitmap_offset = parse_bitmap_location(examine)
    start = sb_offset + bitmap_offset
    bitmap = read_direct(leg, start - start % 4096, 4096 + 1024 * 1024)  # header + 8M chunks' bits
    ranges = parse_bitmap_dirty(bitmap[start % 4096 :])
    base = data_offset(leg)
    directory = Path(step["dir"])
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    name = f"{step['mirror']}-{step['site']}"
    image = directory / f"{name}.img"
    with image.open("wb") as out:
        os.fchmod(out.fileno(), 0o600)
        for offset, length in ranges:
            out.seek(offset)
            for at in range(offset, offset + length, 1024 * 1024):
                size = min(1024 * 1024, offset + length - at)
                out.write(read_direct(leg, base + at, size))
    manifest = {"mirror": step["mirror"], "site": step["site"], "leg": leg, "ranges": ranges}
    (directory / f"{name}.json").write_text(json.dumps(manifest, indent=1) + "\n")
