"""Caches in front of legs: build, retune, drain and remove dm-writecache / dm-cache. Pure.

A leg with a cache is used through `/dev/mapper/remirror-MIRROR-SITE` (see
`remirror.profile.names.leg_device`): md opens it on the primary, LIO on a
replica. Removing a cache never removes that device while anything uses it:
the cache is drained (cleaner mode until nothing is dirty) and the device's
table swapped for a linear mapping of the same disk, live. The device itself
goes only with the leg (destroy).

dm-cache needs a metadata device besides the fast one: remirror splits the
fast disk in two linear devices, `NAME-meta` (the first CACHE_METADATA bytes)
and `NAME-fast` (the rest).
"""

from __future__ import annotations

import dataclasses

from remirror.facts.model import DmTable
from remirror.facts.site import DiskFacts, DmDevice, SiteFacts
from remirror.plan.actions import CHANGE, CREATE, DELETE, Action, Plan, Verb
from remirror.profile.layers import Cache
from remirror.profile.model import Mirror, PrimaryLeg, ReplicaLeg
from remirror.profile.names import cache_name
from remirror.protocol.commands import DmCreate, DmRemove, ZeroHead
from remirror.protocol.steps import TOOL_FAILED, DmReload, DrainCache, Step, WaitPath
from remirror.protocol.tables import DmTarget, dm_cache, linear, writecache

SECTOR = 512
CACHE_METADATA = 8 * 1024**2  # dm-cache metadata: ample for a fast disk of up to ~100 GiB of 64KiB blocks
# How long apply or destroy waits for a cache to drain before giving up (the cache
# stays, draining, its data safe; a later run finishes). Bounded by what one agent
# request may take (remirror.agent.client.AGENT_TIMEOUT, 600 s).
DRAIN_TIMEOUT = 300
MAX_DRAIN_TIMEOUT = 540


class CacheError(Exception):
    """The sites hold a cache remirror cannot reconcile with the profile."""


def writecache_options(cache: Cache) -> dict[str, str]:
    """The writecache options the profile asks for (name -> value; kernel defaults left out)."""
    options = {"high_watermark": str(cache.high_watermark), "low_watermark": str(cache.low_watermark)}
    if cache.writeback_jobs is not None:
        options["writeback_jobs"] = str(cache.writeback_jobs)
    if cache.autocommit_blocks is not None:
        options["autocommit_blocks"] = str(cache.autocommit_blocks)
    if cache.autocommit_time is not None:
        options["autocommit_time"] = str(round(cache.autocommit_time * 1000))
    if cache.max_age is not None:
        options["max_age"] = str(round(cache.max_age * 1000))
    return options


def writecache_table(sectors: int, origin: str, fast: str, cache: Cache) -> DmTarget:
    """The profile's writecache for a leg."""
    return writecache(sectors, origin, fast, cache.effective_block_size, writecache_options(cache))


def cache_actions(
    mirror: Mirror, leg: PrimaryLeg | ReplicaLeg, site: SiteFacts, disk: DiskFacts, where: str
) -> list[Action]:
    """Make the leg's cache what the profile says, before md or LIO open the leg device.

    `disk`: the leg's (slow) disk. `where`: the profile location of the leg,
    for errors.
    """
    name = cache_name(mirror, leg.site)
    current = site.dm.get(name)
    if leg.cache is None:
        return [] if current is None else removal_actions(site, current, disk, name)
    fast = site.disks.get(leg.cache.disk)
    if fast is None or not fast.exists:
        raise CacheError(f"{where}: site {site.name}: cache disk {leg.cache.disk} does not exist")
    if current is None:
        return [_create(site, name, leg.cache, disk, fast, where)]
    return _retune(site, name, current, leg.cache, disk, fast, where)


