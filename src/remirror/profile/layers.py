"""What a profile stacks on a disk or a mirror: a cache in front of a leg (the seeds' disk
caching disk), continuous data protection on top of a mirror (docs/cache.md, docs/cdp.md)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from remirror.profile.base import ProfileModel
from remirror.profile.types import DevicePath, Duration, PositiveDuration, Size
from remirror.retention import Keep

# dm-writecache's own defaults (Documentation/admin-guide/device-mapper/writecache.rst)
# where remirror keeps them; see docs/cache.md for why each default is what it is.
WRITECACHE_BLOCK_SIZE = 4096
DM_CACHE_BLOCK_SIZE = 64 * 1024
# Keys that only dm-writecache understands (dm-cache has none of them).
WRITECACHE_ONLY = (
    "high_watermark",
    "low_watermark",
    "writeback_jobs",
    "autocommit_blocks",
    "autocommit_time",
    "max_age",
)


class Cache(ProfileModel):
    """A fast device in front of a leg's disk: the seeds' disk caching disk (DCD)."""

    type: Literal["writecache", "cache"] = Field(
        "writecache", description="dm-writecache (default) or dm-cache in writeback mode"
    )
    disk: DevicePath
    block_size: Size | None = Field(
        None,
        description=f"cache block: default {WRITECACHE_BLOCK_SIZE} (writecache, at most a page)"
        f" or {DM_CACHE_BLOCK_SIZE // 1024}KiB (cache, a multiple of 32KiB)",
    )
    high_watermark: int = Field(
        50, ge=1, le=100, description="% of cache blocks in use that starts writeback"
    )
    low_watermark: int = Field(45, ge=0, le=99, description="% in use at which writeback stops")
    writeback_jobs: int | None = Field(None, ge=1, description="blocks in flight during writeback")
    autocommit_blocks: int | None = Field(None, ge=1, description="commit after this many unflushed blocks")
    autocommit_time: PositiveDuration | None = Field(None, description="commit unflushed writes after this")
    max_age: PositiveDuration | None = Field(None, description="write back any block older than this")
    destage: Literal["watermark", "idle"] = Field(
        "watermark",
        description="watermark: the kernel writes back by watermark and max_age;"
        " idle: also write everything back once the device has been idle for idle_after",
    )
    idle_after: PositiveDuration = Field(5.0, description="quiet time that counts as idle (destage: idle)")

    @model_validator(mode="after")
    def _fits_the_type(self) -> Cache:
        if self.type == "cache":
            if self.destage == "idle":
                raise ValueError(
                    "destage: idle needs type writecache (dm-cache has no flush to destage with)"
                )
            given = [key for key in WRITECACHE_ONLY if key in self.model_fields_set]
            if given:
                raise ValueError(
                    f"{', '.join(given)}: only for type writecache (dm-cache has no such setting)"
                )
            if self.block_size is not None and (self.block_size < 32 * 1024 or self.block_size % (32 * 1024)):
                raise ValueError("block_size: dm-cache blocks are a multiple of 32KiB")
        elif self.block_size is not None and (
            self.block_size < 512 or self.block_size > 4096 or self.block_size & (self.block_size - 1)
        ):
            raise ValueError("block_size: a writecache block is a power of two from 512 to 4096 (a page)")
        if self.low_watermark >= self.high_watermark:
            raise ValueError(
                f"low_watermark ({self.low_watermark}) must be below high_watermark ({self.high_watermark})"
            )
        return self

    @property
    def effective_block_size(self) -> int:
        """The block size to build the cache with."""
        if self.block_size is not None:
            return self.block_size
        return WRITECACHE_BLOCK_SIZE if self.type == "writecache" else DM_CACHE_BLOCK_SIZE


# dm-thin's data block ("chunk") is a multiple of 64KiB; the era block is made the same.
CDP_CHUNK = 64 * 1024


# The forms `keep` takes: an age, or a grid (a mapping). Told apart by their shape, so that an
# error names the form written; the loader leaves these tags out of the key path it shows.
KEEP_AGE, KEEP_GRID = "<keep age>", "<keep grid>"


class KeepGrid(ProfileModel):
    """A retention grid (`keep: {all: 1h, hourly: 1d, daily: 30d, weekly: 12w}`): every point
    for `all`, then the first point of each hour, day (UTC) and week (UTC, from Monday) for as
    long as each says (remirror.retention.Keep)."""

    all: Duration = Field(0.0, description="every point is kept this long")
    hourly: Duration = Field(0.0, description="the first point of each hour is kept this long")
    daily: Duration = Field(0.0, description="the first point of each day (UTC) is kept this long")
    weekly: Duration = Field(
        0.0, description="the first point of each week (UTC, from Monday) is kept this long"
    )

    @model_validator(mode="after")
    def _coarser_keeps_longer(self) -> KeepGrid:
        given = [(name, age) for name, age in self.keep.as_json().items() if age > 0]
        if not given:
            raise ValueError("a grid keeps at least one tier (all, hourly, daily, weekly)")
        for (finer, finer_age), (coarser, coarser_age) in itertools.pairwise(given):
            if coarser_age <= finer_age:
                raise ValueError(
                    f"{coarser} ({coarser_age:g}s) must keep longer than {finer} ({finer_age:g}s)"
                )
        return self

    @property
    def keep(self) -> Keep:
        return Keep(self.all, self.hourly, self.daily, self.weekly)


class Hooks(ProfileModel):
    """Commands run around each point, or around a drill's checks (docs/cdp.md, "Hooks"): a
    `before` that flushes or freezes an application, an `after` that thaws it, run whatever
    happened in between."""

    before: str | None = Field(
        None,
        min_length=1,
        description="shell command line run before each point (flush, freeze) or a drill's checks"
        " (start a database on the copy); a point is clean only if it and `after` exit 0 in time",
    )
    after: str | None = Field(
        None,
        min_length=1,
        description="shell command line run after each point or drill, whatever happened (thaw, stop)",
    )
    timeout: PositiveDuration = Field(30.0, le=86400, description="each hook is killed after this long")

    @model_validator(mode="after")
    def _some_hook(self) -> Hooks:
        if self.before is None and self.after is None:
            raise ValueError("hooks without `before` or `after` run nothing")
        return self

    def as_json(self) -> dict[str, Any]:
        """As a request carries them (remirror.agent.hooks.Hooks reads it)."""
        return {"before": self.before, "after": self.after, "timeout": self.timeout}


class Cdp(ProfileModel):
    """Continuous data protection: recovery points within a window (docs/cdp.md)."""

    every: PositiveDuration = Field(description="a recovery point at least this often")
    keep: Annotated[
        Annotated[PositiveDuration, Tag(KEEP_AGE)] | Annotated[KeepGrid, Tag(KEEP_GRID)],
        Discriminator(lambda value: KEEP_GRID if isinstance(value, dict | KeepGrid) else KEEP_AGE),
    ] = Field(
        description="how long points are kept: an age (points older are pruned) or a grid"
        " ({all: 1h, hourly: 1d, daily: 30d, weekly: 12w})"
    )

    history: int = Field(
        25,
        ge=5,
        le=90,
        description="% of the pool's data kept for the points' history: the volume is that much"
        " smaller than the mirror",
    )
    chunk: Size = Field(
        CDP_CHUNK,
        description="thin-pool chunk and era block: the copy-on-write unit after a point"
        " (a multiple of 64KiB)",
    )

    hooks: Hooks | None = Field(
        None, description="commands run around each point: an application's flush and thaw"
    )

    @field_validator("chunk")
    @classmethod
    def _thin_chunk(cls, value: int) -> int:
        if value < CDP_CHUNK or value % CDP_CHUNK or value > 1024 * 1024 * 1024:
            raise ValueError("a thin-pool chunk is a multiple of 64KiB, at most 1GiB")
        return value

    @property
    def retention(self) -> Keep:
        """The retention as remirror.retention applies it."""
        return self.keep.keep if isinstance(self.keep, KeepGrid) else Keep(all=self.keep)

    def request(self) -> dict[str, Any]:
        """What a point and its pruning are asked with (remirror.agent.cdp_requests)."""
        return {
            "every": self.every,
            "keep": self.retention.as_json(),
            "hooks": self.hooks.as_json() if self.hooks is not None else None,
        }


class Points(Cdp):
    """A replica's own recovery points (`replicas[].points`, docs/security.md): CDP's stack under
    the leg, kept and pruned by its site alone, by age only. A full pool fails the replica's
    writes rather than drop a point, so it is reported before it fills."""

    pool_critical: int = Field(
        90,
        ge=50,
        le=99,
        description="% of the pool in use at which `check` is CRITICAL at every site (when it is"
        " full the replica's writes fail and the leg leaves the mirror): prune or keep less",
    )


DAY = 86400.0


class Drill(ProfileModel):
    """DR drills of a replica at its own site (docs/drill.md): its checks on a throwaway copy of
    one of the leg's own points, on a schedule the Ansible role installs."""

    every: PositiveDuration = Field(description="drill this often (the role's timer); 7d: weekly")
    run: list[str] = Field(
        default_factory=list,
        description="the checks, shell command lines run at the DR site on the drill's copy"
        " ($REMIRROR_DRILL_MOUNT, $REMIRROR_DRILL_DEVICE); none: the file system's own read-only check",
    )
    critical_after: PositiveDuration | None = Field(
        None,
        description="`check` is CRITICAL when no drill has passed for this long (default: every + 1d)",
    )
    hooks: Hooks | None = Field(
        None,
        description="commands run around the checks on the copy (start a database, then stop it);"
        " the drill passes only if they exit 0",
    )

    @property
    def critical(self) -> float:
        """Seconds without a passing drill that `check` calls CRITICAL."""
        return self.critical_after if self.critical_after is not None else self.every + DAY
