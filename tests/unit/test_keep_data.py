"""`keep_data: true`: a disk's file system becomes the mirror's, in place (docs/keep-data.md).

The superblocks and md's 1.0 layout are recorded in the lab (fixtures/lab-6.1, README:
record-keep-data.sh, kernel 6.1.0-56-amd64, mdadm 4.2, e2fsprogs 1.47.0, xfsprogs 6.1.0).
"""

from __future__ import annotations

import dataclasses
import struct
from pathlib import Path

import pytest

from remirror.errors import ProfileError
from remirror.facts.filesystems import FileSystemExtent, file_system_extent
from remirror.facts.generations import RECORD_SLOT, record_offset
from remirror.facts.model import Signature
from remirror.facts.parsers import md_data_end, parse_bitmap_location, parse_data_offset, parse_examine
from remirror.facts.site import DiskFacts, SiteFacts
from remirror.plan import Action, Plan, PlanError, make_plan
from remirror.plan.keep_data import bitmap_room
from remirror.profile import load_profile
from remirror.profile.names import array_uuid
from tests.conftest import PROFILES
from tests.unit.simulated_sites import at_site, conf_text
from tests.unit.test_planner import SECRETS, disk, fresh, site

LAB = Path(__file__).parent / "fixtures" / "lab-6.1"
MiB = 1024 * 1024
DISK = 256 * MiB  # the lab's disks
EXT4 = Signature("ext4", 0x438, "ad2a1ca8-5d8f-4c4b-badc-565274a8dc64", "kept")
XFS = Signature("xfs", 0, "0b9e0e6a-7d0c-4a9e-9d1a-3c1f0f6e2a11", "kept")


def head(name: str) -> bytes:
    return (LAB / name).read_bytes()


# The superblocks: how far a file system reaches.


def test_the_size_of_ext4_and_xfs_is_read_from_their_superblocks() -> None:
    # record-keep-data.sh: mkfs.ext4 ... 200M on a 256 MiB disk, mkfs.xfs on a 400 MiB file.
    assert file_system_extent(head("head-ext4.bin")) == FileSystemExtent("ext", 200 * MiB, 1024)
    assert file_system_extent(head("head-xfs.bin")) == FileSystemExtent("xfs", 400 * MiB, 512)


def test_a_64bit_ext4_counts_the_high_half_of_its_block_count() -> None:
    sb = bytearray(head("head-ext4.bin"))
    incompat = struct.unpack_from("<I", sb, 1024 + 0x60)[0]
    struct.pack_into("<I", sb, 1024 + 0x60, incompat | 0x80)
    struct.pack_into("<I", sb, 1024 + 0x150, 1)  # 2**32 more blocks
    block_size = 1024 << struct.unpack_from("<I", sb, 1024 + 0x18)[0]  # 1 KiB: mke2fs's for 200M
    extent = file_system_extent(bytes(sb))
    assert extent is not None
    assert extent.size == 200 * MiB + (1 << 32) * block_size


def test_anything_else_has_no_extent() -> None:
    assert file_system_extent(bytes(4096)) is None
    assert file_system_extent(b"XFSB") is None  # too short to hold a superblock
    broken = bytearray(head("head-ext4.bin"))
    struct.pack_into("<I", broken, 1024 + 0x18, 40)  # a block size no ext has
    assert file_system_extent(bytes(broken)) is None


# md's metadata 1.0, as the lab made it over an ext4 disk.


def test_metadata_1_0_keeps_the_data_at_byte_0_and_ends_it_before_the_leg_record() -> None:
    examine = (LAB / "mdadm-examine-1.0.txt").read_text()
    superblock = parse_examine(examine)
    assert superblock is not None
    assert superblock.version == "1.0"
    assert parse_data_offset(examine) == 0  # mdadm prints no Data Offset when it is 0
    assert md_data_end(examine) == superblock.data_end == record_offset(DISK)
    # md's own metadata (superblock, bitmap, bad-block log) lies after the record's two slots.
    sb_offset, bitmap_offset = parse_bitmap_location(examine)
    lowest = min(sb_offset, sb_offset + bitmap_offset, sb_offset - 8 * 512)
    assert lowest >= record_offset(DISK) + 2 * RECORD_SLOT
    # And it always would: mdadm's room for the bitmap is 128 KiB at most.
    assert DISK - 8192 - 4096 - bitmap_room(2**50) - 4096 > record_offset(DISK) + 2 * RECORD_SLOT


