"""`remirror estimate`: what a mirror will ask of the link, from the primary's own writes. Pure.

In: samples of the primary's write counters over a window (the agent reads
/sys/class/block/DEV/stat: Documentation/block/stat.rst), the link's rate and
round trip, and the mirror's settings. Out: how long the initial sync takes,
how long a resync after an outage of a given length takes, whether async
mode's write-behind keeps up at the busiest moment, and whether sync mode
fits the link at all. The figures are estimates from one window of load: a
window that missed the nightly backup misses its writes too.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

SECTOR = 512


@dataclass(frozen=True)
class Sample:
    """A device's write counters at a moment: completed writes and sectors written."""

    at: float  # seconds, any monotonic origin
    writes: int
    sectors: int


@dataclass(frozen=True)
class WriteLoad:
    """Writes to the primary over a window: the mean, and the busiest interval between samples."""

    seconds: float
    mean_bytes: float  # per second
    peak_bytes: float
    mean_writes: float  # per second
    peak_writes: float

    @property
    def write_size(self) -> float:
        """The mean bytes per write (4 KiB when there were none: a small-write guess)."""
        return self.mean_bytes / self.mean_writes if self.mean_writes else 4096.0


def write_load(samples: Sequence[Sample]) -> WriteLoad:
    """The load the samples show (at least two, in time order; a counter that went back, as
    when the device was re-created, counts that interval as idle)."""
    if len(samples) < 2:
        raise ValueError("a write load needs two samples or more")
    seconds = samples[-1].at - samples[0].at
    if seconds <= 0:
        raise ValueError("the samples span no time")
    # Per interval: (seconds, bytes, writes).
    spans = [
        (b.at - a.at, max(0, b.sectors - a.sectors) * SECTOR, max(0, b.writes - a.writes))
        for a, b in itertools.pairwise(samples)
        if b.at > a.at
    ]
    return WriteLoad(
        seconds=seconds,
        mean_bytes=sum(s[1] for s in spans) / seconds,
        peak_bytes=max(s[1] / s[0] for s in spans),
        mean_writes=sum(s[2] for s in spans) / seconds,
        peak_writes=max(s[2] / s[0] for s in spans),
    )


@dataclass(frozen=True)
class Estimate:
    """One mirror's estimate. Times are None where the answer is "never": the primary's writes
    alone take the whole link, so a sync cannot gain on them."""

    mirror: str
    mode: str  # sync | async
    disk_bytes: int
    load: WriteLoad
    link_bytes: float  # per second
    link_measured: bool
    rtt_seconds: float | None
    resync_max: int | None  # bytes per second, the profile's
    bitmap_chunk: int
    write_behind: int  # md's limit, in writes (async)
    outage_seconds: float

    @property
    def sync_rate(self) -> float:
        """What a resync can copy per second: the link less the primary's own writes (which go
        to the replica too), and no more than `resync_max`."""
        room = self.link_bytes - self.load.mean_bytes
        return max(0.0, min(room, self.resync_max if self.resync_max is not None else math.inf))

    @property
    def initial_sync_seconds(self) -> float | None:
        return self.disk_bytes / self.sync_rate if self.sync_rate > 0 else None

    @property
    def outage_dirty_bytes(self) -> int:
        """What an outage of `outage_seconds` leaves to resync: the bytes written, in whole bitmap
        chunks, at most the disk. Writes scattered over many chunks leave more (each dirties
        its whole chunk); writes that rewrite the same places leave less."""
        written = self.load.mean_bytes * self.outage_seconds
        chunks = math.ceil(written / self.bitmap_chunk) if written > 0 else 0
        return min(self.disk_bytes, chunks * self.bitmap_chunk)

    @property
    def resync_seconds(self) -> float | None:
        if not self.outage_dirty_bytes:
            return 0.0
        return self.outage_dirty_bytes / self.sync_rate if self.sync_rate > 0 else None

    @property
    def peak_excess_bytes(self) -> float:
        """How much faster than the link the primary writes at its busiest (0 when it does not)."""
        return max(0.0, self.load.peak_bytes - self.link_bytes)

    @property
    def write_behind_full_seconds(self) -> float | None:
        """Async: how long the busiest interval's pace takes to fill md's write-behind (then
        writes wait for the link as in sync mode); None when the link keeps up."""
        if not self.peak_excess_bytes:
            return None
        return self.write_behind / (self.peak_excess_bytes / self.load.write_size)

    @property
    def sync_fits(self) -> bool:
        """Whether the link carries the busiest interval's writes as they come (sync mode)."""
        return self.load.peak_bytes <= self.link_bytes

    @property
    def sync_write_delay_seconds(self) -> float | None:
        """What sync mode adds to each write at least: a round trip and the write's time on the link."""
        if self.rtt_seconds is None:
            return None
        return self.rtt_seconds + self.load.write_size / self.link_bytes
