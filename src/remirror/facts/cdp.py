"""CDP's facts: dm-era and dm-thin status lines, era_invalidate's block list, the index of points.

Pure: text or bytes in, records out (formats recorded on the lab kernel by
tests/unit/fixtures/lab-6.1/record-cdp.sh). The design is docs/cdp.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from remirror.facts.parsers import ParseError
from remirror.facts.slots import SLOTS, decode_slots, encode_slot, slot_for


@dataclass(frozen=True)
class EraStatus:
    """`dmsetup status` of a dm-era device: `0 LEN era 8 USED/TOTAL CURRENT_ERA HELD_ROOT|-`."""

    current_era: int
    metadata_used: int  # metadata blocks (4KiB)
    metadata_total: int
    metadata_snap_held: bool  # a userland metadata snapshot is held (drop it before taking another)


def parse_era_status(text: str) -> EraStatus:
    """Read one dm-era status line (Documentation/admin-guide/device-mapper/era.rst)."""
    fields = text.split()
    try:
        if fields[2] != "era":
            raise ValueError(fields[2])
        used, _, total = fields[4].partition("/")
        return EraStatus(int(fields[5]), int(used), int(total), fields[6] != "-")
    except (IndexError, ValueError):
        raise ParseError(f"not a dm-era status line: {text.strip()!r}") from None


@dataclass(frozen=True)
class ThinPoolStatus:
    """`dmsetup status` of a thin pool (Documentation/admin-guide/device-mapper/thin-provisioning.rst).

    `0 LEN thin-pool TRANSACTION META_USED/META_TOTAL DATA_USED/DATA_TOTAL HELD_ROOT
    rw|ro|out_of_data_space|Fail [no_]discard_passdown error|queue_if_no_space
    needs_check|- METADATA_LOW_WATERMARK`; data in pool chunks, metadata in 4KiB blocks.
    """

    transaction: int
    metadata_used: int
    metadata_total: int
    data_used: int
    data_total: int
    mode: str  # rw, ro, out_of_data_space, Fail
    needs_check: bool = False

    @property
    def healthy(self) -> bool:
        """Writable and not asking for a metadata check."""
        return self.mode == "rw" and not self.needs_check


def parse_thin_pool_status(text: str) -> ThinPoolStatus:
    """Read one thin-pool status line; a failed pool prints only `Fail`."""
    fields = text.split()
    try:
        if fields[2] != "thin-pool":
            raise ValueError(fields[2])
        if fields[3] == "Fail":
            return ThinPoolStatus(0, 0, 0, 0, 0, "Fail")
        meta_used, _, meta_total = fields[4].partition("/")
        data_used, _, data_total = fields[5].partition("/")
        return ThinPoolStatus(
            transaction=int(fields[3]),
            metadata_used=int(meta_used),
            metadata_total=int(meta_total),
            data_used=int(data_used),
            data_total=int(data_total),
            mode=fields[7],
            needs_check="needs_check" in fields[8:],
        )
    except (IndexError, ValueError):
        raise ParseError(f"not a thin-pool status line: {text.strip()!r}") from None


# era_invalidate prints `<block block="B"/>` and `<range begin="B" end="E"/>` (E exclusive);
# the lab's 0.9 tools put spaces around the range's `=`.
_BLOCK = re.compile(r'<block\s+block\s*=\s*"(\d+)"\s*/>')
_RANGE = re.compile(r'<range\s+begin\s*=\s*"(\d+)"\s+end\s*=\s*"(\d+)"\s*/>')


def parse_era_invalidate(text: str) -> list[tuple[int, int]]:
    """The era blocks era_invalidate lists, as sorted, merged [begin, end) ranges."""
    if "<blocks>" not in text and "<blocks/>" not in text:
        raise ParseError(f"not era_invalidate output: {text.strip()[:80]!r}")
    ranges = [(int(b), int(b) + 1) for b in _BLOCK.findall(text)]
    ranges += [(int(b), int(e)) for b, e in _RANGE.findall(text)]
    merged: list[tuple[int, int]] = []
    for begin, end in sorted(ranges):
        if merged and begin <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((begin, end))
    return merged


@dataclass(frozen=True)
class RecoveryPoint:
    """One point: its thin snapshot id, when it was taken (epoch seconds), the era that began then.

    Blocks whose era is at least `era` were written after the point.
    """

    id: int
    time: float
    era: int


@dataclass(frozen=True)
class Layout:
    """Where a CDP stack's slices lie on the mirror, in sectors; the volume's size; the chunk (bytes).

    Decided when the stack is created (remirror.plan.cdp.layout) and recorded
    in the index, so that later profile changes cannot move data.
    """

    chunk: int
    index: tuple[int, int]  # (start, length)
    tmeta: tuple[int, int]
    emeta: tuple[int, int]
    data: tuple[int, int]
    volume_sectors: int

    @property
    def chunk_sectors(self) -> int:
        """The chunk in sectors (pool block and era block)."""
        return self.chunk // 512

    def as_json(self) -> dict[str, Any]:
        """For the index."""
        return {
            "chunk": self.chunk,
            "index": list(self.index),
            "tmeta": list(self.tmeta),
            "emeta": list(self.emeta),
            "data": list(self.data),
            "volume_sectors": self.volume_sectors,
        }

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Layout:
        """From the index."""

        def pair(key: str) -> tuple[int, int]:
            start, length = body[key]
            return int(start), int(length)

        return cls(
            int(body["chunk"]),
            pair("index"),
            pair("tmeta"),
            pair("emeta"),
            pair("data"),
            int(body["volume_sectors"]),
        )


@dataclass(frozen=True)
class CdpIndex:
    """The points of one mirror, as kept in the index slice on the mirror itself."""

    mirror: str
    layout: Layout
    points: tuple[RecoveryPoint, ...] = ()
    next_id: int = 1  # thin id 0 is the volume
    sequence: int = 0  # bumped on every write; the newer of the two slots wins

    def point(self, key: str) -> RecoveryPoint | None:
        """A point by its id (`7`, `#7`)."""
        wanted = key.lstrip("#")
        return next((p for p in self.points if str(p.id) == wanted), None)

    def at_or_before(self, when: float) -> RecoveryPoint | None:
        """The newest point taken at or before `when`."""
        earlier = [p for p in self.points if p.time <= when]
        return max(earlier, key=lambda p: p.time) if earlier else None


# The index slice holds two slots (remirror.facts.slots): a crash mid-write leaves one intact.
INDEX_MAGIC = b"RMRCDP01"
INDEX_SLOTS = SLOTS


def encode_index(index: CdpIndex, slot_size: int) -> bytes:
    """One slot's bytes (padded to `slot_size`)."""
    body = {
        "mirror": index.mirror,
        "layout": index.layout.as_json(),
        "next_id": index.next_id,
        # compact: [id, time, era] per point; a week of points a minute apart is ~300KiB
        "points": [[p.id, round(p.time, 3), p.era] for p in index.points],
    }
    return encode_slot(
        INDEX_MAGIC, index.sequence, body, slot_size, f"the index of {len(index.points)} points"
    )


def decode_index(data: bytes, slot_size: int) -> CdpIndex | None:
    """The newest intact slot of an index slice, or None if neither slot holds one."""
    found = decode_slots(INDEX_MAGIC, data, slot_size)
    if found is None:
        return None
    sequence, body = found
    return CdpIndex(
        mirror=body["mirror"],
        layout=Layout.from_json(body["layout"]),
        points=tuple(RecoveryPoint(int(i), float(t), int(e)) for i, t, e in body["points"]),
        next_id=body["next_id"],
        sequence=sequence,
    )


def index_slot_for(index: CdpIndex) -> int:
    """The slot a write of `index` goes to (slot 0, at the mirror's first sector, first: a new
    stack shows its magic there at once)."""
    return slot_for(index.sequence)


@dataclass(frozen=True)
class CdpPoints:
    """A mirror's points in short, as observe reports them (the index itself stays on the site)."""

    count: int
    oldest: float | None  # epoch seconds
    newest: float | None

    @classmethod
    def of(cls, index: CdpIndex) -> CdpPoints:
        """The summary of an index."""
        times = [p.time for p in index.points]
        return cls(len(times), min(times, default=None), max(times, default=None))