def test_parse_data_offset_is_none_without_a_superblock() -> None:
    assert parse_data_offset("") is None


# Profiles.


def keep_data_profile(tmp_path: Path, extra: str = "", chunk: str = "1MiB") -> Path:
    text = (PROFILES / "lab.yaml").read_text()
    text = text.replace("      disk: /dev/lab/a0\n", "      disk: /dev/lab/a0\n      keep_data: true\n")
    text = text.replace("bitmap_chunk: 1MiB", f"bitmap_chunk: {chunk}")
    path = tmp_path / "keep.yaml"
    path.write_text(text + extra)
    return path


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ("      initial_sync: skip\n", "cannot go with initial_sync: skip"),
        ("    cdp: {every: 1m, keep: 1h}\n", "cannot go with cdp"),
    ],
)
def test_keep_data_refuses_what_would_write_over_or_skip_the_kept_data(
    tmp_path: Path, change: str, says: str
) -> None:
    path = keep_data_profile(tmp_path)
    text = path.read_text()
    anchor = "      on_link_loss: degrade\n" if "initial_sync" in change else "    replication:\n"
    path.write_text(text.replace(anchor, anchor + change if "initial" in change else change + anchor))
    with pytest.raises(ProfileError) as error:
        load_profile(path)
    assert says in str(error.value)
    assert "keep.yaml:" in str(error.value)


# Plans.


def kept_facts(
    *signatures: Signature, size: int = 200 * MiB, family: str = "ext", sector: int = 4096
) -> dict[str, SiteFacts]:
    facts = fresh()
    a0 = dataclasses.replace(
        disk("/dev/lab/a0", "dm-0", *signatures), file_system=FileSystemExtent(family, size, sector)
    )
    facts["site-a"] = site("site-a", disks={"/dev/lab/a0": a0})
    return facts


def create_of(profile_path: Path, facts: dict[str, SiteFacts]) -> tuple[Plan, Action]:
    plan = make_plan(load_profile(profile_path), facts, SECRETS)
    return plan, next(a for a in plan.actions if a.verb == "CreateArray")


def test_a_file_system_with_room_after_it_is_kept_with_metadata_1_0_and_nothing_destroyed(
    tmp_path: Path,
) -> None:
    plan, create = create_of(keep_data_profile(tmp_path), kept_facts(EXT4))
    assert not plan.destructive
    argv = at_site(create)[0]["argv"]
    assert "--metadata=1.0" in argv
    assert f"--size={record_offset(DISK) // MiB}M" in argv
    assert (
        "keeps the ext4 filesystem labelled 'kept' (UUID ad2a1ca8-5d8f-4c4b-badc-565274a8dc64) of 200MiB"
        " on /dev/lab/a0 in place, 56MiB free after it; md's metadata 1.0, its bitmap and the leg"
        " record take the disk's last 1MiB"
    ) in create.subject
    # Boot assembles it by its own metadata version.
    conf = next(a for a in plan.actions if a.verb == "WriteMdadmConf" and a.site == "site-a")
    assert "metadata=1.0 UUID=" in conf_text(conf)


def test_a_file_system_up_to_the_record_fits_and_one_block_more_is_refused_with_the_command(
    tmp_path: Path,
) -> None:
    profile = keep_data_profile(tmp_path)
    create_of(profile, kept_facts(EXT4, size=record_offset(DISK)))
    with pytest.raises(PlanError) as error:
        create_of(profile, kept_facts(EXT4, size=record_offset(DISK) + 4096))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'keep.yaml'}:")
    assert "site site-a: /dev/lab/a0: its ext4 filesystem labelled 'kept'" in message
    assert "reaches into its last 1MiB" in message
    assert "shrink it first, unmounted: e2fsck -f /dev/lab/a0 && resize2fs /dev/lab/a0 261120K" in message


