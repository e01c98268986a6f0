"""The benchmarks' pure parts: the trace's conversion to a fio replay log, and the report.

The recorded results come from bench/suite.py in the lab (each `meta` names the
kernel, fio and mdadm versions): fixtures/bench-results-lab.json from a short run
in a plain lab with the link grid (3 s fio jobs: a real run's shape, not its
figures), fixtures/bench-results-model.json from the run under the performance
model that met every target but CDP's (bench/results/2026-11-26-model).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))  # bench/ is scripts, not a package

import report
import workloads

RESULTS = Path(__file__).parent / "fixtures" / "bench-results-lab.json"
MODELLED = Path(__file__).parent / "fixtures" / "bench-results-model.json"


def iolog_rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines()[1:]]


def test_the_trace_becomes_a_timed_fio_log_of_whole_4k_blocks_inside_the_region() -> None:
    text = workloads.trace_iolog("/dev/md/x", seconds=30)
    assert text.startswith("fio version 3 iolog\n0 /dev/md/x add\n0 /dev/md/x open\n")
    ios = [row for row in iolog_rows(text) if row[2] in ("read", "write")]
    assert ios, "no I/O replayed"
    times = [int(row[0]) for row in ios]
    assert times == sorted(times)
    assert times[0] == 0
    assert times[-1] < 30_000_000
    for _, _, _, offset, length in ios:
        assert int(offset) % 4096 == 0
        assert int(length) % 4096 == 0
        start = int(offset) - workloads.REGION_OFFSET
        assert start >= 0
        assert start + int(length) <= workloads.REGION_SIZE
    assert iolog_rows(text)[-1] == ["30000000", "/dev/md/x", "close"]


def test_a_trace_request_is_rounded_out_never_shortened() -> None:
    # The sample's first request: 512 bytes at sector 42932745 lies in one 4 KiB block.
    first = next(row for row in iolog_rows(workloads.trace_iolog("/dev/x", seconds=1)) if row[2] == "write")
    sector_bytes = 42932745 * 512
    assert int(first[4]) == 4096
    assert (int(first[3]) - workloads.REGION_OFFSET) == (sector_bytes // 4096 * 4096) % (
        workloads.REGION_SIZE - (1 << 20)
    )


def test_the_trace_sample_says_where_it_comes_from() -> None:
    source = (workloads.TRACE.parent / "README.md").read_text()
    assert "libCacheSim" in source
    assert "CloudPhysics" in source


@pytest.fixture
def results() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(RESULTS.read_text())
    return loaded


def test_the_report_gives_each_target_its_ratio_and_verdict(tmp_path: Path) -> None:
    results = json.loads(MODELLED.read_text())
    text = report.render(results, tmp_path)
    seq = results["configs"]["S-iL"]["seq"]["mb_per_s"] / results["configs"]["baseline"]["seq"]["mb_per_s"]
    row = next(line for line in text.splitlines() if line.startswith("| S-iL 1 MiB sequential"))
    assert f"| {seq:.2f} |" in row
    assert row.endswith("| met |") == (seq >= 0.97)
    resync = next(line for line in text.splitlines() if line.startswith("| bytes resynced"))
    assert resync.endswith("| met |")  # 1.00x the dirty chunks in that run
    cdp = next(line for line in text.splitlines() if line.startswith("| CDP-60s / S-iL 4 KiB QD1 mean"))
    assert cdp.endswith("| **not met** |")  # 3.17x in that run
    # Where CDP's cost lies: its layers cost nothing standing, so the points cost it all.
    stack = next(line for line in text.splitlines() if line.startswith("| CDP-stack / S-iL 1 MiB sequential"))
    assert "| 1.00 |" in stack
    assert stack.endswith("| (reference) |")
    dcd = next(line for line in text.splitlines() if line.startswith("| D-iDL / S-iL 4 KiB QD16"))
    assert dcd.endswith("| met |")  # 80.8x: the cache disks now hold the region
    assert "kernel 6.1.0-56-amd64" in text
    assert "QEMU/TCG" in text


def test_the_calibration_holds_each_modelled_disk_against_its_declared_figures(tmp_path: Path) -> None:
    results = json.loads(MODELLED.read_text())
    factor = results["meta"]["performance"]["dilation"]["factor"]
    text = report.render(results, tmp_path)
    qd1 = next(line for line in text.splitlines() if line.startswith("| hdd | QD1 4 KiB write latency"))
    measured = results["configs"]["baseline"]["qd1"]["mean_ms"] / factor
    assert f"| {measured:.4g} ms |" in qd1
    assert f"| {measured / 10 - 1:+.1%} | yes |" in qd1  # declared 10 ms
    ssd = next(line for line in text.splitlines() if line.startswith("| ssd | QD1 4 KiB write latency"))
    assert ssd.endswith("| **no** |")
    assert f"Dilation {factor:.2f}" in text
    sync = next(line for line in text.splitlines() if line.startswith("| 50 Mbit/s |"))
    assert "(link)" in sync  # 1 TB over 50 Mbit/s: the link is the limit


def test_the_report_tables_the_grid_against_the_link_and_the_capstone(
    results: dict[str, Any], tmp_path: Path
) -> None:
    text = report.render(results, tmp_path)
    rows = [line for line in text.splitlines() if line.startswith("| 1 Mbit") or "Mbit | " in line]
    assert len([r for r in rows if r.split("|")[2].strip().endswith("ms")]) == 12
    one_mbit_150 = next(r for r in rows if r.startswith("| 1 Mbit | 150 ms"))
    assert "0.107 (0.86)" in one_mbit_150  # the capstone's 104.493 KB/s of 122.07
    assert (tmp_path / "grid.png").stat().st_size > 0
    assert (tmp_path / "configs.png").stat().st_size > 0


def test_each_daemon_point_is_placed_in_the_judged_job_it_started_in() -> None:
    import points_daemon

    # (when its line came, the event): a point's line comes once it is taken, `seconds` later.
    events: list[tuple[float, dict[str, Any]]] = [
        (99.0 + 2.0, {"event": "point", "id": 1, "seconds": 2.0}),  # before the jobs: in none
        (130.0 + 3.5, {"event": "point", "id": 2, "seconds": 3.5}),
        (219.9 + 4.0, {"event": "point", "id": 3, "seconds": 4.0}),  # its line in the next job's
        (161.0, {"event": "failed", "mirror": "lab0", "error": "busy"}),
        (250.0 + 1.0, {"event": "point", "id": 4, "seconds": 1.0}),
        (280.0 + 1.0, {"event": "point", "id": 5, "seconds": 1.0}),  # as the last job ends: in none
    ]
    done = points_daemon.record(events, ["a line that is not JSON"], [100.0, 160.0, 220.0], 60)
    assert [p["job"] for p in done["points"]] == [None, 0, 1, 2, None]
    assert [p["into_job_s"] for p in done["points"]] == [None, 30.0, 59.9, 30.0, None]
    assert done["points_per_job"] == [1, 1, 1]
    assert done["failures"] == [{"event": "failed", "mirror": "lab0", "error": "busy"}]
    assert done["other_output"] == ["a line that is not JSON"]


def test_the_report_says_when_the_daemon_took_each_point_and_what_the_dcd_holds_at_steady_state(
    tmp_path: Path,
) -> None:
    results = json.loads(MODELLED.read_text())
    configs = results["configs"]
    configs["CDP-60s-D"] = {
        **configs["CDP-60s"],
        "interval_lab_s": 600,
        "points_taken": 2,
        "daemon": {
            "points": [
                {"at_s": 0.0, "job": 0, "into_job_s": 0.0, "seconds": 2.5},
                {"at_s": 900.0, "job": 1, "into_job_s": 300.0, "seconds": 6.0},
            ],
            "points_per_job": [1, 1, 0],
            "failures": [],
            "other_output": [],
        },
    }
    configs["D-iDL"]["steady"] = {
        "region_bytes": 480 << 20, "cache_full_after_s": 95.0, "seconds": 160.0,
        "burst_iops": 1600.0, "steady_iops": 41.376716, "steady_seconds": 60,
        "iops_per_second": [1600] * 10 + [40] * 60, "fill": [], "whole_job": None,
    }  # fmt: skip
    text = report.render(results, tmp_path)
    line = next(line for line in text.splitlines() if line.startswith("CDP-60s-D:"))
    assert "by `remirror cdp run`" in line
    assert "[1, 1, 0]" in line
    assert "300 s into job 2 (took 6.0 s)" in line
    # The targets for it, held to S-iL as CDP-60s's are.
    assert any(row.startswith("| CDP-60s-D / S-iL 4 KiB QD16 IOPS | >= 0.9 |") for row in text.splitlines())
    steady = text.split("## The DCD at steady state")[1]
    assert "the first 10 s 1600 IOPS" in steady
    assert "full after 95 s" in steady
    assert "41 IOPS (2.0x S-iL's QD16) over the last 60 s" in steady  # 41.38 / 20.69


def test_cdp_over_caches_on_both_legs_is_held_to_s_il_and_shown_against_the_same_legs_without_it(
    tmp_path: Path,
) -> None:
    results = json.loads(MODELLED.read_text())
    configs = results["configs"]
    configs["CDP-60s-DD"] = json.loads(json.dumps(configs["D-iDL"]))
    configs["CDP-60s-DD"]["qd16"]["iops"] = configs["D-iDL"]["qd16"]["iops"] / 2
    rows = report.render(results, tmp_path).splitlines()
    assert any(row.startswith("| CDP-60s-DD / S-iL 4 KiB QD16 IOPS | >= 0.9 |") for row in rows)
    # What CDP itself costs on a DCD: the same legs, with and without it.
    assert any(
        row.startswith("| CDP-60s-DD / D-iDL 4 KiB QD16 IOPS | CDP's cost on a DCD | 0.50 |") for row in rows
    )
    assert any(row.startswith("| CDP-60s-DD / D-iDL 4 KiB QD1 mean latency |") for row in rows)


def test_a_partial_run_reports_what_it_has(tmp_path: Path) -> None:
    text = report.render({"meta": {}, "configs": {}}, tmp_path)
    assert text.startswith("# remirror benchmarks")
    assert "| what | target |" in text
    assert "No performance model" in text


def test_the_lab_time_spent_summary_puts_the_costliest_first() -> None:
    import lab_time_spent

    records = [
        {"test": "t", "kind": "test", "what": "t", "seconds": 20.0, "tests_thread": True},
        {"test": "t", "kind": "sleep", "what": "", "seconds": 1.0, "tests_thread": True},
        {"test": "t", "kind": "sleep", "what": "", "seconds": 1.0, "tests_thread": True},
        {"test": "t", "kind": "sleep", "what": "", "seconds": 0.25, "tests_thread": True},
        {
            "test": "t",
            "kind": "request",
            "what": "site-b lock (first)",
            "seconds": 3.7,
            "tests_thread": False,
        },
        {"test": "t", "kind": "verb", "what": "apply", "seconds": 8.4, "tests_thread": True},
    ]
    assert lab_time_spent.summary(records) == [
        "    20.0 s in 1 tests",
        "     8.4 s     1 x verb apply",
        "     3.7 s     1 x request site-b lock (first)  (beside the test, in a thread)",
        "     2.0 s     2 x sleep 1 s or more",
        "     0.2 s     1 x sleep under 1 s",
    ]


# bench/peer.py's results from a smoke run on the hosts' lab (2026-12-01, before the TCP window
# and safe mode fixes: kernel 6.1.0-57-amd64, DRBD 8.4.11, drbd-utils 9.22.0-1; one round of 5 s
# fio jobs and 10 s of the trace), its initial sync and outage moved into the round as the
# bench now runs them in each: a real run's shape, not its figures.
PEER = Path(__file__).parent / "fixtures" / "bench-results-peer.json"


def three_rounds(results: dict[str, Any], scale: tuple[float, float, float]) -> dict[str, Any]:
    """The recorded round three times, remirror's QD16 IOPS of each cell scaled by `scale`."""
    import copy

    rounds = []
    for factor in scale:
        one = copy.deepcopy(results["rounds"][0])
        for cell, measured in one.items():
            if cell not in ("baseline", "initial_sync", "outage"):
                measured["remirror"]["qd16"]["iops"] *= factor
        rounds.append(one)
    return {**results, "rounds": rounds}


