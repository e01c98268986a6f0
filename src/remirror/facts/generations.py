"""Leg records: which site was primary, in which generation, since when (docs/failover.md).

Each leg of a mirror carries one in the last MiB of its device, where md
never writes (`apply` creates arrays that stop short of it). md's superblock
has no room for it, and md's event counts do not say who wrote last. Pure:
bytes in, records out; the device work is in remirror.agent.generations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from remirror.facts.slots import SLOTS, decode_slots, encode_slot, slot_for

MiB = 1024 * 1024
RECORD_MAGIC = b"RMRLEG01"
RECORD_SLOT = 16 * 1024  # two slots at the start of the reserved MiB
MAX_GENERATIONS = 32  # older ones are dropped: only the recent history decides anything
HOW = ("create", "planned", "forced", "resolve", "failback")
# Where `resolve --save NAME` keeps a discarded leg's writes on its site: SAVED_DIR/NAME. One
# directory of remirror's, never a path a controller names (docs/security.md).
SAVED_DIR = Path("/var/lib/remirror/saved")
SAVE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


@dataclass(frozen=True)
class Generation:
    """A period in which one site was the mirror's primary, from `since` (epoch seconds)."""

    n: int
    site: str
    since: float
    how: str  # one of HOW: what started it


@dataclass(frozen=True)
class LegRecord:
    """One leg's history of generations, oldest first."""

    mirror: str
    array_uuid: str
    generations: tuple[Generation, ...]
    sequence: int = 0  # bumped on every write; the newer slot wins

    @property
    def current(self) -> Generation:
        """The newest generation this leg knows."""
        return self.generations[-1]

    def knows(self, generation: Generation) -> bool:
        """Whether `generation` is in this leg's history (same number and site)."""
        return any(g.n == generation.n and g.site == generation.site for g in self.generations)

    def then(self, site: str, since: float, how: str, n: int | None = None) -> LegRecord:
        """This record with a new generation naming `site` primary: number `n`, by default the next."""
        new = Generation(n if n is not None else self.current.n + 1, site, since, how)
        return replace(self, generations=(*self.generations, new)[-MAX_GENERATIONS:])


def first_record(mirror: str, array_uuid: str, site: str, since: float) -> LegRecord:
    """The record `CreateArray` writes on every leg: generation 1, the home primary."""
    return LegRecord(mirror, array_uuid, (Generation(1, site, since, "create"),))


def record_offset(device_bytes: int) -> int:
    """Where a device's leg record starts: its last whole MiB."""
    return (device_bytes // MiB - 1) * MiB


def record_json(record: LegRecord) -> dict[str, Any]:
    """The record as JSON (on the disk, and from an agent to the controller)."""
    return {
        "mirror": record.mirror,
        "array": record.array_uuid,
        "sequence": record.sequence,
        "generations": [
            {"n": g.n, "site": g.site, "since": round(g.since, 3), "how": g.how} for g in record.generations
        ],
    }


def record_from_json(body: dict[str, Any]) -> LegRecord | None:
    """The record in `body`; None when it names no generation."""
    generations = tuple(
        Generation(int(g["n"]), str(g["site"]), float(g["since"]), str(g["how"])) for g in body["generations"]
    )
    if not generations:
        return None
    return LegRecord(str(body["mirror"]), str(body["array"]), generations, int(body.get("sequence", 0)))


def encode_record(record: LegRecord) -> bytes:
    """One slot's bytes."""
    return encode_slot(RECORD_MAGIC, record.sequence, record_json(record), RECORD_SLOT, "the leg record")


def decode_record(data: bytes) -> LegRecord | None:
    """The newest intact record in the two slots, or None if there is none."""
    found = decode_slots(RECORD_MAGIC, data, RECORD_SLOT)
    if found is None:
        return None
    sequence, body = found
    return record_from_json({**body, "sequence": sequence})


def record_slot_for(record: LegRecord) -> int:
    """The slot a write of `record` goes to."""
    return slot_for(record.sequence)


RECORD_BYTES = RECORD_SLOT * SLOTS
