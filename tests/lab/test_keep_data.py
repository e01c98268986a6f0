"""`keep_data: true` on a real kernel: a disk that holds ext4 and files becomes the mirror, in place.

docs/keep-data.md. The files are written before, checksummed, and read
back through `/dev/md/NAME`, from the DR site's leg directly, and from the
primary's disk after `destroy`; a file system that leaves no room is refused
with nothing written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.lab.conftest import on_b, sh
from tests.lab.mirror import MiB, lio_objects, md_digest, remirror, variant, wait_in_sync

A, B, MD = "/dev/lab/a2", "/dev/lab/b2", "/dev/md/lab2"
FAST = "/dev/lab/a-fast0"  # site A's cache disk
MOUNT = "/run/remirror-kept"  # the lab's / is read-only
# Files of several sizes (a small one, one across many extents), as a file server holds them.
FILES = {"ledger.db": 3 * MiB + 512, "letters/2026-11.txt": 4000, "scans/invoice.pdf": 9 * MiB}


def checksums(*mount: str, site_b: bool = False, names: tuple[str, ...] = tuple(FILES)) -> dict[str, str]:
    """sha256 of each of `names` in a file system mounted (read-only) at MOUNT by `mount`."""
    run = on_b if site_b else sh
    run("mkdir", "-p", MOUNT)
    run("mount", *mount, MOUNT)
    try:
        out = run("sha256sum", *(f"{MOUNT}/{name}" for name in names)).stdout
    finally:
        run("umount", MOUNT)
    return {line.split()[1].removeprefix(f"{MOUNT}/"): line.split()[0] for line in out.splitlines()}


def business_disk(label: str, *mkfs: str) -> dict[str, str]:
    """ext4 of 200 MiB on the 256 MiB disk A, with FILES on it: their sha256 (it is left unmounted).
    mke2fs makes 1 KiB blocks for a file system this small unless `mkfs` says otherwise."""
    sh("mkfs.ext4", "-q", "-F", "-L", label, *mkfs, A, "200M")
    on_b("wipefs", "--all", "--quiet", B)
    sh("mkdir", "-p", MOUNT)
    sh("mount", A, MOUNT)
    try:
        for name, size in FILES.items():
            Path(MOUNT, name).parent.mkdir(parents=True, exist_ok=True)
            Path(MOUNT, name).write_bytes(os.urandom(size))
    finally:
        sh("umount", MOUNT)
    return checksums(A)


@pytest.fixture
def profile(tmp_path: Path) -> Iterator[str]:
    """The lab profile's mirror on a2 and b2, keeping a2's data; whatever a test leaves of it is
    destroyed and the disks wiped afterwards."""
    path = variant(
        tmp_path,
        "keep.yaml",
        **{
            "name: lab0": "name: lab2",
            "      disk: /dev/lab/a0\n": f"      disk: {A}\n      keep_data: true\n",
            "/dev/lab/b0": B,
            "/dev/md/lab0": MD,
        },
    )
    yield path
    sh("umount", MOUNT, ok_codes=(0, 1, 32))
    on_b("umount", MOUNT, ok_codes=(0, 1, 32))
    if Path(MD).exists() or [name for name in lio_objects() if "lab2" in name]:
        remirror("destroy", "--yes", path, "lab2", ok_codes=(0, 1))
    sh("wipefs", "--all", "--quiet", A)
    on_b("wipefs", "--all", "--quiet", B)
    sh("dd", "if=/dev/zero", f"of={FAST}", "bs=1M", "count=1", "oflag=direct", "status=none")


def test_a_file_system_that_fills_its_disk_is_refused_and_nothing_is_written(profile: str) -> None:
    sh("mkfs.ext4", "-q", "-F", "-L", "full", A)
    end = int(sh("blockdev", "--getsize64", A).stdout) - MiB
    first, last = md_digest(0, MiB, A), md_digest(end, MiB, A)
    _, _, err = remirror("apply", "--yes", profile, ok_codes=(1,))
    assert "keep.yaml:" in err, err
    assert "its ext4 filesystem labelled 'full'" in err, err
    assert "of 256MiB reaches into its last 1MiB" in err, err
    assert f"e2fsck -f {A} && resize2fs {A} 261120K" in err, err
    assert (md_digest(0, MiB, A), md_digest(end, MiB, A)) == (first, last)
    assert not Path(MD).exists()
    assert not [name for name in lio_objects() if "lab2" in name]


def test_a_disk_with_ext4_and_files_becomes_the_mirror_in_place_and_every_leg_mounts_without_md(
    profile: str,
) -> None:
    before = business_disk("business")
    sh("mount", A, MOUNT)
    try:
        # Mounted: refused, saying where, nothing made.
        _, _, err = remirror("apply", "--yes", profile, ok_codes=(1,))
        assert f"{A} is in use (mounted on {MOUNT})" in err, err
        assert not Path(MD).exists()
    finally:
        sh("umount", MOUNT)

    # No --allow-destructive: nothing is written over.
    _, out, err = remirror("apply", "--yes", profile)
    assert "keeps the ext4 filesystem labelled 'business'" in out + err
    assert f"of 200MiB on {A} in place, 56MiB free after it" in out + err
    wait_in_sync(MD)
    assert "Version : 1.0" in sh("mdadm", "--examine", A).stdout
    assert checksums("-o", "ro", MD) == before
    code, out, err = remirror("verify", profile, "lab2")
    assert code == 0, out + err

    # The DR site's leg holds the file system at byte 0 too: mounted directly, read-only, while
    # LIO still exports it (LIO holds it exclusively, so through a read-only loop device, and
    # noload: no journal replay writes to the replica).
    assert checksums("-t", "ext4", "-o", "ro,noload,loop", B, site_b=True) == before

    # Undo: destroy leaves the primary's disk mountable directly with the same files.
    remirror("destroy", "--yes", profile, "lab2")
    assert not Path(MD).exists()
    assert checksums("-t", "ext4", "-o", "ro", A) == before


def test_with_a_writecache_in_front_the_kept_data_is_the_mirrors_and_destroy_drains_it_to_the_disk(
    profile: str,
) -> None:
    # 4 KiB blocks, as mke2fs makes them on any disk over 512 MiB: the writecache's 4 KiB blocks
    # become the mirror's sectors, which a 1 KiB-block ext4 could not be mounted on (planned
    # against: tests/unit/test_keep_data.py).
    before = business_disk("cached", "-b", "4096")
    sh("dd", "if=/dev/zero", f"of={FAST}", "bs=1M", "count=1", "oflag=direct", "status=none")
    text = Path(profile).read_text()
    Path(profile).write_text(
        text.replace("      keep_data: true\n", f"      keep_data: true\n      cache: {{disk: {FAST}}}\n")
    )
    _, out, _ = remirror("apply", "--yes", profile)
    assert "CreateCache" in out
    assert f"of 200MiB on {A} in place" in out
    wait_in_sync(MD)
    assert checksums("-o", "ro", MD) == before
    # A write through the mirror lands in the writecache first; destroy drains it to the disk.
    sh("mount", MD, MOUNT)
    try:
        Path(MOUNT, "ledger.db").write_bytes(os.urandom(FILES["ledger.db"]))
    finally:
        sh("umount", MOUNT)
    after = checksums("-o", "ro", MD)
    assert after["ledger.db"] != before["ledger.db"]
    remirror("destroy", "--yes", profile, "lab2")
    assert checksums("-t", "ext4", "-o", "ro", A) == after
