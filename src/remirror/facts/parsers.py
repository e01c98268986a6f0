"""Pure parsers of what md and util-linux print (device-mapper's: facts/dm.py; open-iscsi's:
facts/iscsi.py).

Each takes text and returns facts; none runs anything. The formats are those
of Debian 12's tools (see tests/unit/fixtures/lab-6.1/README.md); where a
format has a quirk, the comment says which.
"""

from __future__ import annotations

import json
import re
import shlex
import struct
from dataclasses import dataclass

from remirror.facts.model import (
    MdArray,
    MdBitmap,
    MdMember,
    MdSuperblock,
    Signature,
)

_SIZE_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3}


class ParseError(ValueError):
    """A tool printed something this parser does not understand."""


def parse_wipefs_json(text: str) -> tuple[Signature, ...]:
    """Signatures from `wipefs --no-act --json DEV` (all of them: filesystems, RAID, tables)."""
    if not text.strip():
        return ()  # wipefs prints nothing at all for a device without signatures
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ParseError(f"wipefs output is not JSON: {error}") from None
    return tuple(
        Signature(
            type=entry["type"],
            offset=int(entry["offset"], 16),
            uuid=entry.get("uuid"),
            label=entry.get("label"),
        )
        for entry in data.get("signatures", [])
    )


def parse_export(text: str) -> dict[str, str]:
    """KEY=VALUE lines as mdadm `--export` and `blkid -o export` print them (shell-quoted values)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            continue
        # Values are escaped for the shell: "LVM2\ 001".
        parts = shlex.split(value) if value.strip() else [""]
        values[key.strip()] = " ".join(parts)
    return values


def md_name(full_name: str) -> str:
    """The array name without mdadm's `homehost:` prefix (`site-a:rec` -> `rec`)."""
    return full_name.rpartition(":")[2]


def parse_detail_export(text: str) -> tuple[str, str, dict[str, int]]:
    """(UUID, name, {member path: role}) from `mdadm --detail --export`."""
    values = parse_export(text)
    if "MD_UUID" not in values:
        raise ParseError("mdadm --detail --export printed no MD_UUID")
    roles: dict[str, int] = {}
    for key, value in values.items():
        if key.startswith("MD_DEVICE_") and key.endswith("_ROLE"):
            device = values.get(key.removesuffix("_ROLE") + "_DEV")
            if device and value.isdigit():  # "spare", "faulty" are not slots
                roles[device] = int(value)
    return values["MD_UUID"], md_name(values.get("MD_NAME", values.get("MD_DEVNAME", ""))), roles


def parse_examine(text: str) -> MdSuperblock | None:
    """The md superblock on a device, from plain `mdadm --examine` (None: there is none): the
    array and device it names, its events, and (parse_examine_role, md_data_end) its slot, the
    Array State it last recorded and where its data ends."""

    def field(name: str) -> str:
        found = re.search(rf"^\s*{name} : (.*?)\s*$", text, flags=re.M)
        return found.group(1) if found else ""

    uuid = field("Array UUID")
    if not uuid:
        return None
    events = field("Events")
    if not events.isdigit():
        raise ParseError(f"mdadm --examine: Events {events!r} is not a number")
    slot, array_state = parse_examine_role(text)
    return MdSuperblock(
        array_uuid=uuid,
        name=md_name(field("Name").split(" ", 1)[0]),  # `site-a:rec  (local to host site-a)`
        device_uuid=field("Device UUID"),
        events=int(events),
        slot=slot,
        array_state=array_state,
        data_end=md_data_end(text),
        version=field("Version"),
        # `Bad Block Log : 512 entries available at offset 16 sectors`; no line: none.
        bad_block_log=bool(field("Bad Block Log")),
        clean={"clean": True, "active": False}.get(field("State").split(",")[0].strip()),
    )


def split_examine(text: str) -> dict[str, str]:
    """`mdadm --examine DEV...` cut into each device's part, by its path (`/dev/dm-0:` heads it);
    a device without a superblock has none (mdadm says so on stderr)."""
    return _split_at_heads(text, r"(/dev/\S+):\s*", keep_head=False)


def split_bitmaps(text: str) -> dict[str, str]:
    """`mdadm --examine-bitmap DEV...` cut into each device's part, by its path (each part
    starts with `Filename : DEV`)."""
    return _split_at_heads(text, r"\s*Filename : (\S+)\s*", keep_head=True)


