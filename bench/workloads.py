"""The workloads every configuration gets, as the seeds ran them, scaled to the lab.

- fio, O_DIRECT, over a 128 MiB region of the device: 4 KiB random writes at
  queue depth 1 (latency: mean, p50, p99, p99.9) and 16 (IOPS), a 50/50 random
  read/write mix at queue depth 16, 1 MiB sequential writes at queue depth 4
  (throughput; a kernel's writeback keeps several in flight, as dd through
  the page cache did in the seeds).
- PostMark (Debian's package) on ext4 made on the device, timed to the end
  of `sync` and unmount: the time until what it wrote is on both legs.
- The replay of a real block trace at its own timing (bench/traces/), one I/O at a time.

On a host of the hosts' lab (bench/peer.py copies this file, bench/basics.py and the trace
there): `python3 workloads.py DEVICE [--fio-only]` prints the results as JSON.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from basics import SECONDS, log, run

REGION_OFFSET = 64 << 20  # past md's superblock, bitmap and CDP's index
REGION_SIZE = 128 << 20
TRACE = Path(__file__).resolve().parent / "traces" / "cloudphysics-w-sample.csv"
TRACE_SECONDS = int(os.environ.get("BENCH_TRACE_SECONDS", "60"))
# Seconds each judged fio job runs before it counts (fio's ramp_time): bench/peer.py's jobs leave
# out a start after idle (md's first write to a clean array, the bitmap's first to a chunk,
# DRBD's first to a cold extent), for both mirrors alike; bench/suite.py's count it (0).
RAMP_SECONDS = int(os.environ.get("BENCH_RAMP_SECONDS", "0"))
# At least this many writes in the QD1 job (its p99 from enough samples: at 0.4 s a write, 15 s
# make 35), however long they take; 0: the job's seconds alone (bench/suite.py's).
QD1_IOS = int(os.environ.get("BENCH_QD1_IOS", "0"))
# The fio jobs the targets judge, by name: (rw, block, queue depth).
FIO_SHAPES: dict[str, tuple[str, str, int]] = {
    "qd1": ("randwrite", "4k", 1),
    "qd16": ("randwrite", "4k", 16),
    "seq": ("write", "1M", 4),
}


def qd1_job(device: str) -> dict[str, Any]:
    """4 KiB random writes one at a time: for SECONDS, or QD1_IOS writes if more (15 minutes at
    most), with its slowest writes then (when in the job each came, how long it took, where)."""
    if not QD1_IOS:
        return latency(fio(device, *FIO_SHAPES["qd1"])["write"])
    with tempfile.TemporaryDirectory() as logs:
        job = fio(
            device, *FIO_SHAPES["qd1"], seconds=900, time_based="0", number_ios=str(QD1_IOS),
            write_lat_log=f"{logs}/qd1", log_offset="1",
        )  # fmt: skip
        answer: dict[str, Any] = latency(job["write"])
        answer["slowest"] = slowest_writes(Path(f"{logs}/qd1_clat.1.log").read_text())
    return answer


def slowest_writes(log_text: str, count: int = 5) -> list[dict[str, float]]:
    """The `count` slowest writes of a fio completion-latency log (`write_lat_log` with
    `log_offset`: one line per I/O, "msec, nsec, direction, bytes, offset[, priority]"),
    in the order they came: the time since the counted part began (s), the latency (ms) and
    the offset (MiB). Whether a tail comes at a period (a daemon's) or anywhere shows here."""
    writes = []
    for line in log_text.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) >= 5 and fields[2] == "1":  # 1: a write
            writes.append((int(fields[0]) / 1e3, int(fields[1]) / 1e6, int(fields[4]) / 2**20))
    slow = sorted(sorted(writes, key=lambda write: -write[1])[:count])
    return [{"at_s": at, "ms": round(ms, 3), "offset_mib": round(offset, 3)} for at, ms, offset in slow]


MOUNT = Path("/run/bench-mnt")  # /mnt is on the read-only root in the lab
POSTMARK = """set size 512 16384
set number 1000
set transactions 4000
set location {location}
run
quit
"""


