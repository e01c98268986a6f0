"""CDP's facts: dm-era and dm-thin status lines, era_invalidate's block list, the index of points.

Pure: text or bytes in, records out (formats recorded on the lab kernel by
tests/unit/fixtures/lab-6.1/record-cdp.sh). The design is docs/cdp.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from remirror.facts.parsers import ParseError


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
    hooks: str = ""  # its hooks' outcome: "clean", "failed", or "" (it had none): remirror.agent.hooks


@dataclass(frozen=True)
class Layout:
    """Where a CDP stack's slices lie on the mirror, in sectors; the volume's size; the pool's
    chunk and the era's block (bytes).

    Decided when the stack is created (remirror.plan.cdp.layout) and recorded
    in the index, so that later profile changes cannot move data.
    """

    chunk: int
    index: tuple[int, int]  # (start, length)
    tmeta: tuple[int, int]
    emeta: tuple[int, int]
    data: tuple[int, int]
    volume_sectors: int
    era_block: int  # stacks built before 2026-11-26 have the chunk (their index has no era_block)

    @property
    def chunk_sectors(self) -> int:
        """The pool's chunk in sectors."""
        return self.chunk // 512

    @property
    def era_block_sectors(self) -> int:
        """The era's block in sectors."""
        return self.era_block // 512

    def as_json(self) -> dict[str, Any]:
        """For the index."""
        return {
            "chunk": self.chunk,
            "era_block": self.era_block,
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
            int(body.get("era_block", body["chunk"])),
        )


# The stack's layout on the mirror: decided once, when the stack is created, and recorded
# in the index (plan/cdp.py decides when; the agent builds it from these).

SECTOR = 512
MiB = 1024 * 1024
INDEX_BYTES = 4 * MiB  # two slots of 2 MiB: room for the 60,000 points a profile may keep
INDEX_SLOT = INDEX_BYTES // 2
MIN_POOL_METADATA = 16 * MiB
MIN_ERA_METADATA = 8 * MiB
# dm-era holds back the first write to each of its blocks in an era until it has committed
# its metadata (a flush of the mirror): after a point, with blocks as small as the pool's
# 64 KiB chunks, nearly every random write paid a commit on top of its copy-on-write. A
# block of 1 MiB makes that sixteen times rarer; the price is that `cdp changes` and a
# rollback see changes by the MiB (a rollback copies whole MiBs, the same bytes where
# nothing changed).
ERA_BLOCK = MiB


# A leg's own points (`replicas[].points`) are keyed MIRROR.SITE (remirror.profile.names.points_key):
# a dot that no mirror's name has, so they are never taken for a mirror's CDP.
LEG_POINTS_SEPARATOR = "."


def is_leg_points(name: str) -> bool:
    """Whether a stack is a leg's own points rather than a mirror's CDP. Its pool refuses writes
    when full instead of queueing them, and its points are pruned by age only, never early for
    space: a primary that rewrites the whole volume must not make the DR site drop the points
    from before (the replica's writes fail instead, and md marks the leg faulty)."""
    return LEG_POINTS_SEPARATOR in name


def stack_names(mirror: str) -> dict[str, str]:
    """The dm names of a mirror's CDP stack, in build order (the user's volume last).

    The index has no device of its own: it is read and written at the mirror's start.
    """
    base = f"remirror-{mirror}-cdp"
    return {
        "tmeta": f"{base}-tmeta",
        "emeta": f"{base}-emeta",
        "tdata": f"{base}-tdata",
        "pool": f"{base}-pool",
        "thin": f"{base}-thin",
        "volume": base,
    }


def view_name(mirror: str, point: int) -> str:
    """The read-only device of one point (`cdp restore --view`)."""
    return f"remirror-{mirror}-cdp-at-{point}"


