"""Pure parsers of what device-mapper prints: a device's table, a cache's status.

Each takes text and returns facts; none runs anything. The formats are those
of Debian 12's dmsetup (see tests/unit/fixtures/lab-6.1/README.md).
"""

from __future__ import annotations

import re

from remirror.facts.model import CacheStatus, DmTable
from remirror.facts.parsers import ParseError


def split_dm_listing(text: str) -> dict[str, str]:
    """`dmsetup table` or `dmsetup status` of every device at once (`NAME: START LEN TYPE ARGS`, a
    line per target) cut into each device's part, as the same command prints it for that device
    alone: one command for all of a site's devices, not two per device."""
    parts: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, rest = line.partition(": ")
        if sep and name and " " not in name:
            parts[name] = parts.get(name, "") + rest + "\n"
    return parts


def parse_dm_table(text: str) -> DmTable:
    """`dmsetup table NAME` of a one-target device: `0 LEN TYPE ARGS...`.

    Recorded forms (kernel 6.1, tests/unit/fixtures/lab-6.1):
    `0 524288 writecache s 254:1 254:5 4096 4 high_watermark 50 low_watermark 45`
    `0 524288 linear 254:1 0`
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) != 1:
        raise ParseError(f"expected a device with one target, got {len(lines)} table lines")
    fields = lines[0].split()
    try:
        length, target, args = int(fields[1]), fields[2], fields[3:]
    except (IndexError, ValueError):
        raise ParseError(f"not a device-mapper table line: {lines[0]!r}") from None
    if target == "linear":
        return DmTable(length, target, (args[0],))
    if target == "writecache":
        # s|p ORIGIN CACHE BLOCK #OPT OPTIONS...: options with values count twice.
        block, count = int(args[3]), int(args[4])
        words = args[5 : 5 + count]
        options: dict[str, str] = {}
        i = 0
        while i < len(words):
            name = words[i]
            if name in _WRITECACHE_FLAGS:
                options[name] = ""
                i += 1
            else:
                options[name] = words[i + 1] if i + 1 < len(words) else ""
                i += 2
        return DmTable(length, target, (args[1], args[2]), block, options)
    if target == "cache":
        # META FAST ORIGIN BLOCK_SECTORS #FEATURES FEATURES... POLICY #POLICY_ARGS ...
        block = int(args[3]) * 512
        count = int(args[4])
        features = dict.fromkeys(args[5 : 5 + count], "")
        policy = args[5 + count] if len(args) > 5 + count else ""
        return DmTable(length, target, (args[0], args[1], args[2]), block, {**features, "policy": policy})
    return DmTable(length, target, tuple(a for a in args if re.fullmatch(r"\d+:\d+", a)))


# Writecache options that take no value.
# Flags take no value; every other option one (`pause_writeback N`, `start_sector N`: kernel 5.15+).
_WRITECACHE_FLAGS = {"fua", "nofua", "cleaner", "metadata_only"}


def parse_cache_status(text: str) -> CacheStatus:
    """`dmsetup status NAME` of a writecache or cache device (recorded: fixtures/lab-6.1/dmsetup-status-*).

    writecache: `0 LEN writecache ERROR BLOCKS FREE WRITEBACK [counters...]`;
    its cleaner mode shows only in its table.
    cache: `0 LEN cache META_BLOCK META_USED/TOTAL CACHE_BLOCK CACHE_USED/TOTAL READ_HITS
    READ_MISSES WRITE_HITS WRITE_MISSES DEMOTIONS PROMOTIONS DIRTY #FEATURES ... POLICY ...
    rw|ro|Fail` (Documentation/admin-guide/device-mapper/cache.rst).
    """
    fields = text.split()
    try:
        target = fields[2]
        if target == "writecache":
            error, blocks, free, writeback = (int(f) for f in fields[3:7])
            # The table says whether cleaner mode is on; status cannot.
            return CacheStatus(blocks=blocks, dirty=blocks - free, writeback=writeback, error=error)
        if target == "cache":
            # the cache blocks in use/total are field 6, the dirty count field 13 (see above)
            _used, _, total = fields[6].partition("/")
            dirty = int(fields[13])
            failed = "Fail" in fields[14:]
            return CacheStatus(
                blocks=int(total),
                dirty=dirty,
                writeback=0,
                error=-5 if failed else 0,
                cleaner="cleaner" in fields,
            )
    except (IndexError, ValueError):
        pass
    raise ParseError(f"not a writecache or cache status line: {text.strip()!r}")