def fio_argv(
    device: str,
    rw: str,
    block: str,
    depth: int,
    seconds: int = SECONDS,
    region: tuple[int, int] = (REGION_OFFSET, REGION_SIZE),
    *,
    ramp: bool = True,
    extra: dict[str, str] | None = None,
) -> list[str]:
    """The command line of one fio job on `device` over `region` (offset, size), its report in
    JSON; `ramp`: the bench's ramp before the job's figures count (RAMP_SECONDS); `extra`:
    fio's options by name (`--NAME=VALUE`)."""
    engine = "psync" if depth == 1 else "libaio"
    return [
        "fio", f"--name={rw}", f"--filename={device}", f"--rw={rw}", f"--bs={block}",
        f"--iodepth={depth}", f"--ioengine={engine}", "--direct=1",
        f"--offset={region[0]}", f"--size={region[1]}", "--time_based", f"--runtime={seconds}",
        "--randrepeat=0", "--percentile_list=50:99:99.9", "--output-format=json",
        *([f"--ramp_time={RAMP_SECONDS}"] if ramp and RAMP_SECONDS else []),
        *(f"--{key}={value}" for key, value in (extra or {}).items()),
    ]  # fmt: skip


def fio(
    device: str,
    rw: str,
    block: str,
    depth: int,
    seconds: int = SECONDS,
    region: tuple[int, int] = (REGION_OFFSET, REGION_SIZE),
    **extra: str,
) -> dict[str, Any]:
    """One fio job (fio_argv) run to its end; its JSON report's first job."""
    report = run(*fio_argv(device, rw, block, depth, seconds, region, extra=extra))
    job: dict[str, Any] = json.loads(report)["jobs"][0]
    return job


def latency(side: dict[str, Any]) -> dict[str, float]:
    """IOPS, MB/s and completion latency (ms) of one direction of a fio job."""
    clat = side["clat_ns"]
    percent = clat.get("percentile", {})
    return {
        "iops": side["iops"],
        "mb_per_s": side["bw_bytes"] / 1e6,
        "mean_ms": clat["mean"] / 1e6,
        "p50_ms": percent.get("50.000000", 0) / 1e6,
        "p99_ms": percent.get("99.000000", 0) / 1e6,
        "p99_9_ms": percent.get("99.900000", 0) / 1e6,
        "max_ms": clat["max"] / 1e6,
        "ios": side["total_ios"],
    }


def postmark(device: str) -> dict[str, float]:
    """PostMark on a fresh ext4 on `device`: seconds to the end of its run, and to durable."""
    run("mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", device)
    MOUNT.mkdir(parents=True, exist_ok=True)
    run("mount", device, str(MOUNT))
    try:
        started = time.monotonic()
        out = subprocess.run(
            ["postmark"], input=POSTMARK.format(location=MOUNT), capture_output=True, text=True, check=True
        ).stdout
        ran = time.monotonic() - started
        run("sync", "-f", str(MOUNT))
        durable = time.monotonic() - started
    finally:
        run("umount", str(MOUNT))
    transactions = re.search(r"(\d+) seconds of transactions \((\d+) per second\)", out)
    return {
        "seconds": ran,
        "seconds_to_durable": durable,
        "transactions_per_s": float(transactions.group(2)) if transactions else 0.0,
    }


def trace_iolog(device: str, seconds: int = TRACE_SECONDS) -> str:
    """The sample trace's first `seconds` as a fio v3 iolog (timestamps in microseconds) for
    `device`: offsets folded into the benchmark region, rounded out to 4 KiB (a writecache
    device takes only whole 4 KiB blocks); the time column is in seconds."""
    lines = ["fio version 3 iolog", f"0 {device} add", f"0 {device} open"]
    start = None
    with TRACE.open() as trace:
        for row in csv.DictReader(trace):
            at = int(row["time"])
            start = at if start is None else start
            if at - start >= seconds:
                break
            action = "write" if row["op"] == "2a" else "read"
            first = int(row["lbn"]) * 512 // 4096
            last = (int(row["lbn"]) * 512 + int(row["size"]) - 1) // 4096
            offset = REGION_OFFSET + (first * 4096) % (REGION_SIZE - (1 << 20))
            lines.append(f"{(at - start) * 1_000_000} {device} {action} {offset} {(last - first + 1) * 4096}")
    lines.append(f"{seconds * 1_000_000} {device} close")
    return "\n".join(lines) + "\n"