def _create(site: SiteFacts, name: str, cache: Cache, disk: DiskFacts, fast: DiskFacts, where: str) -> Action:
    if disk.users():
        raise CacheError(
            f"{where}: site {site.name}: {disk.path} is in use ({'; '.join(disk.users())}): a cache can"
            " only be put in front of a disk nothing uses yet (destroy the mirror, then apply)"
        )
    _refuse_busy(site, fast, where)
    sectors = disk.size // SECTOR
    steps: list[Step] = []
    # A writecache superblock is kept: it is this leg's cache from before a
    # crash or restart, with writes the disk may not have yet (the profile
    # names this fast disk for this leg). Anything else but zeroes is data.
    destroys = _fast_disk_data(site, fast)
    if destroys:
        steps.append(_zero_head(fast.path))
    if cache.type == "writecache":
        steps.append(_dmsetup_create(name, writecache_table(sectors, disk.path, fast.path, cache)))
        kind = f"writecache {cache.effective_block_size}B blocks"
    else:
        meta_sectors = CACHE_METADATA // SECTOR
        fast_sectors = fast.size // SECTOR - meta_sectors
        if fast_sectors <= 0:
            raise CacheError(
                f"{where}: site {site.name}: cache disk {fast.path} is smaller than dm-cache's metadata"
            )
        steps += [
            _dmsetup_create(f"{name}-meta", linear(meta_sectors, fast.path)),
            _dmsetup_create(f"{name}-fast", linear(fast_sectors, fast.path, meta_sectors)),
            _dmsetup_create(
                name,
                dm_cache(
                    sectors,
                    f"/dev/mapper/{name}-meta",
                    f"/dev/mapper/{name}-fast",
                    disk.path,
                    cache.effective_block_size,
                ),
            ),
        ]
        kind = f"dm-cache writeback {cache.effective_block_size // 1024}KiB blocks"
    steps.append(WaitPath(f"/dev/mapper/{name}", 30))
    return Action(
        site.name,
        Verb.CREATE_CACHE,
        f"{name} ({kind}) on {disk.path}, fast {fast.path}",
        CREATE,
        tuple(steps),
        destructive=destroys,
        repair=True,  # a DR host's restart loses the dm table; the disks keep the cache
    )


def _retune(
    site: SiteFacts, name: str, current: DmDevice, cache: Cache, disk: DiskFacts, fast: DiskFacts, where: str
) -> list[Action]:
    table = current.table
    if table is None:
        raise CacheError(
            f"{where}: site {site.name}: {current.path} is not a device remirror can read: left alone"
        )
    if _origin(table) != disk.devno:
        raise CacheError(
            f"{where}: site {site.name}: {current.path} maps {table.devices}, not {disk.path} ({disk.devno})"
        )
    sectors = table.length
    if table.target == "linear":
        # A cache drained and removed earlier, now wanted again: swap it back in live.
        if cache.type != "writecache":
            raise CacheError(
                f"{where}: site {site.name}: dm-cache can only be built on a leg nothing uses yet"
                " (its metadata device cannot be added live): use type writecache, or destroy and apply"
            )
        _refuse_busy(site, fast, where)
        steps: list[Step] = []
        if fast.first_sector != "zero":
            # What a drained writecache leaves is clean: nothing on it the disk lacks. Anything
            # else is checked like a new cache disk's (the disk may have been reused since).
            steps.append(_zero_head(fast.path))
        steps.append(_dmsetup_reload(name, writecache_table(sectors, disk.path, fast.path, cache)))
        return [
            Action(
                site.name,
                Verb.ADD_CACHE,
                f"{name}: linear -> writecache, fast {fast.path}, live",
                CHANGE,
                tuple(steps),
                destructive=_fast_disk_data(site, fast),
            )
        ]
    wanted_target = "writecache" if cache.type == "writecache" else "cache"
    if table.target != wanted_target:
        raise CacheError(
            f"{where}: site {site.name}: {current.path} is a {table.target} cache, the profile asks for"
            f" {cache.type}: remove the cache (apply without it), then add the new one"
        )
    if table.target == "writecache":
        if table.devices[1] != fast.devno:
            raise CacheError(
                f"{where}: site {site.name}: {current.path} caches on {table.devices[1]}, not {fast.path}"
                f" ({fast.devno}): remove the cache (apply without it), then add the new one"
            )
        wanted = writecache_options(cache)
        have = {k: v for k, v in table.options.items() if k != "cleaner"}
        block_changed = table.block_size != cache.effective_block_size
        if block_changed:
            raise CacheError(
                f"{where}: site {site.name}: {current.path} has {table.block_size}B blocks, the profile"
                f" {cache.effective_block_size}B: a block size cannot change live"
                " (remove the cache, then add it)"
            )
        if have != wanted or "cleaner" in table.options:
            changes = ", ".join(
                [f"{k} {have.get(k, 'default')} -> {v}" for k, v in wanted.items() if have.get(k) != v]
                + [f"{k} {have[k]} -> default" for k in have if k not in wanted]
                + (["cleaner off"] if "cleaner" in table.options else [])
            )
            return [
                Action(
                    site.name,
                    Verb.TUNE_CACHE,
                    f"{name}: {changes}, live",
                    CHANGE,
                    (_dmsetup_reload(name, writecache_table(sectors, disk.path, fast.path, cache)),),
                )
            ]
    elif table.block_size != cache.effective_block_size:
        raise CacheError(
            f"{where}: site {site.name}: {current.path} has {table.block_size}B blocks, the profile"
            f" {cache.effective_block_size}B: remove the cache, then add it"
        )
    return []


