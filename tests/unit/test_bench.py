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