def test_the_peer_report_holds_each_row_to_drbd_s_figure_in_the_same_run() -> None:
    import peer_report

    results = json.loads(PEER.read_text())
    text = peer_report.render(results)
    cell = results["rounds"][0]["WAN sync"]
    ratio = cell["remirror"]["seq"]["mb_per_s"] / cell["drbd"]["seq"]["mb_per_s"]
    wan = text[text.index("## WAN, remirror sync mode against DRBD protocol C") :]
    row = next(line for line in wan.splitlines() if line.startswith("| 1 MiB sequential MB/s"))
    assert f"| {ratio:.2f} |" in row
    assert row.endswith("| **under 0.95** |")  # 0.24 in that run, before the TCP window fix
    # Sequential writes over the WAN against the physical limit: the disk, as the baseline measured it.
    limit = next(line for line in text.splitlines() if line.startswith("| sync | "))
    disk = results["rounds"][0]["baseline"]["seq"]["mb_per_s"]
    assert f"| {disk:.2f} (the disk) |" in limit
    assert "WAN sync: sequential 0.17 of min(link, disk)" in text
    # The resync after the same outage: md's chunks against DRBD's 4 KiB blocks.
    outage = results["rounds"][0]["outage"]
    md, peer = outage["remirror"]["bytes_written_at_dr"], outage["drbd"]["bytes_written_at_dr"]
    assert f"| MB written at the DR site | {md / 1e6:.1f} | {peer / 1e6:.1f} | {md / peer:.2f}x |" in text
    assert "DRBD 8.4.11 (drbd-utils 9.22.0-1)" in text


