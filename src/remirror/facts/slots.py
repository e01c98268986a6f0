"""Small records kept on disks in two alternating slots: CDP's index of points, the leg records.

A slot is: magic (8 bytes), sequence (u64), payload length (u32), sha256 of
the payload, then the JSON payload, padded to the slot's size. Each write
goes to the slot not holding the newest version, so a write cut short by a
crash leaves the other slot intact; a reader takes the intact slot with the
highest sequence. Pure: bytes in, bytes out.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

SLOTS = 2
_HEADER = struct.Struct("<8sQI32s")


def encode_slot(magic: bytes, sequence: int, body: dict[str, Any], slot_size: int, what: str) -> bytes:
    """One slot's bytes; ValueError naming `what` when the body does not fit."""
    payload = json.dumps(body, separators=(",", ":")).encode()
    header = _HEADER.pack(magic, sequence, len(payload), hashlib.sha256(payload).digest())
    if len(header) + len(payload) > slot_size:
        raise ValueError(f"{what} does not fit in {slot_size} bytes")
    return (header + payload).ljust(slot_size, b"\0")


def decode_slots(magic: bytes, data: bytes, slot_size: int) -> tuple[int, dict[str, Any]] | None:
    """(sequence, body) of the newest intact slot in `data`, or None if neither holds one."""
    found = []
    for slot in range(SLOTS):
        raw = data[slot * slot_size : (slot + 1) * slot_size]
        if len(raw) < _HEADER.size:
            continue
        found_magic, sequence, length, digest = _HEADER.unpack_from(raw)
        payload = raw[_HEADER.size : _HEADER.size + length]
        if found_magic != magic or len(payload) != length or hashlib.sha256(payload).digest() != digest:
            continue
        found.append((sequence, json.loads(payload)))
    return max(found, key=lambda pair: pair[0]) if found else None


def slot_for(sequence: int) -> int:
    """The slot version `sequence` goes to: alternate, the first write (1) to slot 0."""
    return (sequence - 1) % SLOTS