def _split_at_heads(text: str, head: str, keep_head: bool) -> dict[str, str]:
    """The parts of a tool's output for several devices, each started by a line matching `head`
    (its group: the device), with or without that line."""
    parts: dict[str, str] = {}
    device = ""
    for line in text.splitlines(keepends=True):
        found = re.fullmatch(head, line)
        if found:
            device = found.group(1)
            parts[device] = line if keep_head else ""
        elif device:
            parts[device] += line
    return parts


def split_wipefs_json(text: str) -> dict[str, str]:
    """`wipefs --no-act --json DEV...` cut into each device's signatures, as the same command
    would print them for that device alone, by kernel name (wipefs's `device` column: `dm-0`);
    a device without signatures has none."""
    if not text.strip():
        return {}
    try:
        entries = json.loads(text).get("signatures", [])
    except json.JSONDecodeError as error:
        raise ParseError(f"wipefs output is not JSON: {error}") from None
    devices: dict[str, list[dict[str, object]]] = {}
    for entry in entries:
        devices.setdefault(entry["device"], []).append(entry)
    return {device: json.dumps({"signatures": found}) for device, found in devices.items()}


def parse_examine_role(text: str) -> tuple[int | None, str]:
    """(slot, Array State) of a component device, from plain `mdadm --examine`.

    `Device Role : Active device 1` gives the slot (a spare has none);
    `Array State : .A (...)` what the device last recorded of every slot.
    """
    role = re.search(r"^\s*Device Role : Active device (\d+)\s*$", text, flags=re.M)
    state = re.search(r"^\s*Array State : ([AR.]+)", text, flags=re.M)
    return (int(role.group(1)) if role else None), (state.group(1) if state else "")


def parse_member_state(text: str) -> frozenset[str]:
    """Flags of sysfs `md/dev-NAME/state` (`in_sync,write_mostly`; `faulty,write_mostly`)."""
    return frozenset(flag for flag in text.strip().split(",") if flag)


def parse_member(
    device: str, state: str, slot: str, inflight: str = "", bad_blocks: str = "", offset: str = ""
) -> MdMember:
    """A member from its sysfs state and slot (`none` when it holds no slot), its block
    device's `inflight` (`READS WRITES`, requests not completed; empty when not read), its bad
    block log (`bad_blocks` and `unacknowledged_bad_blocks`, one after the other) and its data
    `offset` (sectors)."""
    slot = slot.strip()
    counts = inflight.split()
    return MdMember(
        device=device,
        slot=int(slot) if slot.isdigit() else None,
        state=parse_member_state(state),
        writes_in_flight=int(counts[1]) if len(counts) == 2 and counts[1].isdigit() else None,
        bad_blocks=parse_bad_blocks(bad_blocks),
        data_offset=int(offset) if offset.strip().isdigit() else None,
    )


def parse_bad_blocks(text: str) -> tuple[tuple[int, int], ...]:
    """md's bad block log as sysfs lists it (`md/dev-NAME/bad_blocks`, one `SECTOR LENGTH` a
    line, in the device's sectors), without repeats: (first sector, sectors). A line that is
    not one is left out: a long log overruns sysfs's page and ends mid-line, and the entries
    before it still say the leg lacks writes (the superblock holds the whole list)."""
    found = []
    for line in text.splitlines():
        words = line.split()
        if len(words) == 2 and all(w.isdigit() for w in words):
            found.append((int(words[0]), int(words[1])))
    return tuple(sorted(set(found)))


def parse_examine_badblocks(text: str) -> tuple[tuple[int, int], ...]:
    """The bad block log as `mdadm --examine-badblocks DEV` reads it from the device's superblock
    (`133120 for 512 sectors` a line; `No bad-blocks list configured`: none)."""
    found = re.findall(r"^\s*(\d+) for (\d+) sectors\s*$", text, flags=re.M)
    return tuple(sorted({(int(start), int(length)) for start, length in found}))


def parse_sync_completed(text: str) -> tuple[int, int] | None:
    """(done, total) sectors from sysfs `md/sync_completed`; None when idle (`none`, `delayed`)."""
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    return (int(match.group(1)), int(match.group(2))) if match else None


_MDSTAT_ARRAY = re.compile(r"^(md\w+) : (\w+) (?:\((?:auto-)?read-only\) )?(\w+)? ?(.*)$")
_MDSTAT_MEMBER = re.compile(r"(\S+?)\[(\d+)\]((?:\([A-Z]\))*)")


