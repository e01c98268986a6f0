"""What a site holds, as frozen records. Built by the parsers; read by the planner and health."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

# wipefs/libblkid type names, grouped the way the safety rule talks about them.
_MD_TYPES = {"linux_raid_member"}
_LVM_TYPES = {"LVM2_member", "LVM1_member"}
_PARTITION_TABLE_TYPES = {"dos", "gpt", "PMBR", "atari", "bsd", "mac", "sgi", "sun"}


# A first burst above any write the SCSI layer sends (max_sectors_kb): open-iscsi's default
# MaxBurstLength, 16 MiB - 1 KiB (RFC 7143 caps both bursts at 2**24 - 1).
IN_ORDER_BURST = 16776192


def secret_digest(secret: str) -> str:
    """How a site reports a stored secret (a CHAP password in a node record or an ACL): compared
    with the profile's, never shown. The agent and the planner must agree byte for byte."""
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()


# The times believed from another host (a site's clock, a seed's or a record's time): from 2001
# to 2100, in epoch seconds. A site's clock is a site's word, and nothing past these years makes
# sense of a schedule's weeks or names a seed.
BELIEVED_TIMES = (1e9, 4.1e9)


@dataclass(frozen=True)
class Signature:
    """One on-disk signature found by libblkid (wipefs): a filesystem, an md superblock, ..."""

    type: str
    offset: int
    uuid: str | None = None
    label: str | None = None

    @property
    def kind(self) -> str:
        """`md`, `lvm`, `partition table` or `filesystem` (everything else libblkid knows)."""
        if self.type in _MD_TYPES:
            return "md"
        if self.type in _LVM_TYPES:
            return "lvm"
        if self.type in _PARTITION_TABLE_TYPES:
            return "partition table"
        return "filesystem"

    def describe(self) -> str:
        """How a refusal names it: `ext4 filesystem labelled 'data' (UUID ...)`."""
        what = {
            "md": "md RAID member",
            "lvm": "LVM physical volume",
            "partition table": f"{self.type} partition table",
            "filesystem": f"{self.type} filesystem",
        }[self.kind]
        if self.label:
            what += f" labelled {self.label!r}"
        if self.uuid and self.kind in ("md", "lvm", "filesystem"):
            what += f" (UUID {self.uuid})"
        return what


@dataclass(frozen=True)
class MdMember:
    """A component of a running md array, from sysfs `md/dev-NAME/`."""

    device: str  # kernel name: sda, dm-0
    slot: int | None  # None: a spare or not in a slot
    state: frozenset[str] = field(default_factory=frozenset)
    # Writes md sent to it that it has not completed (its block device's `inflight`). For an
    # async mirror's replica leg: how many acknowledged writes site B may still lack.
    writes_in_flight: int | None = None
    # md's bad block log for it (sysfs `bad_blocks` and `unacknowledged_bad_blocks`): ranges of
    # (first sector, sectors) of the device, not of the array, where a write failed and md went
    # on without it. md then reads those sectors from another leg and writes no more there:
    # the leg lacks acknowledged writes, and its bitmap does not say so (docs/safety.md).
    bad_blocks: tuple[tuple[int, int], ...] = ()
    data_offset: int | None = None  # sectors: where the array's data starts on it (sysfs `offset`)

    @property
    def is_faulty(self) -> bool:
        """md marked it failed."""
        return "faulty" in self.state

    @property
    def is_in_sync(self) -> bool:
        """It holds the whole array's data."""
        return "in_sync" in self.state

    @property
    def is_write_mostly(self) -> bool:
        """Reads avoid it (a remote leg)."""
        return "write_mostly" in self.state

    def missed(self) -> tuple[tuple[int, int], ...]:
        """The array's byte ranges (offset, length) this member failed to write and md recorded
        in its bad block log, merged: what it lacks though md counts it in sync."""
        offset = self.data_offset or 0
        spans = sorted(((start - offset) * 512, length * 512) for start, length in self.bad_blocks)
        merged: list[tuple[int, int]] = []
        for at, length in spans:
            if merged and at <= merged[-1][0] + merged[-1][1]:
                last_at, last_length = merged[-1]
                merged[-1] = (last_at, max(last_length, at + length - last_at))
            else:
                merged.append((at, length))
        return tuple(merged)

    @property
    def missed_bytes(self) -> int:
        """How much of the array this member lacks by its bad block log."""
        return sum(length for _, length in self.missed())


