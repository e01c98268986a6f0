"""The parsers on outputs recorded in the lab (fixtures/lab-6.1/README.md names the versions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from remirror.facts.dm import parse_cache_status, parse_dm_table
from remirror.facts.iscsi import build_iscsi_session, parse_initiator_name
from remirror.facts.parsers import (
    ParseError,
    build_md_array,
    md_name,
    parse_bitmap_examine,
    parse_detail_export,
    parse_examine,
    parse_examine_role,
    parse_export,
    parse_speed_limit,
    parse_sync_completed,
    parse_wipefs_json,
    split_bitmaps,
    split_examine,
    split_wipefs_json,
)

LAB = Path(__file__).parent / "fixtures" / "lab-6.1"
UUID = "9b9cd85d:53bed361:4ad431b5:54276aa5"


def fixture(name: str) -> str:
    return (LAB / name).read_text()


def key_values(name: str) -> dict[str, str]:
    """The recorded sysfs files: one `path=content` line each."""
    return dict(line.split("=", 1) for line in fixture(name).splitlines() if "=" in line)


# --- signatures: what the safety rule refuses to write over ---------------


@pytest.mark.parametrize(
    ("name", "kinds", "described"),
    [
        ("wipefs-empty.json", [], []),
        (
            "wipefs-ext4.json",
            ["filesystem"],
            ["ext4 filesystem labelled 'data' (UUID bebbbe10-27ae-439b-8c3f-662cb952909d)"],
        ),
        (
            "wipefs-lvm.json",
            ["lvm"],
            ["LVM physical volume (UUID 4iHVRu-kAOB-SJHj-6EzB-4pnt-v4iD-92BAFq)"],
        ),
        (
            "wipefs-md-member.json",
            ["md"],
            ["md RAID member labelled 'site-a:sig' (UUID 3c433973-daad-797f-08a1-c32bee134c6e)"],
        ),
        ("wipefs-dos.json", ["partition table"], ["dos partition table"]),
        (
            "wipefs-gpt.json",
            ["partition table"] * 3,
            ["gpt partition table", "gpt partition table", "PMBR partition table"],
        ),
    ],
)
def test_every_kind_of_signature_is_recognised(name: str, kinds: list[str], described: list[str]) -> None:
    signatures = parse_wipefs_json(fixture(name))
    assert [s.kind for s in signatures] == kinds
    assert [s.describe() for s in signatures] == described


def test_the_backup_gpt_header_is_found_at_the_end_of_the_disk() -> None:
    offsets = [s.offset for s in parse_wipefs_json(fixture("wipefs-gpt.json"))]
    assert 256 * 1024**2 - 512 in offsets


def test_wipefs_prints_nothing_for_a_blank_disk() -> None:
    assert parse_wipefs_json("") == ()
    with pytest.raises(ParseError, match="not JSON"):
        parse_wipefs_json("wipefs: error")


# --- md ---------------------------------------------------------------------


def test_detail_export_gives_uuid_name_without_homehost_and_roles() -> None:
    uuid, name, roles = parse_detail_export(fixture("mdadm-detail-export.txt"))
    assert (uuid, name) == (UUID, "rec")
    assert roles == {"/dev/sda": 1, "/dev/dm-0": 0}


def test_examine_gives_the_superblock_of_each_leg_from_one_call_for_every_disk() -> None:
    # record-batched.sh: `mdadm --examine` of an md RAID1's two legs, an ext4 disk, a blank one.
    parts = split_examine(fixture("mdadm-examine-batched.txt"))
    assert set(parts) == {"/dev/dm-0", "/dev/dm-1"}  # the other two: only mdadm's stderr
    first, second = parse_examine(parts["/dev/dm-0"]), parse_examine(parts["/dev/dm-1"])
    assert first is not None
    assert second is not None
    assert first.array_uuid == second.array_uuid == "1d878850:a9b9b663:7785bfbd:c47792fe"
    assert first.device_uuid == "0d1461d6:f243241d:5f598755:0192c738" != second.device_uuid
    assert (first.name, first.events, first.slot, first.array_state) == ("rec", 0, 0, "AA")
    assert second.slot == 1
    assert first.data_end == (2048 + 522240) * 512
    single = parse_examine(fixture("mdadm-examine-clean.txt"))  # one disk: the same, its path first
    assert single is not None
    assert (single.array_uuid, single.name, single.events) == (
        "13553443:6fd21886:98e460bc:642c84f0",
        "sb",
        18,
    )
    assert parse_examine("mdadm: No md superblock detected on /dev/lab/a1.\n") is None


def test_bitmaps_and_signatures_of_every_disk_from_one_call() -> None:
    bitmaps = split_bitmaps(fixture("mdadm-X-batched.txt"))
    assert set(bitmaps) == {"/dev/dm-0", "/dev/dm-1"}
    assert parse_bitmap_examine(bitmaps["/dev/dm-1"]).chunk_size == 1 << 20
    signatures = split_wipefs_json(fixture("wipefs-json-batched.txt"))
    assert set(signatures) == {"dm-0", "dm-1", "dm-2"}  # dm-3 is blank: wipefs lists nothing
    assert [s.type for s in parse_wipefs_json(signatures["dm-0"])] == ["linux_raid_member"]
    assert [s.type for s in parse_wipefs_json(signatures["dm-2"])] == ["ext4"]
    assert split_wipefs_json(fixture("wipefs-empty.json")) == {}


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("mdadm-examine-clean.txt", (0, "AA")),
        ("mdadm-examine-primary-degraded.txt", (0, "A.")),
        ("mdadm-examine-replica-stale.txt", (1, "AA")),  # cut off: keeps what it last shared
        ("mdadm-examine-replica-diverged.txt", (1, ".A")),  # ran on its own
    ],
)
def test_examine_gives_the_slot_and_the_array_state_the_device_recorded(
    name: str, role: tuple[int, str]
) -> None:
    assert parse_examine_role(fixture(name)) == role
    assert parse_examine_role("mdadm: No md superblock detected on /dev/lab/a1.\n") == (None, "")


def test_export_values_are_unquoted_like_the_shell_would() -> None:
    assert parse_export("VERSION=LVM2\\ 001\nTYPE=LVM2_member\nnoise\n") == {
        "VERSION": "LVM2 001",
        "TYPE": "LVM2_member",
    }


def test_md_name_drops_the_homehost() -> None:
    assert md_name("site-a:rec") == "rec"
    assert md_name("rec") == "rec"


def test_a_healthy_mirror_from_sysfs() -> None:
    array = build_md_array("md127", key_values("sysfs-md.txt"), fixture("mdadm-detail-export.txt"))
    assert (array.name, array.uuid, array.level, array.raid_disks) == ("rec", UUID, "raid1", 2)
    assert (array.bitmap_chunk, array.backlog, array.degraded) == (1024**2, 1024, 0)
    remote = array.member("sda")
    local = array.member("dm-0")
    assert remote is not None
    assert local is not None
    assert remote.is_write_mostly
    assert remote.is_in_sync
    assert not remote.is_faulty
    assert (local.slot, remote.slot) == (0, 1)
    assert not local.is_write_mostly
    assert array.sync_completed is None


def test_the_remote_leg_after_the_link_was_cut() -> None:
    sysfs = {**key_values("sysfs-md.txt"), **key_values("sysfs-md-faulty.txt")}
    array = build_md_array("md127", sysfs, fixture("mdadm-detail-export-degraded.txt"))
    remote = array.member("sda")
    assert remote is not None
    assert remote.is_faulty
    assert remote.is_write_mostly
    assert not remote.is_in_sync
    assert array.degraded == 1


def test_sync_completed() -> None:
    assert parse_sync_completed("1024 / 522240\n") == (1024, 522240)
    assert parse_sync_completed("none\n") is None
    assert parse_sync_completed("delayed") is None


def test_the_bitmap_counts_what_the_outage_left_dirty() -> None:
    dirty = parse_bitmap_examine(fixture("mdadm-X-a0-dirty.txt"))
    assert (dirty.chunk_size, dirty.bits, dirty.dirty) == (1024**2, 255, 4)
    assert dirty.dirty_bytes == 4 * 1024**2  # 4 MiB were written while the link was down
    assert (dirty.events, dirty.events_cleared) == (22, 18)
    # Recorded just after the array was created: every chunk is dirty until
    # the initial sync is done and the bitmap daemon has cleared the bits.
    fresh = parse_bitmap_examine(fixture("mdadm-X-a0.txt"))
    assert (fresh.dirty, fresh.bits, fresh.events_cleared) == (255, 255, 0)
    with pytest.raises(ParseError):
        parse_bitmap_examine("mdadm: invalid bitmap magic 0x0, the bitmap file appears to be corrupted\n")


# --- open-iscsi -------------------------------------------------------------


def test_a_session_from_sysfs() -> None:
    # The session's own files, then its connection's address and port.
    recorded = {
        path.rsplit("/", 1)[-1]: value
        for path, value in key_values("sysfs-iscsi-session.txt").items()
        if "/iscsi_session/" in path or "persistent_" in path
    }
    session = build_iscsi_session(1, {**recorded, "disk": "sda"})
    assert (session.state, session.address, session.port, session.disk) == (
        "LOGGED_IN",
        "192.0.2.2",
        3260,
        "sda",
    )


def recorded_session(name: str) -> dict[str, str]:
    return {path.rsplit("/", 1)[-1]: value for path, value in key_values(name).items()}


def test_a_session_negotiated_by_remirror_sends_writes_in_order() -> None:
    # Recorded in the lab (record-async.sh): remirror's target and node parameters, then LIO's.
    ours = build_iscsi_session(1, recorded_session("sysfs-iscsi-session-in-order.txt"))
    assert (ours.initial_r2t, ours.immediate_data, ours.first_burst, ours.scheduler) == (
        False,
        True,
        16776192,
        "none",
    )
    assert ours.sends_writes_in_order
    lio = build_iscsi_session(2, recorded_session("sysfs-iscsi-session-lio-defaults.txt"))
    assert (lio.initial_r2t, lio.first_burst, lio.scheduler) == (True, 65536, "mq-deadline")
    assert not lio.sends_writes_in_order


def test_an_async_arrays_writes_in_flight_to_the_replica() -> None:
    array = build_md_array("md127", key_values("sysfs-md-async.txt"), fixture("mdadm-detail-export.txt"))
    remote, local = array.member("sda"), array.member("dm-0")
    assert remote is not None
    assert local is not None
    assert (remote.slot, local.slot) == (0, 1)  # the replica first: md sends writes behind from it
    assert (remote.writes_in_flight, local.writes_in_flight) == (24, 0)
    assert array.max_backlog_used == 25
    assert not array.writes_suspended
    assert array.is_ahead("sda")
    assert not array.is_ahead("dm-0")


def test_what_a_session_negotiated_and_its_disks_scheduler() -> None:
    # scsi_transport_iscsi.c prints these as numbers; queue/scheduler brackets the active one.
    values = {"targetname": "iqn.x:y", "state": "LOGGED_IN", "initial_r2t": "1\n", "immediate_data": "1\n"}
    session = build_iscsi_session(
        1, {**values, "first_burst_len": "65536\n", "scheduler": "[mq-deadline] none\n"}
    )
    assert (session.initial_r2t, session.immediate_data, session.first_burst) == (True, True, 65536)
    assert session.scheduler == "mq-deadline"
    unread = build_iscsi_session(1, {"targetname": "iqn.x:y", "state": "LOGGED_IN"})
    assert (unread.initial_r2t, unread.first_burst, unread.scheduler) == (None, None, "")


def test_initiator_name() -> None:
    text = "## DO NOT EDIT OR REMOVE THIS FILE!\nInitiatorName=iqn.1993-08.org.debian:01:abc\n"
    assert parse_initiator_name(text) == "iqn.1993-08.org.debian:01:abc"
    with pytest.raises(ParseError):
        parse_initiator_name("# empty\n")


# --- device-mapper caches (fixtures/lab-6.1/record-cache.sh) -------------------------------------


def test_a_writecache_table_gives_its_devices_block_and_options() -> None:
    table = parse_dm_table(fixture("dmsetup-table-writecache.txt"))
    assert (table.length, table.target, table.devices, table.block_size) == (
        524288,
        "writecache",
        ("252:1", "252:8"),
        4096,
    )
    assert table.options == {"high_watermark": "50", "low_watermark": "45"}
    cleaner = parse_dm_table(fixture("dmsetup-table-writecache-cleaner.txt"))
    assert cleaner.options["cleaner"] == ""
    assert cleaner.options["writeback_jobs"] == "64"
    # The `cleaner` message leaves no trace in the table: remirror reloads instead.
    assert "cleaner" not in parse_dm_table(fixture("dmsetup-table-writecache-cleaner-message.txt")).options


def test_linear_and_dm_cache_tables() -> None:
    assert parse_dm_table(fixture("dmsetup-table-linear.txt")).devices == ("252:1",)
    cache = parse_dm_table(fixture("dmsetup-table-cache.txt"))
    assert (cache.target, cache.devices, cache.block_size) == ("cache", ("252:10", "252:11", "252:1"), 65536)
    assert cache.options["policy"] == "smq"


@pytest.mark.parametrize(
    ("name", "blocks", "dirty", "clean"),
    [
        ("dmsetup-status-writecache-dirty.txt", 16320, 2048, False),
        ("dmsetup-status-writecache-clean.txt", 16320, 0, True),
        ("dmsetup-status-writecache-suspended.txt", 16320, 0, True),
        ("dmsetup-status-writecache-before-crash.txt", 16320, 1024, False),
        # Re-created from the same disks after the crash: the same blocks in use.
        ("dmsetup-status-writecache-after-crash.txt", 16320, 1024, False),
        ("dmsetup-status-cache-dirty.txt", 896, 64, False),
        ("dmsetup-status-cache-clean.txt", 896, 0, True),
    ],
)
def test_cache_status_counts_dirty_blocks(name: str, blocks: int, dirty: int, clean: bool) -> None:
    status = parse_cache_status(fixture(name))
    assert (status.blocks, status.dirty, status.clean, status.error) == (blocks, dirty, clean, 0)


def test_dm_cache_in_cleaner_policy_says_so_in_its_status() -> None:
    assert parse_cache_status(fixture("dmsetup-status-cache-clean.txt")).cleaner
    assert not parse_cache_status(fixture("dmsetup-status-cache-dirty.txt")).cleaner


def test_a_writecache_error_and_a_failed_dm_cache_are_errors() -> None:
    assert parse_cache_status("0 524288 writecache -5 16320 14272 0 1 0 0 0 0 0 0 0 0 0").error == -5
    failed = fixture("dmsetup-status-cache-dirty.txt").replace(" rw ", " Fail ")
    assert parse_cache_status(failed).error == -5


def test_not_a_cache_status_is_refused() -> None:
    with pytest.raises(ParseError, match="not a writecache or cache status"):
        parse_cache_status(fixture("dmsetup-table-linear.txt"))


def test_the_writecache_superblock_magic_is_what_the_agent_looks_for() -> None:
    from remirror.agent.observe import WRITECACHE_MAGIC

    dump = fixture("writecache-crash.txt").splitlines()[1].split()[1:5]
    assert bytes(int(b, 16) for b in dump) == WRITECACHE_MAGIC


def test_block_stat_of_a_dm_device() -> None:
    from remirror.facts.parsers import parse_block_stat

    counters = parse_block_stat(fixture("sys-block-stat-dm.txt"))
    assert (counters.reads, counters.writes, counters.in_flight) == (2312, 2048, 0)


def test_a_members_writes_in_flight_and_writes_held_from_sysfs() -> None:
    # /sys/block/sdX/inflight is "%8u %8u\n", reads then writes (block/genhd.c); md's suspend_lo
    # and suspend_hi are sectors, writes between them wait in md.
    sysfs = {
        **key_values("sysfs-md.txt"),
        "dev-sda/block/inflight": "       0        7\n",
        "suspend_lo": "0\n",
        "suspend_hi": "520192\n",
    }
    array = build_md_array("md127", sysfs, fixture("mdadm-detail-export.txt"))
    remote, local = array.member("sda"), array.member("dm-0")
    assert remote is not None
    assert local is not None
    assert (remote.writes_in_flight, local.writes_in_flight) == (7, None)  # dm-0's was not read
    assert array.writes_suspended
    assert not build_md_array(
        "md127", key_values("sysfs-md.txt"), fixture("mdadm-detail-export.txt")
    ).writes_suspended


def test_an_arrays_own_resync_limit_and_the_systems() -> None:
    # md prints KiB/s and whose limit it is (drivers/md/md.c, sync_max_show; Debian 12's 6.1).
    assert parse_speed_limit("40960 (local)\n") == 40 << 20
    assert parse_speed_limit("200000 (system)\n") is None
    assert parse_speed_limit("") is None


def test_safe_mode_s_delay_is_read_in_seconds() -> None:
    # md's 200 ms default as Debian 12's kernel prints it (6.1.0-57-amd64, HZ 250: 51 ticks),
    # read in the hosts' lab on 2026-12-01; remirror's 10 s as md prints it back.
    for shown, seconds in (("0.204\n", 0.204), ("10.000\n", 10.0)):
        sysfs = {**key_values("sysfs-md.txt"), "safe_mode_delay": shown}
        assert build_md_array("md127", sysfs, fixture("mdadm-detail-export.txt")).safe_mode_delay == seconds
    assert (
        build_md_array(
            "md127", key_values("sysfs-md.txt"), fixture("mdadm-detail-export.txt")
        ).safe_mode_delay
        is None
    )
