"""`keep_data: true`: a disk's file system becomes the mirror's, in place. Pure: no I/O.

md metadata 1.0 keeps its superblock, write-intent bitmap and bad-block log
at the end of each leg and the array's data from byte 0: the file system
stays where it is, and `/dev/md/NAME` shows it whole. The leg record
(docs/failover.md) keeps its place, the first 32 KiB of each leg's last whole
MiB; md's 1.0 metadata sits in the last 140 KiB at most (below), and the
array stops before the record (`--size`). So the file system must end
before the smallest leg's last whole MiB, and where it does not, the plan
says by how much and how to shrink it, and changes nothing
(docs/keep-data.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from remirror.facts.filesystems import FileSystemExtent
from remirror.facts.model import Signature
from remirror.facts.site import DiskFacts
from remirror.plan.actions import PlanError
from remirror.profile.model import Mirror
from remirror.roles import md_size
from remirror.units import format_approx

KiB = 1024
# The file systems whose extent remirror reads (remirror.facts.filesystems), by libblkid type.
KEEPABLE = {"ext2": "ext", "ext3": "ext", "ext4": "ext", "xfs": "xfs"}
# What md's 1.0 metadata takes at a leg's end (mdadm 4.2, super1.c; seen in the lab,
# tests/unit/fixtures/lab-6.1/mdadm-examine-1.0.txt): the superblock 8 KiB before the end
# (4 KiB-aligned), the bad-block log 4 KiB below it, the bitmap below that in the space
# choose_bm_space() gives it by the array's size. Its header takes 256 bytes of that.
BITMAP_HEADER = 256


def bitmap_room(array_bytes: int) -> int:
    """The bytes mdadm gives a 1.0 array's internal bitmap (super1.c: choose_bm_space)."""
    sectors = array_bytes // 512
    if sectors - 64 * 2 >= 200 * 1024 * 1024 * 2:
        return 128 * KiB
    if sectors - 4 * 2 > 8 * 1024 * 1024 * 2:
        return 64 * KiB
    return 4 * KiB


@dataclass(frozen=True)
class KeptData:
    """The file system a new array keeps: what it is, and the array's size around it."""

    disk: str
    signature: Signature
    extent: FileSystemExtent
    disk_size: int
    array_size: int  # bytes: md's --size, the smallest leg short of its last whole MiB

    def describe(self) -> str:
        """What the plan shows: `keeps the ext4 filesystem ... of 200MiB on /dev/...`."""
        return (
            f"keeps the {self.signature.describe()} of {format_approx(self.extent.size)} on {self.disk}"
            f" in place, {format_approx(self.disk_size - self.extent.size)} free after it; md's"
            f" metadata 1.0, its bitmap and the leg record take the disk's last"
            f" {format_approx(self.disk_size - self.array_size)}"
        )


def kept_data(where: str, mirror: Mirror, disk: DiskFacts, replica_disks: list[DiskFacts]) -> KeptData:
    """What a new array with `keep_data` keeps on the primary's leg `disk` (its cache device, when
    it has a cache), or why it cannot (PlanError: nothing planned, nothing written). `where`: the
    profile's keep_data key, file:line:col. Messages name the disk, as its administrator knows it."""
    shown = mirror.primary.disk
    where = f"{where}: site {mirror.primary.site}: {shown}"
    tables = [s for s in disk.signatures if s.kind == "partition table"]
    if tables:
        raise PlanError(
            f"{where} holds a {tables[0].type} partition table: keep_data keeps the file system a"
            " disk starts with; name the partition that holds it as the disk"
        )
    found = [s for s in disk.signatures if s.kind == "filesystem"]
    if not found:
        raise PlanError(
            f"{where} holds no file system to keep (keep_data: true); without keep_data it is"
            " used as a blank disk"
        )
    signature = found[0]
    extent = disk.file_system
    if signature.type not in KEEPABLE:
        raise PlanError(
            f"{where} holds a {signature.type} file system: keep_data keeps ext2, ext3, ext4 or XFS,"
            " whose size remirror can read"
        )
    if extent is None or extent.family != KEEPABLE[signature.type]:
        raise PlanError(
            f"{where}: the {signature.type} superblock at its start could not be read (how far the"
            " file system reaches is not known): nothing is planned"
        )
    smallest = min([disk, *replica_disks], key=lambda d: d.size)
    array_size = md_size([d.size for d in [disk, *replica_disks]], "1.0")
    if extent.size > array_size:
        raise PlanError(f"{where}: {_no_room(signature, extent, disk, smallest, array_size, shown)}")
    _check_bitmap(where, mirror, array_size)
    _check_cache_blocks(where, mirror, signature, extent)
    return KeptData(shown, signature, extent, disk.size, array_size)


def _no_room(
    signature: Signature,
    extent: FileSystemExtent,
    disk: DiskFacts,
    smallest: DiskFacts,
    array_size: int,
    shown: str,
) -> str:
    """Why the file system does not fit, and what makes room for it."""
    limit = (
        f"its last {format_approx(disk.size - array_size)}"
        if smallest is disk
        else f"what the smallest leg ({smallest.path}, {format_approx(smallest.size)}) can hold"
    )
    reason = (
        f"its {signature.describe()} of {format_approx(extent.size)} reaches into {limit}, where md's"
        f" metadata 1.0, its bitmap and the leg record go: it must end within {array_size // KiB}KiB"
    )
    if extent.family == "xfs":
        return (
            f"{reason}, and XFS cannot shrink: make the mirror on a blank disk and copy the files"
            " into it (docs/keep-data.md)"
        )
    return (
        f"{reason}; shrink it first, unmounted: e2fsck -f {shown} && resize2fs {shown} {array_size // KiB}K"
    )


def _check_bitmap(where: str, mirror: Mirror, array_size: int) -> None:
    """mdadm refuses a 1.0 array whose bitmap would not fit its room ("Given bitmap chunk size
    not supported", seen in the lab): said here first, with the chunk that fits."""
    room = bitmap_room(array_size) - BITMAP_HEADER
    chunk = mirror.replication.bitmap_chunk
    if _bitmap_bytes(array_size, chunk) <= room:
        return
    least = chunk
    while _bitmap_bytes(array_size, least) > room:
        least *= 2
    raise PlanError(
        f"{where}: bitmap_chunk {chunk // KiB}KiB makes a bitmap of"
        f" {format_approx(_bitmap_bytes(array_size, chunk))}, and md's metadata 1.0 (keep_data) has"
        f" {room}B for it on a mirror of {format_approx(array_size)}: use a bitmap_chunk of at least"
        f" {least // KiB}KiB"
    )


def _bitmap_bytes(array_size: int, chunk: int) -> int:
    """A write-intent bitmap's bytes: a bit per chunk."""
    bits = -(-array_size // chunk)
    return -(-bits // 8)


def _check_cache_blocks(where: str, mirror: Mirror, signature: Signature, extent: FileSystemExtent) -> None:
    """A writecache's blocks are its device's logical blocks, and so the mirror's: a file system
    of smaller blocks (ext4 makes 1 KiB ones below 512 MiB) would not mount there (seen in the
    lab: "bad superblock"). dm-cache keeps the disk's logical blocks."""
    cache = mirror.primary.cache
    if cache is None or cache.type != "writecache" or cache.effective_block_size <= extent.sector:
        return
    raise PlanError(
        f"{where}: its {signature.type} reads and writes in {extent.sector}-byte blocks, and the"
        f" writecache's {cache.effective_block_size}-byte blocks would become the mirror's sectors,"
        f" where it would not mount: set the cache's block_size to {extent.sector} or less"
    )
