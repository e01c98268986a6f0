"""The DR site's wall around device-mapper tables (remirror.agent.policy): a typed table
(remirror.protocol.tables) checked field by field, then the text the site writes from it checked
word by word, as the kernel will read it.
"""

from __future__ import annotations

import re
from typing import Any

from remirror.agent import policy
from remirror.agent.policy import Checker, Refused
from remirror.protocol.tables import DEVICES, WRITECACHE_FLAGS, WRITECACHE_VALUED, DmTarget

# Table text: printable ASCII words split by spaces, one target a line; where each target
# type remirror sends takes its devices (0-based, after the type); the other words they take.
# No tab, no byte past ASCII: spaces are the only separators; no backslash, which the kernel
# reads as an escape that joins two words into one.
_TABLE_TEXT = re.compile(r"[ -\[\]-~\n]*")
_DEVICE_POSITIONS: dict[str, tuple[int, ...]] = {
    "linear": (0,),  # DEV OFFSET
    "writecache": (1, 2),  # s|p ORIGIN CACHE BLOCK #OPTIONS OPTIONS...
    "cache": (0, 1, 2),  # META FAST ORIGIN BLOCK #FEATURES FEATURES... POLICY #ARGS ARGS...
}
_TABLE_KEYWORDS = frozenset(
    {"s", "p", "high_watermark", "low_watermark", "writeback_jobs", "autocommit_blocks", "autocommit_time"}
    | {"max_age", "cleaner", "fua", "nofua", "pause_writeback", "metadata_only", "start_sector"}  # writecache
    | {"writeback", "writethrough", "passthrough", "metadata2", "no_discard_passdown"}  # dm-cache features
    | {"smq", "mq", "default"}  # dm-cache policies (and `cleaner`)
)
_MAJOR_MINOR = re.compile(r"\d+:\d+")
_DEVICE_WORD = re.compile(r"/dev/[A-Za-z0-9/_.:+@=-]+|\d+:\d+")
MAX_SECTORS = 1 << 56  # no disk of a site's is larger (32 EiB)


def dm_target(check: Checker, value: DmTarget | None) -> None:
    """A typed table (None: none sent): each device where its target has one, an absolute
    path or MAJ:MIN of the scope; its numbers in range; dm-writecache's options by name, each a
    number or a flag; then the text the site writes from it, checked as any table is."""
    if value is None:
        return
    if len(value.devices) != DEVICES[value.target]:
        raise Refused(f"a {value.target} table maps {DEVICES[value.target]} device(s)")
    for device in value.devices:
        if not _DEVICE_WORD.fullmatch(device):  # one word: a path or MAJ:MIN, nothing after it
            raise Refused(f"{device[:60]!r} is not a device path or MAJOR:MINOR")
        _table_device(check, device)
    _numbers(value)
    for key, number in value.options.items():
        flag = key in WRITECACHE_FLAGS and number == ""
        valued = key in WRITECACHE_VALUED and number.isascii() and number.isdigit() and len(number) <= 12
        if value.target != "writecache" or not (flag or valued):
            raise Refused(
                f"{key[:40]!r} {number[:20]!r} is not an option of {value.target} that remirror sends"
            )
    table(check, value.text())


def _numbers(value: DmTarget) -> None:
    """Each target's numbers where it takes them, in the kernel's range: sectors; a linear
    offset; dm-writecache's block (512 to 4096, a power of two); dm-cache's (a multiple of 32 KiB)
    and its policy. None of them where its target takes none."""
    ok = 0 < value.sectors < MAX_SECTORS and 0 <= value.offset < MAX_SECTORS
    if value.target == "linear":
        ok = ok and value.block == 0 and value.policy == "smq"
    elif value.target == "writecache":
        ok = ok and value.offset == 0 and value.block in (512, 1024, 2048, 4096) and value.policy == "smq"
    else:
        ok = ok and value.offset == 0 and value.block % (32 << 10) == 0 and 0 < value.block <= 1 << 30
    if not ok:
        raise Refused(
            f"a {value.target} table of {value.sectors} sectors from {value.offset}, blocks of"
            f" {value.block} bytes, policy {value.policy}: not one remirror sends"
        )


def table(check: Checker, value: Any) -> None:
    """A device-mapper table of the targets remirror sends (linear, writecache, dm-cache),
    each word where its target has it: a device where the target takes one, an absolute path
    or MAJ:MIN of the scope; elsewhere a number or one of the target's own keywords. Nothing
    else: the kernel takes a device word as a path from dmsetup's working directory
    (`../dev/sdX`), and on kernels before 6.5 by other names too (`820` for 8:32,
    `PARTUUID=...`); it splits words on bytes Python does not (0xA0). So the table is
    printable ASCII, and no word is left to the kernel's reading alone."""
    if not isinstance(value, str) or not _TABLE_TEXT.fullmatch(value):
        raise Refused("not a device-mapper table of printable ASCII, one target a line")
    for line in value.split("\n"):
        words = line.split()  # on spaces alone: the text has no other white space
        if not words:
            continue
        target = words[2] if len(words) > 2 else ""
        positions = _DEVICE_POSITIONS.get(target)
        if positions is None or not (words[0].isdigit() and words[1].isdigit()):
            raise Refused(f"{line[:80]!r}: not a target remirror sends ({', '.join(_DEVICE_POSITIONS)})")
        arguments = words[3:]
        if len(arguments) <= max(positions, default=-1):
            raise Refused(f"{line[:80]!r}: too few arguments for {target}")
        for at, word in enumerate(arguments):
            if at in positions:
                _table_device(check, word)
            elif not (word.isdigit() or word in _TABLE_KEYWORDS):
                raise Refused(f"{word[:40]!r} is not an argument of {target} that remirror sends")


def _table_device(check: Checker, word: str) -> None:
    if word.startswith("/"):
        check.device(word)
        return
    if not _MAJOR_MINOR.fullmatch(word):
        raise Refused(f"{word[:40]!r} is not a device path or MAJOR:MINOR")
    name = policy.devno_name(word)  # looked up at each call: tests point it elsewhere
    if name is None or (check.scope is not None and name not in check.known()):
        raise Refused(f"device {word} is not one {check._sources()} name for this site")
    if check.scope is None and any(policy.inside_points(dm) for dm in policy.dm_names_of(f"/dev/{name}")):
        raise Refused(f"device {word} is one of this site's own points' devices")
