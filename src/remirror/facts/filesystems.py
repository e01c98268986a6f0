"""How far a file system at a disk's start reaches, from its superblock. Pure: bytes in.

`keep_data: true` (docs/keep-data.md) keeps a disk's file system where it
is and puts md's metadata 1.0 and the leg record after it, in the disk's
last MiB: whether they fit is whether the file system ends before them.
libblkid (util-linux 2.38, Debian 12's) names a file system but not its
size, so the size is read here from the superblock itself, for the file
systems whose superblock lies in a disk's first 4 KiB (what the agent
reads of a probed disk) and whose shrinking an administrator can be told.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

HEAD_BYTES = 4096  # what the agent reads of a probed disk's start

_EXT_SUPERBLOCK = 1024
_EXT_MAGIC = 0xEF53
_EXT_INCOMPAT_64BIT = 0x80
_XFS_MAGIC = b"XFSB"


@dataclass(frozen=True)
class FileSystemExtent:
    """The file system a disk starts with: its family and the bytes it spans."""

    family: str  # "ext" (ext2, ext3 and ext4 share a superblock) or "xfs"
    size: int
    # The smallest unit it reads and writes (ext: its block; XFS: its sector): a device whose
    # logical blocks are larger (a writecache of larger blocks in front) cannot hold it.
    sector: int


def file_system_extent(head: bytes) -> FileSystemExtent | None:
    """The ext2/3/4 or XFS file system `head` (a disk's first 4 KiB) starts, or None."""
    return _ext(head) or _xfs(head)


def _ext(head: bytes) -> FileSystemExtent | None:
    # struct ext4_super_block (fs/ext4/ext4.h): s_blocks_count_lo at 0x4, s_log_block_size at
    # 0x18, s_magic at 0x38, s_feature_incompat at 0x60, s_blocks_count_hi at 0x150.
    sb = head[_EXT_SUPERBLOCK : _EXT_SUPERBLOCK + 1024]
    if len(sb) < 1024 or struct.unpack_from("<H", sb, 0x38)[0] != _EXT_MAGIC:
        return None
    blocks = struct.unpack_from("<I", sb, 0x4)[0]
    if struct.unpack_from("<I", sb, 0x60)[0] & _EXT_INCOMPAT_64BIT:
        blocks |= struct.unpack_from("<I", sb, 0x150)[0] << 32
    log_block = struct.unpack_from("<I", sb, 0x18)[0]
    if log_block > 6:  # blocks of 1 KiB to 64 KiB: anything else is not a superblock to trust
        return None
    return FileSystemExtent("ext", blocks * (1024 << log_block), 1024 << log_block)


def _xfs(head: bytes) -> FileSystemExtent | None:
    # struct xfs_dsb (fs/xfs/libxfs/xfs_format.h), big-endian: sb_magicnum, sb_blocksize at 4,
    # sb_dblocks at 8, sb_sectsize at 102. The data section only: a realtime or external log
    # lives elsewhere.
    if len(head) < 104 or head[:4] != _XFS_MAGIC:
        return None
    block_size, blocks = struct.unpack_from(">IQ", head, 4)
    return FileSystemExtent("xfs", blocks * block_size, struct.unpack_from(">H", head, 102)[0])