def test_a_peer_ratio_is_the_median_of_the_rounds_own_ratios_with_their_spread() -> None:
    import peer_report

    results = three_rounds(json.loads(PEER.read_text()), (0.9, 1.2, 1.0))
    cell = results["rounds"][0]["LAN sync"]
    base = cell["remirror"]["qd16"]["iops"] / 0.9 / cell["drbd"]["qd16"]["iops"]
    text = peer_report.render(results)
    lan = text[text.index("## LAN, remirror sync mode") :]
    row = next(line for line in lan.splitlines() if line.startswith("| 4 KiB QD16 write IOPS"))
    assert f"| {base:.2f} ({base * 0.9:.2f}-{base * 1.2:.2f}) |" in row


def test_the_peer_report_shows_what_each_leg_s_disk_took_during_each_job() -> None:
    import peer_report

    results = json.loads(PEER.read_text())
    cell = results["rounds"][0]["LAN sync"]
    # Made-up counts, in the shape bench/peer.py records from each disk's block stat around a job.
    cell["remirror"]["requests"] = {
        "qd16": {
            "site-a": {"writes": 410, "kib_written": 1640.0, "kib_per_write": 4.0},
            "site-b": {"writes": 388, "kib_written": 1552.0, "kib_per_write": 4.0},
        }
    }
    cell["drbd"]["requests"] = {
        "qd16": {
            "site-a": {"writes": 402, "kib_written": 1608.0, "kib_per_write": 4.0},
            "site-b": {"writes": 201, "kib_written": 1608.0, "kib_per_write": 8.0},
        }
    }
    text = peer_report.render(results)
    lan = text[text.index("## LAN, remirror sync mode") : text.index("## LAN, remirror async mode")]
    assert "What each leg's disk took during each job:" in lan
    row = next(line for line in lan.splitlines() if line.startswith("| qd16 |"))
    assert row == "| qd16 | 410.0 | 402.0 | 388.0 | 201.0 | 4.0 | 8.0 |"
    assert not any(line.startswith("| qd1 |") for line in lan.splitlines())  # not counted: no row
    # A run that counted nothing (the recorded one) shows no such table.
    assert "What each leg's disk took" not in peer_report.render(json.loads(PEER.read_text()))


