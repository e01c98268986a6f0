"""The agent's `digest` op: hash this site's leg of a mirror in chunks, for `remirror verify`.

Reads the leg's disk with O_DIRECT (past the page cache, so that what is
hashed is what is on the disk) from md's data offset, so that byte N of the
mirror device is byte N of what is hashed on every leg. Only the digests go
back to the controller.
"""

from __future__ import annotations

import hashlib
import mmap
import os
from typing import Any

from remirror.errors import RemirrorError
from remirror.facts.parsers import parse_data_offset
from remirror.runner.local import LocalRunner

_run = LocalRunner("agent").run
DIGEST_BYTES = 16  # blake2b-128: collisions are not a concern between two copies of one disk


def data_offset(disk: str) -> int:
    """Where md keeps the array's data on a member disk, in bytes (`mdadm --examine`)."""
    offset = parse_data_offset(_run(["mdadm", "--examine", disk], ok_codes=(0, 1)).stdout)
    if offset is None:
        raise RemirrorError(f"{disk} carries no md superblock with a data offset")
    return offset


def digests(request: dict[str, Any]) -> dict[str, Any]:
    """`{"disk", "spans": [[offset, length], ...], "raw"}` -> one hex digest per span: of the
    mirror's data on a leg, or (`raw`) of the disk from its byte 0: a seed's catch-up compares
    legs before the array is made over them (remirror.catch_up)."""
    disk = request["disk"]
    base = 0 if request.get("raw") is True else data_offset(disk)
    spans = [(int(offset), int(length)) for offset, length in request["spans"]]
    largest = max((length for _, length in spans), default=0)
    buffer = mmap.mmap(-1, max(largest, mmap.PAGESIZE))  # page-aligned, as O_DIRECT wants
    fd = os.open(disk, os.O_RDONLY | os.O_DIRECT)
    try:
        out = []
        for offset, length in spans:
            view = memoryview(buffer)[:length]
            try:  # released before the buffer closes, also on an error (else that hides it)
                done = os.preadv(fd, [view], base + offset)
                if done != length:
                    raise RemirrorError(f"{disk}: short read at {base + offset}: {done} of {length} bytes")
                out.append(hashlib.blake2b(view, digest_size=DIGEST_BYTES).hexdigest())
            finally:
                view.release()
    finally:
        os.close(fd)
        buffer.close()
    return {"data_offset": base, "digests": out}
