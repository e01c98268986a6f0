"""Reads and writes of small on-disk records past the page cache (O_DIRECT).

The CDP index and the leg records are read on one host and written on
another (a replica's leg through its iSCSI disk): the page cache of either
would hide the other's writes.
"""

from __future__ import annotations

import mmap
import os


def read_direct(path: str, offset: int, length: int) -> bytes:
    """`length` bytes of a block device at `offset` (both multiples of 4 KiB)."""
    buffer = mmap.mmap(-1, length)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        os.preadv(fd, [buffer], offset)
    finally:
        os.close(fd)
    return bytes(buffer)


def first_nonzero(path: str, chunk: int = 4 * 1024 * 1024) -> int | None:
    """The offset of the first byte of a device that is not zero, None when every byte is."""
    buffer, zeros = mmap.mmap(-1, chunk), bytes(chunk)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    try:
        offset = 0
        while True:
            got = os.preadv(fd, [buffer], offset)
            if got <= 0:
                return None
            # Compared and stripped in C: a byte at a time in Python would take hours for a disk.
            data = buffer[:got]
            if data != zeros[:got]:
                return offset + got - len(data.lstrip(b"\0"))
            offset += got
    finally:
        os.close(fd)


def write_direct(path: str, offset: int, data: bytes) -> None:
    """Write `data` at `offset`, durable when this returns (O_DSYNC)."""
    buffer = mmap.mmap(-1, len(data))
    buffer[:] = data
    fd = os.open(path, os.O_WRONLY | os.O_DIRECT | os.O_DSYNC)
    try:
        os.pwritev(fd, [buffer], offset)
    finally:
        os.close(fd)