def test_a_leg_s_requests_during_a_job_are_the_difference_of_its_block_stat() -> None:
    import peer

    from remirror.facts.parsers import parse_block_stat

    # Two readings of a disk's stat in the layout of Documentation/block/stat.rst (17 fields,
    # as Debian 12's 6.1 kernel writes it), made up: 400 writes of 8 sectors between them.
    before = parse_block_stat("  120 0 960 40 3000 0 24000 9000 0 8000 9040 0 0 0 0 0 0")
    after = parse_block_stat("  120 0 960 40 3400 0 27200 9900 0 8800 9940 0 0 0 0 0 0")
    assert peer.requests_taken(before, after) == {"writes": 400, "kib_written": 1600.0, "kib_per_write": 4.0}
    assert peer.requests_taken(after, after)["kib_per_write"] == 0.0
    # A sync's record: its bytes as the sectors' difference times 512, as it always was.
    assert peer.at_dr(before, after) == {
        "bytes_written_at_dr": (27200 - 24000) * 512,
        "writes_at_dr": 400,
        "kib_per_write_at_dr": 4.0,
    }
    # A copy's reads of the primary's disk: 1024 reads of 128 sectors (64 KiB, md's resync size).
    source = parse_block_stat("  1144 0 132032 40 3400 0 27200 9900 0 8800 9940 0 0 0 0 0 0")
    assert peer.read_at_primary(before, source) == {"reads_at_primary": 1024, "kib_per_read_at_primary": 64.0}
    assert peer.read_at_primary(before, before)["kib_per_read_at_primary"] == 0.0


