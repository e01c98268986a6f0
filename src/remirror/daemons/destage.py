"""Destage when idle: write a cache back once its device has been quiet for a while.

The DCD seed destages its log to the data disk when the disk is idle.
dm-writecache writes back only by watermark, by `max_age` or on a `flush`
message; `remirror destage` adds the seed's behaviour for legs whose
profile says `destage: idle`: it samples the cache device's I/O counters
(/sys/block/dm-N/stat) on this site and, after `idle_after` without a
completed or in-flight request, sends `flush` if blocks are dirty. It runs
on each site that has such a cache (contrib/systemd/remirror-destage@.service),
locally: a sample every second must not cross a WAN.

`Quiet` is the pure decision; `run` is the loop around it.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from remirror.errors import CommandError
from remirror.facts.dm import parse_cache_status
from remirror.facts.parsers import parse_block_stat
from remirror.profile.model import Profile
from remirror.profile.names import cache_name
from remirror.runner.local import LocalRunner
from remirror.systemd import notify, watchdog_period


@dataclass
class Quiet:
    """Whether a device has been idle long enough to destage, from its counters over time.

    `counters`: the requests it completed so far (reads + writes), and those
    in flight. Idle means: nothing completed and nothing in flight since
    `since`. After a destage it waits for new writes before the next one
    (flushing a clean cache again and again would be noise).
    """

    idle_after: float
    last: tuple[int, int] | None = None
    since: float = 0.0
    destaged: bool = field(default=False)

    def due(self, completed: int, in_flight: int, now: float) -> bool:
        """Whether to destage now; call with fresh counters."""
        if (completed, in_flight) != self.last or in_flight:
            if self.last is not None and completed != self.last[0]:
                self.destaged = False  # new I/O: a later idle spell destages again
            self.last = (completed, in_flight)
            self.since = now
            return False
        return not self.destaged and now - self.since >= self.idle_after

    def done(self) -> None:
        """A destage was made: none again until new I/O and a new idle spell."""
        self.destaged = True


@dataclass(frozen=True)
class Watched:
    """A cache on this site that destages when idle."""

    name: str  # dm name
    idle_after: float


def local_caches(profile: Profile, site: str) -> list[Watched]:
    """The writecaches of `site`'s legs with `destage: idle`."""
    found = []
    for mirror in profile.mirrors:
        legs = mirror.legs
        for leg in legs:
            if leg.site == site and leg.cache is not None and leg.cache.destage == "idle":
                found.append(Watched(cache_name(mirror, site), leg.cache.idle_after))
    return found


def _kernel_name(dm_name: str) -> str | None:
    for name_file in Path("/sys/block").glob("dm-*/dm/name"):
        if name_file.read_text().strip() == dm_name:
            return name_file.parent.parent.name
    return None


def run(
    caches: list[Watched],
    stop: threading.Event,
    emit: Callable[[str], None],
    period: float = 1.0,
    changed: Callable[[], bool] = lambda: False,
) -> None:
    """Sample every `period` seconds until `stop` is set or the profile `changed`; destage each
    cache when it is due.

    One JSON line through `emit` per destage (for the journal).
    """
    runner = LocalRunner("destage")
    quiet = {c.name: Quiet(c.idle_after) for c in caches}
    ping = watchdog_period()
    notify("READY=1")
    while not stop.is_set() and not changed():
        for cache in caches:
            kernel = _kernel_name(cache.name)
            if kernel is None:
                continue  # not built (yet): apply makes it
            counters = parse_block_stat(Path(f"/sys/block/{kernel}/stat").read_text())
            completed = counters.reads + counters.writes
            if quiet[cache.name].due(completed, counters.in_flight, time.monotonic()):
                # A big cache takes minutes to write back: the watchdog hears from us meanwhile.
                record: dict[str, object] = {}
                worker = threading.Thread(target=_destage, args=(runner, cache.name, record))
                worker.start()
                while worker.is_alive():
                    if ping is not None:
                        notify("WATCHDOG=1")
                    worker.join(period)
                emit(json.dumps(record))
                quiet[cache.name].done()
        if ping is not None:
            notify("WATCHDOG=1")
        stop.wait(period)
    if stop.is_set():
        notify("STOPPING=1")


def _destage(runner: LocalRunner, name: str, record: dict[str, object]) -> None:
    """Write everything back if anything is dirty; what happened goes into `record` (a log line)."""
    started = time.monotonic()
    try:
        status = parse_cache_status(runner.run(["dmsetup", "status", name]).stdout)
        if not status.dirty:
            record.update({"event": "idle", "cache": name, "dirty_blocks": 0})
            return
        # `flush` writes every dirty block back and returns when it is done.
        runner.run(["dmsetup", "message", name, "0", "flush"], timeout=3600)
    except CommandError as error:
        record.update({"event": "destage_failed", "cache": name, "error": error.one_line()})
        return
    seconds = round(time.monotonic() - started, 1)
    record.update({"event": "destaged", "cache": name, "dirty_blocks": status.dirty, "seconds": seconds})