def test_an_xfs_that_fills_its_disk_is_refused_saying_xfs_cannot_shrink(tmp_path: Path) -> None:
    with pytest.raises(PlanError, match="XFS cannot shrink: make the mirror on a blank disk"):
        create_of(keep_data_profile(tmp_path), kept_facts(XFS, size=DISK, family="xfs"))


def test_a_smaller_replica_limits_what_can_be_kept_and_is_named(tmp_path: Path) -> None:
    facts = kept_facts(EXT4, size=250 * MiB)
    b0 = dataclasses.replace(facts["site-b"].disks["/dev/lab/b0"], size=200 * MiB)
    facts["site-b"] = dataclasses.replace(facts["site-b"], disks={"/dev/lab/b0": b0})
    with pytest.raises(
        PlanError, match=r"reaches into what the smallest leg \(/dev/lab/b0, 200MiB\) can hold"
    ):
        create_of(keep_data_profile(tmp_path), facts)


@pytest.mark.parametrize(
    ("signatures", "says"),
    [
        ((), "holds no file system to keep"),
        ((Signature("gpt", 0x200),), "holds a gpt partition table: keep_data keeps the file system a disk"),
        (
            (Signature("btrfs", 0x10040),),
            "holds a btrfs file system: keep_data keeps ext2, ext3, ext4 or XFS",
        ),
    ],
)
def test_what_keep_data_cannot_keep_is_refused(
    tmp_path: Path, signatures: tuple[Signature, ...], says: str
) -> None:
    with pytest.raises(PlanError, match=says):
        create_of(keep_data_profile(tmp_path), kept_facts(*signatures))


def test_a_file_system_whose_superblock_could_not_be_read_is_refused_not_guessed(tmp_path: Path) -> None:
    facts = kept_facts(EXT4)
    a0 = dataclasses.replace(facts["site-a"].disks["/dev/lab/a0"], file_system=None)
    facts["site-a"] = dataclasses.replace(facts["site-a"], disks={"/dev/lab/a0": a0})
    with pytest.raises(PlanError, match="the ext4 superblock at its start could not be read"):
        create_of(keep_data_profile(tmp_path), facts)


def test_a_mounted_file_system_is_refused_naming_where(tmp_path: Path) -> None:
    facts = kept_facts(EXT4)
    a0 = dataclasses.replace(facts["site-a"].disks["/dev/lab/a0"], mounts=("/srv",))
    facts["site-a"] = dataclasses.replace(facts["site-a"], disks={"/dev/lab/a0": a0})
    with pytest.raises(PlanError, match=r"/dev/lab/a0 is in use \(mounted on /srv\)"):
        create_of(keep_data_profile(tmp_path), facts)


def test_another_arrays_superblock_beside_the_kept_file_system_is_still_destroyed_and_said(
    tmp_path: Path,
) -> None:
    old = Signature("linux_raid_member", 0xFFFE000, "11111111-2222-3333-4444-555555555555", "old")
    plan, create = create_of(keep_data_profile(tmp_path), kept_facts(EXT4, old))
    assert plan.destructive == (create,)
    assert "md RAID member labelled 'old'" in create.destructive
    assert "ext4" not in create.destructive


def test_a_bitmap_too_big_for_metadata_1_0_is_refused_with_the_chunk_that_fits(tmp_path: Path) -> None:
    # 255 MiB in 4 KiB chunks: 8160 bytes of bitmap, and mdadm gives a 1.0 array under 8 GiB
    # 4 KiB less the bitmap's 256-byte header (the lab refused 4 KiB chunks on its disks).
    with pytest.raises(
        PlanError, match="has 3840B for it on a mirror of 255MiB: use a bitmap_chunk of at least 16KiB"
    ):
        create_of(keep_data_profile(tmp_path, chunk="4KiB"), kept_facts(EXT4))


