"""`remirror estimate`'s arithmetic (remirror.plan.estimate) and what it prints."""

from __future__ import annotations

import dataclasses

import pytest

from remirror.cli.estimate import _as_json, _lines
from remirror.facts.parsers import parse_block_stat
from remirror.plan.estimate import Estimate, Sample, WriteLoad, write_load
from remirror.units import format_bits, parse_rate

MiB = 1024 * 1024
# /sys/class/block/loop0/stat, recorded on Linux 6.18.44 (the format is Documentation/block/stat.rst's
# 17 fields, the same on the lab's 6.1): 346000 writes completed, 2768000 sectors written.
LOOP0_STAT = (
    "       0        0        0        0   346000        0  2768000     8221        0     7964     8221"
    "        0        0        0        0        0        0\n"
)


def test_a_block_stat_line_gives_writes_and_sectors_written() -> None:
    counters = parse_block_stat(LOOP0_STAT)
    assert (counters.writes, counters.sectors_written, counters.sectors_discarded) == (346000, 2768000, 0)
    with pytest.raises(ValueError, match="not a block device's stat"):
        parse_block_stat("0 0 0")


def test_the_load_is_the_mean_over_the_window_and_the_busiest_interval() -> None:
    # 10 s idle, then 10 s at 1000 writes of 4 KiB a second, then 20 s at 100 a second.
    samples = [
        Sample(0.0, 0, 0),
        Sample(10.0, 0, 0),
        Sample(20.0, 10_000, 10_000 * 8),
        Sample(40.0, 12_000, 12_000 * 8),
    ]
    load = write_load(samples)
    assert load.seconds == 40
    assert load.mean_bytes == 12_000 * 4096 / 40
    assert load.peak_bytes == 1000 * 4096
    assert (load.mean_writes, load.peak_writes) == (300, 1000)
    assert load.write_size == 4096


def test_a_counter_that_went_back_counts_as_idle_not_negative() -> None:
    # The device was re-created between two samples (an array stopped and assembled again).
    load = write_load([Sample(0, 500, 4000), Sample(5, 10, 80), Sample(10, 20, 160)])
    assert load.mean_bytes == 80 * 512 / 10
    assert load.peak_bytes == 80 * 512 / 5


def test_one_sample_is_no_load() -> None:
    with pytest.raises(ValueError, match="two samples"):
        write_load([Sample(0, 0, 0)])


LOAD = WriteLoad(seconds=600, mean_bytes=1_000_000, peak_bytes=10_000_000, mean_writes=250, peak_writes=2500)
FIFTY_MBIT = parse_rate("50Mbit")
TWO_TB = 2 * 10**12


def office(**changes: object) -> Estimate:
    base = Estimate(
        mirror="files",
        mode="async",
        disk_bytes=TWO_TB,
        load=LOAD,
        link_bytes=FIFTY_MBIT,
        link_measured=True,
        rtt_seconds=0.014,
        resync_max=None,
        bitmap_chunk=64 * MiB,
        write_behind=4096,
        outage_seconds=3600,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_the_initial_sync_gets_the_link_less_the_primarys_own_writes() -> None:
    e = office()
    assert FIFTY_MBIT == 6_250_000
    assert e.sync_rate == 5_250_000
    assert e.initial_sync_seconds == TWO_TB / 5_250_000  # about 4.4 days
    limited = office(resync_max=4 * MiB)
    assert limited.sync_rate == 4 * MiB  # resync_max below what the link leaves
    assert office(link_bytes=1_000_000).initial_sync_seconds is None  # the writes take it all


def test_an_outage_leaves_its_writes_in_whole_bitmap_chunks_at_most_the_disk() -> None:
    e = office()
    written = 1_000_000 * 3600
    chunks = -(-written // (64 * MiB))
    assert e.outage_dirty_bytes == chunks * 64 * MiB
    assert e.resync_seconds == e.outage_dirty_bytes / e.sync_rate
    assert office(outage_seconds=30 * 86400).outage_dirty_bytes == TWO_TB  # no more than the disk
    assert (office(outage_seconds=0).outage_dirty_bytes, office(outage_seconds=0).resync_seconds) == (0, 0)


def test_async_fills_write_behind_when_the_busiest_pace_outruns_the_link() -> None:
    e = office()
    assert e.peak_excess_bytes == 10_000_000 - FIFTY_MBIT
    # 3.75 MB/s too many, 4000 bytes a write: 937.5 writes a second beyond the link.
    assert e.write_behind_full_seconds == pytest.approx(4096 / (3_750_000 / 4000))
    fast = office(link_bytes=parse_rate("1Gbit"))
    assert (fast.peak_excess_bytes, fast.write_behind_full_seconds) == (0, None)


def test_sync_fits_when_the_link_carries_the_busiest_writes_and_costs_a_round_trip_each() -> None:
    assert not office().sync_fits
    fast = office(link_bytes=parse_rate("1Gbit"))
    assert fast.sync_fits
    assert fast.sync_write_delay_seconds == pytest.approx(0.014 + 4000 / 125_000_000)
    assert office(rtt_seconds=None).sync_write_delay_seconds is None


def test_the_text_says_each_answer_in_a_line() -> None:
    lines = _lines(office(), "/dev/md/files")
    assert lines[0] == (
        "files (async, 1.82TiB): /dev/md/files writes 977KiB/s on average, 9.54MiB/s at its busiest, over 10m"
    )
    assert lines[1] == f"  link: {format_bits(FIFTY_MBIT)} (measured), round trip 14ms"
    assert lines[2].startswith("  initial sync: about 4d10h")
    assert "to resync" in lines[3]
    assert lines[4].startswith("  sync mode: does not fit")
    assert lines[5].startswith("  async mode: the busiest pace outruns the link by 3.58MiB/s; write-behind")
    never = _lines(office(link_bytes=500_000), "/dev/sdb")
    assert "initial sync: never" in never[2]


def test_the_json_carries_every_figure_in_base_units() -> None:
    document = _as_json(office(resync_max=4 * MiB), "/dev/md/files")
    assert document["sync_rate_bytes_per_second"] == 4 * MiB
    assert document["link"] == {"bytes_per_second": FIFTY_MBIT, "measured": True, "rtt_seconds": 0.014}
    assert document["outage"]["seconds"] == 3600
    assert document["sync"]["fits"] is False
    assert document["async"]["write_behind_full_seconds"] > 0