def parse_bitmap_examine(text: str) -> MdBitmap:
    """A member's bitmap from `mdadm -X` (examine-bitmap)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(" : ")
        if sep:
            fields[key.strip()] = value.strip()
    try:
        number, unit = fields["Chunksize"].split()
        bits = re.match(r"(\d+) bits \(chunks\), (\d+) dirty", fields["Bitmap"])
        if bits is None:
            raise ParseError(f"mdadm -X: cannot read {fields['Bitmap']!r}")
        return MdBitmap(
            chunk_size=int(number) * _SIZE_UNITS[unit.upper()],
            bits=int(bits.group(1)),
            dirty=int(bits.group(2)),
            events=int(fields["Events"]),
            events_cleared=int(fields["Events Cleared"]),
        )
    except (KeyError, ValueError) as error:
        raise ParseError(f"mdadm -X: missing or bad field {error}") from None


def parse_speed_limit(text: str) -> int | None:
    """md's `sync_speed_max` or `_min` (`40960 (local)`, `200000 (system)`, KiB/s): bytes/s when the array
    has a limit of its own, None when it follows the system's (or the file was not read)."""
    value, _, scope = text.strip().partition(" ")
    return int(value) * 1024 if value.isdigit() and scope == "(local)" else None


def build_md_array(kernel_name: str, sysfs: dict[str, str], detail_export: str) -> MdArray:
    """A running array from its sysfs files (relative to /sys/block/mdX/md/) and `mdadm --detail --export`.

    `sysfs` maps paths such as `array_state`, `bitmap/chunksize`,
    `dev-sda/state` to their contents; the agent reads them, this only
    interprets them. Member state comes from sysfs: `--detail --export`
    carries no member state (only roles).
    """
    uuid, name, _roles = parse_detail_export(detail_export)
    members = tuple(
        parse_member(
            path.removeprefix("dev-").removesuffix("/state"),
            state,
            sysfs.get(path.replace("/state", "/slot"), ""),
            sysfs.get(path.replace("/state", "/block/inflight"), ""),
            sysfs.get(path.replace("/state", "/bad_blocks"), "")
            + sysfs.get(path.replace("/state", "/unacknowledged_bad_blocks"), ""),
            sysfs.get(path.replace("/state", "/offset"), ""),
        )
        for path, state in sorted(sysfs.items())
        if path.startswith("dev-") and path.endswith("/state")
    )

    def number(key: str) -> int | None:
        value = sysfs.get(key, "").strip()
        return int(value) if value.isdigit() else None

    return MdArray(
        kernel_name=kernel_name,
        name=name,
        uuid=uuid,
        level=sysfs.get("level", "").strip(),
        raid_disks=number("raid_disks") or 0,
        members=members,
        array_state=sysfs.get("array_state", "").strip(),
        sync_action=sysfs.get("sync_action", "").strip(),
        sync_completed=parse_sync_completed(sysfs.get("sync_completed", "none")),
        degraded=number("degraded") or 0,
        bitmap_chunk=number("bitmap/chunksize"),
        backlog=number("bitmap/backlog"),
        max_backlog_used=number("bitmap/max_backlog_used"),
        sync_speed=None if (speed := number("sync_speed")) is None else speed * 1024,
        sync_speed_max=parse_speed_limit(sysfs.get("sync_speed_max", "")),
        sync_speed_min=parse_speed_limit(sysfs.get("sync_speed_min", "")),
        writes_suspended=(number("suspend_hi") or 0) > (number("suspend_lo") or 0),
        syncs_held=number("sync_max") is not None,  # a sector; `max` when md holds nothing
        safe_mode_delay=_seconds(sysfs.get("safe_mode_delay", "")),
    )


def _seconds(text: str) -> float | None:
    """md's seconds with a fraction (`0.204`: 200 ms in the kernel's ticks), or None."""
    try:
        return float(text.strip())
    except ValueError:
        return None


# md's on-disk write-intent bitmap (drivers/md/md-bitmap.h, bitmap_super_t): a 256-byte
# header (magic "bitm", little-endian), then one bit per chunk, bit i of the map = byte
# i // 8, bit i % 8 (the kernel's little-endian bit order).
BITMAP_MAGIC = 0x6D746962

_BITMAP_HEADER = struct.Struct("<II16sQQQIIII")  # magic version uuid events cleared sync_size state chunk ...