@dataclass(frozen=True)
class MdArray:
    """A running md array, from sysfs, /proc/mdstat and `mdadm --detail --export`."""

    kernel_name: str  # md127
    name: str  # the name without homehost: "rec" for "site-a:rec"
    uuid: str  # colon form, as mdadm prints it
    level: str
    raid_disks: int
    members: tuple[MdMember, ...]
    array_state: str
    sync_action: str
    sync_completed: tuple[int, int] | None  # (done, total) sectors while syncing
    degraded: int
    bitmap_chunk: int | None  # bytes; None without a bitmap
    backlog: int | None  # write-behind limit
    max_backlog_used: int | None
    sync_speed: int | None = None  # bytes/s of a running resync (md reports KiB/s), None when idle
    sync_speed_max: int | None = None  # bytes/s this array's resyncs are held to; None: the system's
    sync_speed_min: int | None = None  # bytes/s below which md never holds a resync; None: the system's
    # Writes held by md (`suspend_lo` < `suspend_hi`): left so by a leg move that never finished.
    writes_suspended: bool = False
    # Resyncs held by md at a sector (`sync_max` not `max`): left so by an add of a leg that
    # never finished (remirror.agent.md_legs); every resync and recovery then waits there.
    syncs_held: bool = False
    # Seconds without a write before md marks the array clean (`safe_mode_delay`: md's 0.2 at
    # each assembly, remirror's plan/md.SAFE_MODE_DELAY); None: not read.
    safe_mode_delay: float | None = None

    def member(self, device: str) -> MdMember | None:
        """The member with this kernel name, if any."""
        return next((m for m in self.members if m.device == device), None)

    def is_ahead(self, device: str) -> bool:
        """Whether this member holds a slot before another member's: md writes to the legs in
        slot order (and, in raid1.c of Debian 12's 6.1, sends a write behind only from the first)."""
        own = self.member(device)
        slots = [m.slot for m in self.members if m.slot is not None]
        return own is not None and own.slot is not None and own.slot != max(slots)


@dataclass(frozen=True)
class MdSuperblock:
    """What `mdadm --examine` says of a component device."""

    array_uuid: str
    name: str
    device_uuid: str
    events: int
    # This device's slot, and the array as this device last recorded it, one
    # character per slot: `A` active, `R` replacing, `.` missing.
    slot: int | None = None
    array_state: str = ""
    data_end: int | None = None  # bytes from the device's start where md's data ends (md_data_end)
    version: str = ""  # the metadata's: 1.2 (apply's), 1.0 (keep_data's: at the device's end)
    # Whether the device has room for a bad block log (mdadm's default): with one, md records a
    # failed write there and goes on; without, it fails the device (docs/safety.md).
    bad_block_log: bool = False
    # `State : clean` (True) or `active` (False): md marks the array clean only when no write is
    # pending on any leg, a write-behind copy included (raid1's close_write). None: not read.
    clean: bool | None = None

    def recorded_missing(self, slot: int) -> bool:
        """Whether this device last ran in an array where `slot` was missing."""
        return slot < len(self.array_state) and self.array_state[slot] == "."


@dataclass(frozen=True)
class MdBitmap:
    """What `mdadm -X` says of a member's write-intent bitmap."""

    chunk_size: int  # bytes
    bits: int
    dirty: int
    events: int
    events_cleared: int

    @property
    def dirty_bytes(self) -> int:
        """Data the bitmap marks as possibly out of sync (a bound: whole chunks)."""
        return self.dirty * self.chunk_size


@dataclass(frozen=True)
class IscsiSession:
    """A session of the local initiator, from sysfs and `iscsiadm -m session`."""

    sid: int
    target: str
    address: str
    port: int
    state: str  # LOGGED_IN, FAILED, FREE
    disk: str | None = None  # kernel name of its LUN 0 disk, while it has one
    recovery_tmo: int | None = None  # seconds: the node's replacement_timeout, or what was written live
    initiator: str = ""  # the initiator name it logged in with (an iface may set another than the host's)
    # What the login negotiated (sysfs): whether a write waits for an R2T, may carry its data, and
    # how much data it may send unasked. None: not read (no session attributes).
    initial_r2t: bool | None = None
    immediate_data: bool | None = None
    first_burst: int | None = None
    scheduler: str = ""  # the I/O scheduler of its disk (`none`, `mq-deadline`), while it has one

    @property
    def sends_writes_in_order(self) -> bool:
        """Whether each write's data follows its command on the wire, so that writes reach the
        target in the order they were sent (no R2T to wait for, a first burst larger than any
        write); True when sysfs did not say (nothing to act on)."""
        if self.initial_r2t is None or self.immediate_data is None or self.first_burst is None:
            return True
        return not self.initial_r2t and self.immediate_data and self.first_burst >= IN_ORDER_BURST


@dataclass(frozen=True)
class DmTable:
    """One device-mapper device's table, as `dmsetup table NAME` prints it (single-target devices)."""

    length: int  # sectors
    target: str  # writecache, cache, linear, ...
    devices: tuple[str, ...]  # the MAJ:MIN devices it maps onto, in table order
    block_size: int | None = None  # bytes (writecache, cache)
    options: dict[str, str] = field(
        default_factory=dict, hash=False
    )  # writecache: name -> value ("" for flags)


@dataclass(frozen=True)
class CacheStatus:
    """What `dmsetup status` says of a writecache or cache device, in one shape for both.

    `dirty` counts blocks not yet on the slow disk: for dm-writecache blocks
    in use (blocks - free, including those under writeback); for dm-cache its
    dirty count. `error` is dm-writecache's error indicator (an errno; dm-cache
    reports `Fail` mode instead, mapped to -5, EIO).
    """

    blocks: int
    dirty: int
    writeback: int  # blocks being written back right now (writecache), 0 for dm-cache
    error: int = 0
    cleaner: bool = False  # draining: new writes go to the slow disk

    @property
    def clean(self) -> bool:
        """Nothing left on the fast device that the slow disk lacks."""
        return self.dirty == 0 and self.writeback == 0