def removal_actions(
    site: SiteFacts, current: DmDevice, disk: DiskFacts, name: str, remove: bool = False
) -> list[Action]:
    """Drain the cache and swap in a linear mapping, live; with `remove`, then remove the device.

    Never drops dirty data: the drain step fails (and leaves the cache in
    place, in cleaner mode) if the cache does not come clean or reports an error.
    """
    table = current.table
    if table is None:
        raise CacheError(f"site {site.name}: {current.path} is not a device remirror can read: left alone")
    actions = []
    if table.target in ("writecache", "cache"):
        status = current.cache
        dirty = f", {status.dirty} dirty block(s)" if status is not None else ""
        draining = status is not None and status.cleaner
        if draining:
            dirty += ", draining already"
        step = DrainCache(
            name,
            "writecache" if table.target == "writecache" else "cache",
            # Cleaner mode by a table reload, not the `cleaner` message: the table then
            # says so (the message leaves no trace), so a drain cut short by the timeout
            # is seen by the next run, which finishes it (or ends it: TuneCache).
            cleaner_table=None if draining else _cleaner_table(table),
            linear=linear(table.length, _origin(table)),
            timeout=DRAIN_TIMEOUT,
        )
        actions.append(
            Action(
                site.name,
                Verb.DRAIN_CACHE,
                f"{name}{dirty}: write back, then linear over {disk.path}, live",
                CHANGE,
                (step,),
            )
        )
    if remove:
        steps: list[Step] = [DmRemove(name)]
        if table.target == "cache" or f"{name}-meta" in site.dm:
            steps += [
                DmRemove(part, ok_codes=(0, TOOL_FAILED))  # gone already
                for part in (f"{name}-fast", f"{name}-meta")
            ]
        actions.append(
            Action(
                site.name, Verb.REMOVE_CACHE_DEVICE, f"{name} (the disk keeps its data)", DELETE, tuple(steps)
            )
        )
    return actions


def with_drain_timeout(plan: Plan, seconds: int) -> Plan:
    """The plan with each drain waiting at most `seconds` (`--drain-timeout`)."""
    return dataclasses.replace(
        plan,
        actions=tuple(
            dataclasses.replace(
                action,
                steps=tuple(
                    dataclasses.replace(step, timeout=seconds) if isinstance(step, DrainCache) else step
                    for step in action.steps
                ),
            )
            for action in plan.actions
        ),
    )


def _cleaner_table(table: DmTable) -> DmTarget:
    """The device's own table in cleaner mode: writecache's `cleaner` option, dm-cache's `cleaner` policy."""
    if table.target == "writecache":
        origin, fast = table.devices
        options = {**table.options, "cleaner": ""}
        return writecache(table.length, origin, fast, table.block_size or 0, options)
    meta, fast, origin = table.devices
    return dm_cache(table.length, meta, fast, origin, table.block_size or 0, "cleaner")


def _origin(table: DmTable) -> str:
    """The slow disk a cache table maps (MAJ:MIN): writecache names it first, dm-cache last."""
    return table.devices[-1 if table.target == "cache" else 0]


def _fast_disk_data(site: SiteFacts, fast: DiskFacts) -> str:
    """What a cache built on `fast` writes over: "" for zeroes or a writecache superblock."""
    if fast.first_sector != "other" and not fast.signatures:
        return ""
    found = ", ".join(dict.fromkeys(s.describe() for s in fast.signatures)) or "data in its first sector"
    return f"site {site.name}: cache disk {fast.path} holds {found}"


def _refuse_busy(site: SiteFacts, fast: DiskFacts, where: str) -> None:
    if fast.users():
        raise CacheError(
            f"{where}: site {site.name}: cache disk {fast.path} is in use ({'; '.join(fast.users())})"
        )


def _zero_head(path: str) -> ZeroHead:
    # The first 4 KiB: what dm-writecache reads for a superblock, dm-cache for its metadata.
    return ZeroHead(path)


def _dmsetup_create(name: str, table: DmTarget) -> DmCreate:
    return DmCreate(name, table)


def _dmsetup_reload(name: str, table: DmTarget) -> DmReload:
    # load + resume swaps tables: dm suspends the device (I/O waits, none fails) for the swap.
    return DmReload(name, table)