def parse_bitmap_dirty(data: bytes) -> list[tuple[int, int]]:
    """The dirty chunks of an on-disk bitmap (header and bits) as merged (offset, length) byte ranges
    of the array's data: what a leg wrote that the others may not have."""
    if len(data) < 256:
        raise ParseError("md bitmap: shorter than its header")
    magic, _, _, _, _, sync_sectors, _, chunk, *_ = _BITMAP_HEADER.unpack_from(data)
    if magic != BITMAP_MAGIC or chunk <= 0:
        raise ParseError(f"md bitmap: bad magic {magic:#x} or chunk size {chunk}")
    size = sync_sectors * 512
    chunks = -(-size // chunk)
    bits = data[256 : 256 + -(-chunks // 8)]
    if len(bits) * 8 < chunks:
        raise ParseError(f"md bitmap: {len(bits) * 8} bits read, {chunks} chunks expected")
    ranges: list[tuple[int, int]] = []
    for i in range(chunks):
        if bits[i // 8] >> (i % 8) & 1:
            start, length = i * chunk, min(chunk, size - i * chunk)
            if ranges and ranges[-1][0] + ranges[-1][1] == start:
                ranges[-1] = (ranges[-1][0], ranges[-1][1] + length)
            else:
                ranges.append((start, length))
    return ranges


def parse_bitmap_location(examine: str) -> tuple[int, int]:
    """(superblock offset, bitmap offset from it), in bytes, from plain `mdadm --examine`:
    `Super Offset : 8 sectors` and `Internal Bitmap : 8 sectors from superblock`."""
    sb = re.search(r"^\s*Super Offset : (\d+) sectors", examine, flags=re.M)
    bitmap = re.search(r"^\s*Internal Bitmap : (-?\d+) sectors from superblock", examine, flags=re.M)
    if sb is None or bitmap is None:
        raise ParseError("mdadm --examine: no internal bitmap (Super Offset / Internal Bitmap)")
    return int(sb.group(1)) * 512, int(bitmap.group(1)) * 512


def parse_data_offset(examine: str) -> int | None:
    """Where md keeps the array's data on a member, in bytes, from plain `mdadm --examine`
    (`Data Offset : 2048 sectors`); None for a device without a 1.x superblock. mdadm prints
    no Data Offset when it is 0: metadata 1.0's (keep_data), whose superblock is at the end."""
    offset = re.search(r"^\s*Data Offset : (\d+) sectors", examine, flags=re.M)
    if offset:
        return int(offset.group(1)) * 512
    return 0 if re.search(r"^\s*Super Offset : \d+ sectors", examine, flags=re.M) else None


def md_data_end(examine: str) -> int | None:
    """Where md's data ends on a member, in bytes from the device's start, from plain `mdadm
    --examine` (1.x metadata): `Data Offset` plus `Used Dev Size` (printed when md uses less than
    the device offers, as with `--size`), else `Avail Dev Size`. None without them."""
    offset = parse_data_offset(examine)
    used = re.search(r"^\s*Used Dev Size : (\d+)", examine, flags=re.M)
    avail = re.search(r"^\s*Avail Dev Size : (\d+)", examine, flags=re.M)
    size = used or avail
    if offset is None or size is None:
        return None
    return offset + int(size.group(1)) * 512


# A site's mdadm.conf (Debian's); remirror's block in it: remirror.facts.mdadm_conf.
MDADM_CONF = "/etc/mdadm/mdadm.conf"


@dataclass(frozen=True)
class BlockStat:
    """A block device's counters since boot, from /sys/class/block/DEV/stat
    (Documentation/block/stat.rst: fields 1, 5, 7, 9, 14 and 3; kernels before 4.18 count
    no discards, which read as 0)."""

    reads: int  # completed
    writes: int  # completed
    sectors_written: int
    in_flight: int  # requests
    sectors_discarded: int
    sectors_read: int = 0


def parse_block_stat(text: str) -> BlockStat:
    """A stat line read; ValueError if it is not one (fewer than 11 counters, or not numbers)."""
    fields = text.split()
    if len(fields) < 11 or not all(field.isdigit() for field in fields):
        raise ValueError(f"not a block device's stat: {text.strip()[:80]!r}")
    numbers = [int(field) for field in fields]
    discarded = numbers[13] if len(numbers) > 13 else 0
    return BlockStat(numbers[0], numbers[4], numbers[6], numbers[8], discarded, numbers[2])