def replay(device: str) -> dict[str, float]:
    """The trace at its own timing, one I/O at a time (a burst waits its turn, as behind one
    journal): fio 3.33 reports no usable latency when it replays with an async engine
    (zero on a file, seconds in the lab: it counts the wait for a request's timestamp)."""
    with tempfile.NamedTemporaryFile("w", suffix=".iolog", delete=False, dir="/run") as log_file:
        log_file.write(trace_iolog(device))
    argv = [
        "fio", "--name=trace", f"--read_iolog={log_file.name}", "--ioengine=psync", "--direct=1",
        "--percentile_list=50:99:99.9", "--output-format=json",
    ]  # fmt: skip
    started = time.monotonic()
    try:
        job = json.loads(run(*argv))["jobs"][0]
    finally:
        Path(log_file.name).unlink()
    return {**latency(job["write"]), "seconds": time.monotonic() - started}


def all_workloads(
    device: str, what: str, cadence: tuple[Callable[[], None], int] | None = None
) -> dict[str, Any]:
    """Every workload on `device`, in the order of the report.

    With a `cadence` (CDP's: a function called as each judged job starts, and
    the lab seconds between points), each job the targets judge (QD1, QD16,
    sequential) runs one whole interval, so that it holds one point of the
    daemon's (bench/suite.py runs it meanwhile): the point, the copy-on-write
    after it and the calm before the next, in the proportion the cadence gives
    them.
    """

    def target_job(name: str) -> dict[str, Any]:
        if cadence is None:
            return one_job(device, name)
        starting, seconds = cadence
        starting()
        return latency(fio(device, *FIO_SHAPES[name], seconds=seconds)["write"])

    log(f"{what}: fio")
    results: dict[str, Any] = {
        "qd1": target_job("qd1"),
        "qd16": target_job("qd16"),
        "mix": _mix(device),
        "seq": target_job("seq"),
    }
    log(f"{what}: trace replay")
    results["trace"] = replay(device)
    log(f"{what}: postmark")
    results["postmark"] = postmark(device)
    return results


def fio_jobs(device: str) -> dict[str, Any]:
    """The fio jobs alone (a disk with nothing on top: the baseline the others are held to)."""
    return {name: one_job(device, name) for name in FIO_JOBS}


def _mix(device: str) -> dict[str, Any]:
    mix = fio(device, "randrw", "4k", 16, rwmixread="50")
    return {"read": latency(mix["read"]), "write": latency(mix["write"])}


# Each workload alone, by the name its results go under, in the order of the report (without a
# CDP cadence: all_workloads keeps that). bench/peer.py runs them one at a time, so that it can
# count what each leg's disk took during each.
JOBS: dict[str, Callable[[str], dict[str, Any]]] = {
    "qd1": qd1_job,
    "qd16": lambda device: latency(fio(device, *FIO_SHAPES["qd16"])["write"]),
    "mix": _mix,
    "seq": lambda device: latency(fio(device, *FIO_SHAPES["seq"])["write"]),
    "trace": replay,
    "postmark": postmark,
}
FIO_JOBS = tuple(FIO_SHAPES)


def one_job(device: str, name: str) -> dict[str, Any]:
    return JOBS[name](device)


def main() -> int:
    parser = argparse.ArgumentParser(description="The bench's workloads on one device, as JSON.")
    parser.add_argument("device")
    parser.add_argument("--fio-only", action="store_true", help="the QD1, QD16 and sequential jobs only")
    parser.add_argument("--job", choices=sorted(JOBS), help="this workload alone, its results unnested")
    args = parser.parse_args()
    if args.job:
        done = one_job(args.device, args.job)
    else:
        done = fio_jobs(args.device) if args.fio_only else all_workloads(args.device, args.device)
    sys.stdout.write(json.dumps(done) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
