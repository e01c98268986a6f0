"""The guests' idle vCPU and the modelled disk: a focused run of bench/peer.py's QD16 and QD1 jobs.

    .venv/bin/python bench/peer_idle.py OUT     # after ./dev setup; about 30 minutes

Two rows of every peer run are named and not explained. QD16: DRBD's rate is 1.08-1.13x the
bare disk's and remirror's 0.98 of it, with one 4 KiB write at each leg's disk per write
completed for both (bench/results/2026-12-03-peer-lan-async). QD1's tail: remirror's two
slowest writes in a hundred took 3-4 of its p50 where DRBD's stayed within 1.1x (2026-12-02).

The modelled disk serves two requests at a time (null_blk's `hw_queue_depth` 2) for
`completion_nsec` each, so its ceiling is 2 / completion_nsec, and what a writer loses to it is
the time between one request's completion and the next one's dispatch. null_blk with
`memory_backed` is a blocking driver, so every dispatch (after a completion, after a plug's
flush, from any stack) runs in a kblockd worker; what differs between the writers is what else
runs in the one-vCPU, emulated guest meanwhile. The hypothesis (a helper's read of Linux 6.1):
a guest whose vCPU sits halted between events (fio alone) wakes later for each completion's
timer than one kept running (DRBD's sockets and threads). If so, the rows measure the lab's
emulation and not the mirrors.

Each of PEER_ROUNDS (3) rounds runs each condition, the order rotated between rounds, each
after both hosts went quiet:

- QD16 on the bare disk (/dev/lab/a2, as peer.py's baseline but after `quiet`: peer.py runs
  its baseline right after the warm-up), on md's mirror (LAN, async mode) and on DRBD's
  device (LAN, protocol A); the bare disk and md also with a busy loop at nice 19 on site-a
  (its vCPU never halts), DRBD also disconnected (its local disk alone, no network activity);
- QD1 on md's mirror, with and without the busy loop, and on DRBD's device;

and records each job's figures and, at site-a's modelled disk, how often blk-mq ran its queue
(debugfs) and the write requests it completed (its block stat); the report gives the time each
slot lost per request (2 / IOPS - completion_nsec).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import peer  # bench/'s own, beside this file: the peer's hosts, disks, mirrors and jobs
from peer import DISKS, DRBD_DEVICE, MD, log

from remirror.facts.parsers import parse_block_stat
from remirror.lab.hosts import drbd
from remirror.lab.hosts.lab import HostsLab
from remirror.lab.hosts.machine import Host

ROUNDS = int(os.environ.get("PEER_ROUNDS", "3"))
# (system, job, how): "" as peer.py runs it, "spinning" with site-a's vCPU kept busy, "alone"
# DRBD disconnected.
CONDITIONS = (
    ("bare", "qd16", ""),
    ("bare", "qd16", "spinning"),
    ("remirror", "qd16", ""),
    ("remirror", "qd16", "spinning"),
    ("drbd", "qd16", ""),
    ("drbd", "qd16", "alone"),
    ("remirror", "qd1", ""),
    ("remirror", "qd1", "spinning"),
    ("drbd", "qd1", ""),
)
SPINNER = "nohup nice -n 19 sh -c 'while :; do :; done' </dev/null >/dev/null 2>&1 & echo $!"


def null_blk_of(host: Host, disk: str) -> str:
    """The null_blk device under one of the lab's device-mapper disks (its configfs name)."""
    return host.run(f"ls /sys/block/$(basename $(readlink -f {disk}))/slaves").stdout.split()[0]


def queue_counters(host: Host, nullb: str) -> dict[str, int]:
    """How often blk-mq ran the disk's one hardware queue (debugfs), and how many write requests
    the disk completed (its block stat): Linux 6.1's hctx has no count of requests queued."""
    said = host.run(f"cat /sys/kernel/debug/block/{nullb}/hctx0/run /sys/block/{nullb}/stat").stdout
    runs, stat = said.split("\n", 1)
    return {"runs": int(runs), "writes": parse_block_stat(stat).writes}


def named(condition: tuple[str, str, str]) -> str:
    system, job, how = condition
    return f"{system} {job}" + (f", {how}" if how else "")


def one_job(
    lab: HostsLab, factor: float, condition: tuple[str, str, str], nullbs: dict[str, str]
) -> dict[str, Any]:
    """One of CONDITIONS, after both hosts went quiet."""
    a = lab["site-a"]
    system, job, how = condition
    device = {"bare": peer.BASELINE, "remirror": MD, "drbd": DRBD_DEVICE}[system]
    disk = {"bare": peer.BASELINE, "remirror": DISKS["remirror"][0], "drbd": DISKS["drbd"][0]}[system]
    resource = peer.drbd_resource("A", peer.LINKS["LAN"], factor)
    waited = peer.quiet(lab)
    spinner = a.run(SPINNER).stdout.strip() if how == "spinning" else ""
    if how == "alone":
        a.run(f"drbdadm disconnect {resource.name}")
    before = queue_counters(a, nullbs[disk])
    try:
        done = a.run(
            f"cd {peer.BENCH_DIR} && BENCH_SECONDS={peer.SECONDS} BENCH_RAMP_SECONDS={peer.RAMP_SECONDS}"
            f" BENCH_QD1_IOS={peer.QD1_IOS} python3 workloads.py {device} --job {job}",
            timeout=3600,
        )
        after = queue_counters(a, nullbs[disk])
    finally:
        if spinner:
            a.run(f"kill {spinner}")
        if how == "alone":
            a.run(f"drbdadm connect {resource.name}")
            drbd.wait_synced(a, resource, timeout=1800)
    return {
        **json.loads(done.stdout),
        "disk_queue": {key: after[key] - before[key] for key in after},
        "quiet_wait_s": waited,
        "machine_load": Path("/proc/loadavg").read_text().split()[:3],
    }


