"""A device-mapper table, typed: the site writes its text from the fields. Pure.

The three targets remirror sends (linear, dm-writecache, dm-cache), each with
its devices (a path or MAJ:MIN, checked at the site against its scope), its
numbers and, for dm-writecache, its options by name. `text` writes the line
`dmsetup` takes; nothing else reaches it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

SECTOR = 512
# dm-writecache's options that take a number, and those that are flags (remirror.plan.cache).
# (`pause_writeback` and `start_sector`: a table someone else made, copied when it is drained.)
WRITECACHE_VALUED = frozenset(
    {"high_watermark", "low_watermark", "writeback_jobs", "autocommit_blocks", "autocommit_time", "max_age"}
    | {"pause_writeback", "start_sector"}
)
WRITECACHE_FLAGS = frozenset({"cleaner", "fua", "nofua", "metadata_only"})
DEVICES = {"linear": 1, "writecache": 2, "cache": 3}  # how many devices each target maps


@dataclass(frozen=True)
class DmTarget:
    """One target line: `target` over `sectors`, onto `devices` in table order (linear: the disk;
    writecache: origin, fast; cache: metadata, fast, origin)."""

    target: Literal["linear", "writecache", "cache"]
    sectors: int
    devices: tuple[str, ...]
    offset: int = 0  # linear: where on its device, in sectors
    block: int = 0  # writecache, cache: the block size, bytes
    options: Mapping[str, str] = field(default_factory=dict)  # writecache: name -> value ("": a flag)
    policy: Literal["smq", "cleaner"] = "smq"  # cache: `cleaner` writes it back

    def text(self) -> str:
        """The table `dmsetup create/load --table` takes."""
        if len(self.devices) != DEVICES[self.target]:
            raise ValueError(
                f"a {self.target} table maps {DEVICES[self.target]} device(s), not {len(self.devices)}"
            )
        if self.target == "linear":
            return f"0 {self.sectors} linear {self.devices[0]} {self.offset}"
        if self.target == "writecache":
            origin, fast = self.devices
            words = [w for key, value in self.options.items() for w in ([key, value] if value else [key])]
            return (
                f"0 {self.sectors} writecache s {origin} {fast} {self.block} {len(words)} {' '.join(words)}"
            )
        meta, fast, origin = self.devices
        blocks = self.block // SECTOR
        return f"0 {self.sectors} cache {meta} {fast} {origin} {blocks} 1 writeback {self.policy} 0"


def linear(sectors: int, device: str, offset: int = 0) -> DmTarget:
    """A linear mapping of `device` from sector `offset` (a removed cache leaves its disk so)."""
    return DmTarget("linear", sectors, (device,), offset=offset)


def writecache(sectors: int, origin: str, fast: str, block: int, options: Mapping[str, str]) -> DmTarget:
    """`0 LEN writecache s ORIGIN FAST BLOCK #OPT OPTIONS` (an option valued "" is a flag)."""
    return DmTarget("writecache", sectors, (origin, fast), block=block, options=dict(options))


def dm_cache(
    sectors: int, meta: str, fast: str, origin: str, block: int, policy: Literal["smq", "cleaner"] = "smq"
) -> DmTarget:
    """`0 LEN cache META FAST ORIGIN BLOCK_SECTORS 1 writeback POLICY 0` (policy `cleaner` drains)."""
    return DmTarget("cache", sectors, (meta, fast, origin), block=block, policy=policy)