def is_view(name: str, mirror: str) -> bool:
    """Whether dm device `name` is one point's view of `mirror`'s stack (view_name): exactly, its
    id in ASCII digits (the agent removes no other name: remirror.agent.policy)."""
    point = name.removeprefix(view_name(mirror, 0)[:-1])
    return point != name and point.isascii() and point.isdigit()


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def layout(md_sectors: int, chunk: int, history: int) -> Layout:
    """Cut an md device of `md_sectors` for CDP: `chunk` bytes, `history` % of the data for points.

    Metadata sizes follow LVM's rule of thumb for thin pools (64 bytes per
    data chunk, doubled for snapshots' divergence) and dm-era's needs (a
    4-byte era per block plus archived writesets), with floors that are
    ample for small mirrors. The era's block is ERA_BLOCK, or the chunk if
    that is larger.
    """
    chunks = md_sectors * SECTOR // chunk
    era_block = max(chunk, ERA_BLOCK)
    align = max(chunk, MiB)
    tmeta = max(MIN_POOL_METADATA, _round_up(chunks * 128, MiB))
    emeta = max(MIN_ERA_METADATA, _round_up(md_sectors * SECTOR // era_block * 8, MiB))
    data_start = _round_up(INDEX_BYTES + tmeta + emeta, align)
    data_bytes = (md_sectors * SECTOR - data_start) // chunk * chunk
    if data_bytes < 16 * chunk:
        raise ValueError(
            f"the mirror ({md_sectors * SECTOR // MiB} MiB) is too small for CDP: its metadata"
            f" alone takes {data_start // MiB} MiB"
        )
    volume = data_bytes * (100 - history) // 100 // chunk * chunk
    return Layout(
        chunk=chunk,
        index=(0, INDEX_BYTES // SECTOR),
        tmeta=(INDEX_BYTES // SECTOR, tmeta // SECTOR),
        emeta=((INDEX_BYTES + tmeta) // SECTOR, emeta // SECTOR),
        data=(data_start // SECTOR, data_bytes // SECTOR),
        volume_sectors=volume // SECTOR,
        era_block=era_block,
    )


def tables(mirror: str, md_path: str, plan: Layout) -> dict[str, str]:
    """Each stack device's table (by the keys of `stack_names`), in build order."""
    names = stack_names(mirror)
    low_water = max(1, plan.data[1] // plan.chunk_sectors // 10)  # chunks free when dm raises an event
    return {
        "tmeta": f"0 {plan.tmeta[1]} linear {md_path} {plan.tmeta[0]}",
        "emeta": f"0 {plan.emeta[1]} linear {md_path} {plan.emeta[0]}",
        "tdata": f"0 {plan.data[1]} linear {md_path} {plan.data[0]}",
        # New chunks are zeroed (a partial write never shows old data): no skip_block_zeroing.
        "pool": f"0 {plan.data[1]} thin-pool /dev/mapper/{names['tmeta']} /dev/mapper/{names['tdata']}"
        f" {plan.chunk_sectors} {low_water} " + ("1 error_if_no_space" if is_leg_points(mirror) else "0"),
        "thin": f"0 {plan.volume_sectors} thin /dev/mapper/{names['pool']} 0",
        "volume": f"0 {plan.volume_sectors} era /dev/mapper/{names['emeta']} /dev/mapper/{names['thin']}"
        f" {plan.era_block_sectors}",
    }


def snapshot_table(mirror: str, plan: Layout, point: int) -> str:
    """A point's snapshot as a device (activated read-only)."""
    return f"0 {plan.volume_sectors} thin /dev/mapper/{stack_names(mirror)['pool']} {point}"


def changed_bytes(blocks: list[tuple[int, int]], era_block: int, volume_bytes: int) -> list[tuple[int, int]]:
    """Era block ranges [begin, end) as byte ranges (offset, length), clipped to the volume."""
    out = []
    for begin, end in blocks:
        offset = begin * era_block
        length = min(end * era_block, volume_bytes) - offset
        if length > 0:
            out.append((offset, length))
    return out