def test_a_verb_s_cost_per_site_is_read_from_the_lines_remirror_v_logs() -> None:
    import logging

    from basics import site_costs

    from remirror.logs import setup_logging

    # The controller's own line (remirror.controller's close), through the CLI's formatter.
    logger = logging.getLogger("remirror")
    kept = logger.handlers[:], logger.level, logger.propagate
    try:
        setup_logging(1, False)
        handler = logger.handlers[0]
    finally:
        logger.handlers[:], logger.level, logger.propagate = kept[0], kept[1], kept[2]
    records = []
    for site, requests, commands, answered in (("site-a", 3, 41, 20480), ("site-b", 2, 17, 9216)):
        record = logging.LogRecord(
            "remirror.controller", logging.INFO, __file__, 0,
            "site %s: %d agent requests, %d commands run, %d bytes of answers",
            (site, requests, commands, answered), None,
        )  # fmt: skip
        records.append(handler.format(record))
    costs = site_costs("\n".join(["remirror: INFO: observing site-b", *records]))
    assert costs == {
        "site-a": {"requests": 3, "commands": 41, "answer_bytes": 20480},
        "site-b": {"requests": 2, "commands": 17, "answer_bytes": 9216},
    }
    assert site_costs("remirror: error: site-b unreachable") == {}