def report(results: dict[str, Any]) -> str:
    """Each condition's figures, median and range over the rounds: QD16's rate against the bare
    disk's in the same round and what each of the disk's two slots lost per request; QD1's p50,
    p99 and slowest write."""
    rounds = results.get("rounds", [])
    slot_s = results["meta"]["completion_nsec"][peer.BASELINE] / 1e9
    lines = [
        f"# The guests' idle vCPU and the modelled disk, {len(rounds)} rounds (peer_idle.py,"
        f" {results['meta']['commit']}, dilation {results['meta']['dilation']['factor']:.2f})",
        "",
        f"Each slot's service: {slot_s * 1000:.2f} ms (completion_nsec), so the disk's ceiling is"
        f" {2 / slot_s:.2f} IOPS.",
        "",
        "| QD16 | IOPS | / bare, same round | lost per request and slot | queue runs per write |",
        "|---|---|---|---|---|",
    ]

    def spread(values: list[float], unit: str = "") -> str:
        values = sorted(values)
        return f"{statistics.median(values):.2f}{unit} ({values[0]:.2f}-{values[-1]:.2f})"

    qd1 = ["", "| QD1 | p50 (ms) | p99 (ms) | slowest (ms) | p99 / p50 |", "|---|---|---|---|---|"]
    for condition in CONDITIONS:
        name, bare = named(condition), named(("bare", "qd16", ""))
        jobs = [r[name] for r in rounds if name in r]
        if not jobs:
            continue
        if condition[1] == "qd16":
            ratios = [r[name]["iops"] / r[bare]["iops"] for r in rounds if name in r and bare in r]
            lost = [(2 / job["iops"] - slot_s) * 1000 for job in jobs]
            runs = [job["disk_queue"]["runs"] / max(1, job["disk_queue"]["writes"]) for job in jobs]
            lines.append(
                f"| {name} | {spread([job['iops'] for job in jobs])}"
                f" | {spread(ratios) if ratios else '-'} | {spread(lost, ' ms')} | {spread(runs)} |"
            )
        else:
            tail = [j["p99_ms"] / j["p50_ms"] for j in jobs]
            qd1.append(
                f"| {name} | {spread([j['p50_ms'] for j in jobs])} | {spread([j['p99_ms'] for j in jobs])}"
                f" | {spread([j['max_ms'] for j in jobs])} | {spread(tail)} |"
            )
    return "\n".join(lines + (qd1 if len(qd1) > 3 else [])) + "\n"


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out-peer-idle").resolve()
    peer.results["commit"] = peer.commit()
    if peer.results["commit"].endswith("-dirty") and not os.environ.get("PEER_ALLOW_DIRTY"):
        sys.exit("peer_idle: the checkout has uncommitted changes: commit them (a result names its commit)")
    work = Path(tempfile.mkdtemp(prefix="remirror-peer-", dir=os.environ.get("REMIRROR_LAB_TMPDIR")))
    lab = HostsLab(work, {"site-a": [], "site-b": []}, checkout=peer.CHECKOUT, memory=peer.MEMORY)
    started = time.monotonic()
    peer.results["rounds"] = []
    try:
        factor = peer.prepare(lab, out)
        a = lab["site-a"]
        a.run("mountpoint -q /sys/kernel/debug || mount -t debugfs debugfs /sys/kernel/debug")
        nullbs = {
            disk: null_blk_of(a, disk) for disk in (peer.BASELINE, DISKS["remirror"][0], DISKS["drbd"][0])
        }
        peer.results["meta"]["completion_nsec"] = {
            disk: int(a.run(f"cat /sys/kernel/config/nullb/{nullb}/completion_nsec").stdout)
            for disk, nullb in nullbs.items()
        }
        peer.results["meta"]["conditions"] = [named(c) for c in CONDITIONS]
        peer.build_both(lab, factor, ("remirror", "drbd"))
        peer.results["settings"] = peer.set_mode(lab, "async", "LAN", factor)
        peer.warm_up(a)
        for number in range(ROUNDS):
            shift = number * 3 % len(CONDITIONS)  # each round starts three conditions on
            this: dict[str, Any] = {}
            peer.results["rounds"].append(this)
            for condition in CONDITIONS[shift:] + CONDITIONS[:shift]:
                this[named(condition)] = one_job(lab, factor, condition, nullbs)
                log(f"round {number + 1} {named(condition)}: {json.dumps(this[named(condition)])[:200]}")
                peer.save(out)
        peer.results["meta"]["dilation_after"] = peer.measure_dilation(lab)
    except (SystemExit, Exception) as error:  # noqa: BLE001 - recorded; what finished is kept
        peer.results.setdefault("errors", {})["run"] = str(error)[-2000:]
    finally:
        peer.results.setdefault("meta", {})["seconds"] = time.monotonic() - started
        peer.save(out)
        lab.stop()
    if peer.results.get("rounds"):
        (out / "report.md").write_text(report(peer.results))
    log(f"done in {time.monotonic() - started:.0f}s: {out / 'results.json'}")
    return 1 if peer.results.get("errors") else 0


if __name__ == "__main__":
    sys.exit(main())