def test_an_existing_array_keeps_its_metadata_version_in_mdadm_conf_whatever_the_profile_says(
    tmp_path: Path,
) -> None:
    from remirror.facts.model import MdSuperblock
    from remirror.plan.mdadm_conf import mdadm_conf_actions

    profile = load_profile(PROFILES / "lab.yaml")  # no keep_data
    uuid_ = array_uuid(profile, profile.mirrors[0])
    facts = fresh()
    a0 = DiskFacts(
        "/dev/lab/a0", True, "dm-0", DISK, superblock=MdSuperblock(uuid_, "lab0", "x", 1, version="1.0")
    )
    facts["site-a"] = site("site-a", disks={"/dev/lab/a0": a0})
    conf = next(a for a in mdadm_conf_actions(profile, facts) if a.site == "site-a")
    assert f"ARRAY /dev/md/lab0 metadata=1.0 UUID={uuid_} name=lab0" in conf_text(conf)


def test_a_kept_leg_is_this_mirrors_own_whatever_file_system_libblkid_also_finds_on_it() -> None:
    # After the create every leg shows md's superblock and, at byte 0, the file system
    # (record-keep-data.sh): the file system is the mirror's data, not something to write over
    # when the leg is exported again (after a restart of the DR site, or a promotion).
    from remirror.facts.parsers import parse_wipefs_json
    from remirror.plan.md import destroys

    signatures = parse_wipefs_json((LAB / "wipefs-json-ext4-in-md-1.0.txt").read_text())
    assert [s.type for s in signatures] == ["linux_raid_member", "ext4"]
    superblock = parse_examine((LAB / "mdadm-examine-1.0.txt").read_text())
    assert superblock is not None
    leg = DiskFacts("/dev/lab/b2", True, "dm-6", DISK, signatures, superblock)
    assert destroys("site-b", leg, superblock.array_uuid) == ""
    # Another array's leg is somebody else's data, file system and all.
    assert destroys("site-b", leg, "00000000:00000000:00000000:00000000") == (
        "site site-b: /dev/lab/b2 holds md RAID member labelled 'kept' (UUID ad82f432-c5c9-b153-9cc4-31f130e549db),"
        " ext4 filesystem labelled 'kept' (UUID ad2a1ca8-5d8f-4c4b-badc-565274a8dc64)"
    )


def test_with_a_primary_cache_the_array_is_made_on_the_cache_device_keeping_the_disks_file_system(
    tmp_path: Path,
) -> None:
    # dm-writecache maps the disk one to one: the file system is at byte 0 of the cache device
    # too, and md's metadata 1.0 goes to its end, through the cache, to the disk's end.
    path = keep_data_profile(tmp_path)
    path.write_text(
        path.read_text().replace(
            "      keep_data: true\n",
            "      keep_data: true\n      cache: {type: writecache, disk: /dev/lab/a-fast0}\n",
        )
    )
    facts = kept_facts(EXT4)
    fast = DiskFacts("/dev/lab/a-fast0", True, "dm-8", 64 * MiB, first_sector="zero")
    facts["site-a"] = dataclasses.replace(
        facts["site-a"], disks={**facts["site-a"].disks, "/dev/lab/a-fast0": fast}
    )
    plan, create = create_of(path, facts)
    assert not plan.destructive
    # The writecache's blocks (4 KiB by default) become the mirror's sectors: a file system of
    # 1 KiB blocks would not mount on it, and is refused with the block size that fits.
    small = kept_facts(EXT4, sector=1024)
    small["site-a"] = dataclasses.replace(
        small["site-a"], disks={**small["site-a"].disks, "/dev/lab/a-fast0": fast}
    )
    with pytest.raises(PlanError, match=r"1024-byte blocks.*set the cache's block_size to 1024 or less"):
        create_of(path, small)
    verbs = [str(a.verb) for a in plan.actions if a.site == "site-a"]
    assert verbs.index("CreateCache") < verbs.index("CreateArray")
    argv = at_site(create)[0]["argv"]
    assert "--metadata=1.0" in argv
    assert argv[-1].startswith("/dev/mapper/remirror-")  # md's leg: the cache device
    assert "of 200MiB on /dev/lab/a0 in place" in create.subject  # named by the disk