def test_the_syncs_tables_show_the_dr_disk_s_requests_once_counted() -> None:
    import peer_report

    results = json.loads(PEER.read_text())
    first = results["rounds"][0]["initial_sync"]
    first["remirror"].update(writes_at_dr=4160, kib_per_write_at_dr=128.0)
    first["drbd"].update(writes_at_dr=1040, kib_per_write_at_dr=512.0)
    text = peer_report.render(results)
    assert "| KiB per write at the DR site | 128.0 | 512.0 | 0.25x |" in text
    assert "| write requests at the DR site's disk | 4160.0 | 1040.0 | 4.00x |" in text
    # The outage, which this run did not count: no such row.
    outage = text[text.index("**Resync after the same outage**") :]
    assert "KiB per write" not in outage.split("\n\n")[1]


# fio 3.33's completion-latency log (`--write_lat_log=qd1 --log_offset=1`), Debian 12's fio, a
# QD1 job on this machine's disk: msec, nsec, direction (1: write), bytes, offset, priority.
FIO_CLAT_LOG = """0, 247168, 1, 4096, 2023424, 0
0, 97515, 1, 4096, 24838144, 0
1203, 283115520, 1, 4096, 104857600, 0
1299, 95944704, 1, 4096, 8388608, 0
6210, 441501800, 1, 4096, 134217728, 0
6400, 73639, 0, 4096, 28291072, 0
"""


def test_the_qd1_job_s_slowest_writes_come_in_order_with_when_and_where() -> None:
    slowest = workloads.slowest_writes(FIO_CLAT_LOG, count=2)
    assert slowest == [
        {"at_s": 1.203, "ms": 283.116, "offset_mib": 100.0},
        {"at_s": 6.21, "ms": 441.502, "offset_mib": 128.0},
    ]
    assert len(workloads.slowest_writes(FIO_CLAT_LOG)) == 5  # reads (direction 0) are not writes


def test_the_peer_report_lists_each_system_s_slowest_qd1_writes_in_order() -> None:
    import peer_report

    results = json.loads(PEER.read_text())
    cell = results["rounds"][0]["LAN sync"]
    cell["remirror"]["qd1"]["slowest"] = workloads.slowest_writes(FIO_CLAT_LOG, count=2)
    text = peer_report.render(results)
    lan = text[text.index("## LAN, remirror sync mode") : text.index("## LAN, remirror async mode")]
    assert "- round 1, remirror: 283 ms at 1.2 s, 442 ms at 6.2 s" in lan
    assert "round 1, drbd" not in lan  # logged none
    assert "slowest writes" not in peer_report.render(json.loads(PEER.read_text()))


def _own_pass(round_: int, points: bool, p50: float, iops: float) -> dict[str, Any]:
    latency = {"p50_ms": p50, "p99_ms": 2 * p50, "mean_ms": 1.1 * p50}
    done: dict[str, Any] = {
        "round": round_, "points": points, "qd1": latency, "qd16": {"iops": iops},
        "qd1_drained_s": 0.5, "qd16_drained_s": 3.0,
    }  # fmt: skip
    if points:
        done["daemon"] = {"points_per_job": [1, 1]}
    return done


def test_the_dr_sites_own_points_are_judged_round_by_round_against_the_pass_without_them() -> None:
    own = {
        "every_s": 10,
        "interval_lab_s": 60,
        "passes": [
            _own_pass(1, False, 10.0, 100), _own_pass(1, True, 10.4, 98),
            _own_pass(2, True, 12.0, 90), _own_pass(2, False, 10.0, 95),
            _own_pass(3, False, 10.0, 99), _own_pass(3, True, 10.2, 97),
        ],
    }  # fmt: skip
    lines = report.own_points_lines(own, {"async-W": {"qd1": {"p50_ms": 10.0}}})
    text = "\n".join(lines)
    # Each round's ratio (1.04, 1.20, 1.02): the median and the range, not a mean of all passes.
    assert "median of 3 rounds (range): QD1 p50 1.04x (1.02-1.20); QD1 p99 1.04x (1.02-1.20)" in text
    assert "QD16 IOPS 0.98 (0.95-0.98). The target: QD1 p50 <= 1.05x." in text
    assert "| 2 | yes | 12.0 / 24.0 / 13.2 | 0.5 | 90 | 3.0 | [1, 1] |" in text
    assert "| 2 | no | 10.0 / 20.0 / 11.0 | 0.5 | 95 | 3.0 | - |" in text
    assert "QD1 p50 1.04x with the points, median of 3" in text  # median(10.4, 12.0, 10.2) / 10.0


