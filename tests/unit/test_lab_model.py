"""The lab's performance model: what the modelled disks and links declare, and how the
lab's time dilation scales them (remirror.lab.model)."""

from __future__ import annotations

import pytest

from remirror.lab.model import (
    HDD,
    LAN,
    SSD,
    DiskModel,
    dilation_factor,
    overhead_to_take_off,
    parse_dilation,
    probe_ratios,
    sync_hours,
    to_physical_seconds,
)
from remirror.lab.spec import Wan


def test_the_hdd_declares_a_7200_rpm_disk() -> None:
    # One write a service time; two served at once (NCQ); 1 MiB writes in 512 KiB requests.
    assert HDD.declared() == pytest.approx(
        {"qd1_write_ms": 10.0, "random_iops": 200.0, "sequential_mb_s": 2 * 2**19 / 0.010 / 1e6}
    )


def test_the_ssd_declares_a_sata_ssd() -> None:
    # 1 MiB is 128 pieces of 8 KiB; four are served per 60 us.
    assert SSD.declared() == pytest.approx(
        {"qd1_write_ms": 0.06, "random_iops": 4 / 60e-6, "sequential_mb_s": 4 * 8192 / 60e-6 / 1e6}
    )


def test_random_iops_are_bounded_by_the_queue_the_bench_keeps() -> None:
    deep = DiskModel(
        "deep", "a disk serving 32 at once", service_ms=1.0, depth=32, max_io=4096, rotational=False
    )
    assert deep.random_iops == pytest.approx(16_000)  # fio keeps 16 in flight, not 32


def test_a_dilated_disk_serves_each_request_dilation_times_slower() -> None:
    assert HDD.null_blk(40) == {
        "completion_nsec": 400_000_000,
        "hw_queue_depth": 2,
        "submit_queues": 1,
        "max_sectors": 1024,
    }
    assert SSD.null_blk(1)["completion_nsec"] == 60_000
    assert SSD.null_blk(2.5)["max_sectors"] == 16


def test_a_modelled_disks_queue_is_a_real_ones_as_far_as_dilation_allows() -> None:
    # Room for 64 requests in front of a disk that serves 2, writes allowed 3/4 of it (set
    # after the room: Linux 6.1 figures it from the old size), the kind of disk it models,
    # and no writeback throttling: on a dilated null_blk it let md's writes go one at a time.
    assert list(HDD.queue().items()) == [
        ("scheduler", "mq-deadline"),
        ("nr_requests", "64"),
        ("iosched/async_depth", "48"),
        ("rotational", "1"),
        ("wbt_lat_usec", "0"),
    ]
    assert SSD.queue()["rotational"] == "0"


def test_the_guests_own_time_per_request_is_taken_off_the_service_time() -> None:
    # 100 ms dilated; the guest adds 2 ms one at a time, 3 ms queued, 16 ms for a large
    # request: their mean, 7 ms, comes off.
    measured = {"one_at_a_time_s": 0.002, "queued_s": 0.003, "stream_s": 0.016}
    taken_off = overhead_to_take_off(measured, 0.100)
    assert taken_off == pytest.approx(0.007)
    assert HDD.null_blk(10, taken_off)["completion_nsec"] == 93_000_000
    # Never more than half the service time, and a probe faster than modelled takes nothing off.
    assert overhead_to_take_off({"a": 0.3, "b": 0.5}, 0.100) == pytest.approx(0.050)
    assert overhead_to_take_off({"a": -0.001, "b": -0.002}, 0.100) == 0.0


def test_a_disk_model_with_impossible_figures_is_refused() -> None:
    with pytest.raises(ValueError, match="bad figures"):
        DiskModel("odd", "?", service_ms=1, depth=1, max_io=1000, rotational=True)


def test_the_lan_is_dilated_delay_up_rate_down() -> None:
    assert LAN.netem(1) == ["delay", "50us", "rate", "10000000kbit"]
    assert LAN.netem(40) == ["delay", "2000us", "rate", "250000kbit"]


def test_a_wan_is_a_physical_link_in_a_dilated_lab() -> None:
    wan = Wan(delay="7ms", jitter="1ms", rate="1gbit", loss="0.5%")
    assert wan.dilated_netem_args(30, LAN.rate_bit_s) == [
        *("delay", "210000us", "30000us"),
        *("rate", "33333kbit", "loss", "0.5%"),
    ]
    # No rate of its own: the modelled LAN's, scaled.
    assert Wan(delay="7ms").dilated_netem_args(10, LAN.rate_bit_s) == [
        "delay",
        "70000us",
        "rate",
        "1000000kbit",
    ]
    assert Wan(delay="500us").dilated_netem_args(1, None) == ["delay", "500us"]


def test_dilation_is_the_geometric_mean_of_the_probes_ratios() -> None:
    host = {"cpu": 1e-7, "syscall": 1e-6, "tcp_round_trip": 1e-4, "block_write": 1e-5}
    guest = {"cpu": 1e-6, "syscall": 4e-5, "tcp_round_trip": 8e-3, "block_write": 1e-4}  # 10, 40, 80, 10
    assert probe_ratios(host, guest) == pytest.approx(
        {"cpu": 10, "syscall": 40, "tcp_round_trip": 80, "block_write": 10}
    )
    assert dilation_factor(host, guest) == pytest.approx((10 * 40 * 80 * 10) ** 0.25)


def test_a_probe_missing_on_either_side_is_an_error_not_a_factor() -> None:
    both = {"cpu": 1.0, "syscall": 1.0, "tcp_round_trip": 1.0, "block_write": 1.0}
    with pytest.raises(ValueError, match="no measurement of tcp_round_trip"):
        dilation_factor(both, {"cpu": 1, "syscall": 1, "block_write": 1})


@pytest.mark.parametrize(("text", "value"), [("auto", None), ("1", 1.0), ("37.5", 37.5)])
def test_dilation_is_auto_or_a_factor(text: str, value: float | None) -> None:
    assert parse_dilation(text) == value


@pytest.mark.parametrize(("text", "message"), [("fast", "expected auto or a number"), ("0.5", "1 to 1000")])
def test_bad_dilations_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_dilation(text)


def test_lab_time_maps_back_to_the_modelled_hardware() -> None:
    assert to_physical_seconds(400.0, 40) == pytest.approx(10.0)
    # 1 TB at 50 Mbit/s is 44.4 hours; at 1 Gbit/s (125 MB/s) 2.2 hours.
    assert sync_hours(1e12, 50e6 / 8) == pytest.approx(44.44, abs=0.01)
    assert sync_hours(1e12, 125e6) == pytest.approx(2.222, abs=0.001)