def test_the_bench_s_wipe_leaves_no_cdp_metadata_on_its_disks_for_the_next_stack() -> None:
    """A CDP step's metadata on the DR leg, left by an 8 MiB wipe, made the next stack there refuse
    the disk (2026-12-04's own-points step)."""
    import common

    from remirror.facts.cdp import layout
    from remirror.profile.layers import CDP_CHUNK

    disk = 512 << 20  # ./dev bench's --disk-size
    metadata = layout(disk // 512, CDP_CHUNK, 60).data[0] * 512
    assert metadata <= common.WIPE_BYTES


def test_site_bs_view_of_a_bench_profile_has_site_b_local_and_the_same_mirror(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import common

    from remirror.lab.probes import LAB_PROFILE
    from remirror.profile.loader import parse_profile

    at_a = tmp_path / "bench-own.yaml"
    points = "        points: {every: 60s, keep: 120s, history: 60}\n"
    at_a.write_text(
        LAB_PROFILE.read_text().replace("        disk: /dev/lab/b0\n", "        disk: /dev/lab/b0\n" + points)
    )
    monkeypatch.setattr(common, "SITE_B_PROFILES", tmp_path / "etc")
    (tmp_path / "etc").mkdir()
    view = common.site_b_view(at_a)
    assert view == tmp_path / "etc" / "bench-own.yaml"
    a, b = parse_profile(at_a.read_text()), parse_profile(view.read_text())
    assert [name for name, site in a.sites.items() if site.is_local] == ["site-a"]
    assert [name for name, site in b.sites.items() if site.is_local] == ["site-b"]
    assert a.mirrors == b.mirrors  # what site B holds site A's requests to is the same mirror
    assert b.mirrors[0].legs[1].points is not None


def test_the_tail_probe_gives_each_condition_s_p99_against_the_bare_disk_s_and_what_each_disk_held() -> None:
    import peer_tail

    # Made up: two rounds; DRBD's job in round 2 lost its peer, so that round has no DRBD row.
    def job(p99: float, at_a: list[int], at_b: list[int] | None = None, valid: bool = True) -> dict[str, Any]:
        in_flight = {"site-a": at_a} | ({"site-b": at_b} if at_b is not None else {})
        return {
            "iops": 28.0,
            "p50_ms": 500.0,
            "p99_ms": p99,
            "mean_ms": 550.0,
            "in_flight": in_flight,
            "valid": valid,
        }

    results = {
        "meta": {"commit": "abc1234", "dilation": {"factor": 7.1}},
        "rounds": [
            {
                "bare": job(1500, [16, 16]),
                "bare, fifo": job(900, [16]),
                "drbd": job(1000, [16, 15], [0, 2, 3, 4, 0]),
            },
            {
                "bare": job(1700, [16]),
                "bare, fifo": job(1020, [16]),
                "drbd": job(900, [16], [9], valid=False),
            },
        ],
    }
    lines = peer_tail.report(results).splitlines()
    assert lines[0].startswith("# DRBD's QD16 tail against the bare disk's, 2 rounds (peer_tail.py, abc1234")
    assert "| bare | 28.00 (28.00-28.00) | 500.00 (500.00-500.00) | 1600.00 (1500.00-1700.00) |" in lines[-3]
    # Against the bare disk of its own round: 900/1500 and 1020/1700, both 0.60.
    assert "| 0.60 (0.60-0.60) | 16 / 16 | - |" in lines[-2]
    # The invalid job is left out: DRBD's row is round 1's alone, its DR disk holding 2-4 (idle looks
    # not counted).
    assert lines[-1] == (
        "| drbd | 28.00 (28.00-28.00) | 500.00 (500.00-500.00) | 1000.00 (1000.00-1000.00) | 550.00 (550.00-550.00)"
        " | 0.67 (0.67-0.67) | 16 / 16 | 3 / 4 |"
    )
    # Conditions that did not run have no row.
    assert not any(line.startswith(("| remirror", "| drbd, no-drain")) for line in lines)


# /proc/PID/stack as Linux 6.1 writes it (format of Debian 12's 6.1.0 kernel; the frames made up
# from md's raid1 write path): innermost first, the sleep's own frames before what it waits on.
STACK = """[<0>] __schedule+0x34d/0x9e0
[<0>] schedule+0x5a/0xd0
[<0>] md_bitmap_startwrite+0x1a2/0x1f0 [md_mod]
[<0>] raid1_write_request+0x2c5/0xa10 [raid1]
[<0>] raid1_make_request+0x8b/0x100 [raid1]
[<0>] md_handle_request+0x12f/0x1b0 [md_mod]
"""


def test_where_a_writer_waits_is_its_stack_past_the_sleep_s_own_frames(tmp_path: Path) -> None:
    from remirror.lab.probes import Waits, stack_frames

    assert stack_frames(STACK)[:2] == ["md_bitmap_startwrite", "raid1_write_request"]
    # A /proc of three tasks: fio's two threads (one waiting for I/O, one running) and a shell.
    for pid, comm, tasks in (("7", "fio", {"7": "D", "8": "R"}), ("9", "bash", {"9": "D"})):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(f"{comm}\n")
        for tid, state in tasks.items():
            task = tmp_path / pid / "task" / tid
            task.mkdir(parents=True)
            (task / "comm").write_text(f"{comm}\n")
            (task / "stat").write_text(f"{tid} ({comm} x) {state} 1 {tid} {tid} 0 -1\n")
            (task / "stack").write_text(STACK)
    waits = Waits(lambda name: name == "fio", proc=tmp_path)
    waits.look()
    waits.look()
    assert waits.looks == 2
    assert waits.most() == {"fio: md_bitmap_startwrite < raid1_write_request < raid1_make_request": 2}


def test_the_own_points_report_says_where_the_writers_waited_with_and_without_the_points() -> None:
    passes = [
        {
            **_own_pass(1, True, 10.0, 90),
            "qd1_waits": {"looks": 300, "most_seen": {"fio: a < b": 40, "fio: c": 2}},
        },
        {**_own_pass(2, True, 10.0, 90), "qd1_waits": {"looks": 300, "most_seen": {"fio: a < b": 20}}},
        {**_own_pass(1, False, 10.0, 95), "qd1_waits": {"looks": 300, "most_seen": {}}},
        _own_pass(2, False, 10.0, 95),  # a pass recorded before the looks: counted as none
    ]
    lines = report.waits_lines(passes)
    assert "- QD1, with the points: of 600 looks, in D state: `fio: a < b` 60; `fio: c` 2" in lines
    assert "- QD1, without the points: of 300 looks, in D state: none" in lines
    assert not any(line.startswith("- QD16") for line in lines)


def test_the_peer_report_of_a_run_cut_off_inside_a_round_shows_the_rounds_it_has() -> None:
    import copy

    import peer_report

    results = json.loads(PEER.read_text())
    cut = copy.deepcopy(results["rounds"][0])
    for cell in [name for name in cut if name not in ("baseline", "initial_sync")][1:]:
        del cut[cell]  # the round stopped after its first cell
    results["rounds"].append(cut)
    text = peer_report.render(results)
    assert "## LAN, remirror sync mode against DRBD protocol C" in text
