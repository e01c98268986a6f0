"""Why DRBD's QD16 tail in protocol C is tighter than the bare disk's: a focused run of peer.py's job.

    .venv/bin/python bench/peer_tail.py OUT     # after ./dev setup and a fresh wheel; about 30 minutes

In every peer run remirror's QD16 p99 in sync mode is about the bare disk's (1.5 s of lab time
at dilation 7) and DRBD's in protocol C is tighter than the bare disk's, at the same rate and
mean: remirror / DRBD 1.77x over the LAN, 1.36x over the WAN (bench/results/2026-12-03-peer-
3rounds). A mirror's tail can only be tighter than its disk's if it changes what the disk is
given. The reading, from Linux 6.1's DRBD 8.4 (drbd_req.c, drbd_receiver.c): DRBD closes a
transfer-log epoch whenever a write of the current one completes and sends a barrier, and
the DR site's receiver, with the default write ordering (flush, /proc/drbd's wo:f), waits at
each barrier until every write of the epoch is on its disk before it reads the next epoch's.
So the DR site's disk holds one epoch at a time and serves writes in about the order they
came, where the bare disk's mq-deadline sorts the sixteen by sector, and a write that lands
behind the sweep waits for the next one. The modelled disk has no seek (null_blk), so the sort
buys nothing here and costs the tail; on a real disk it saves seeks. Protocol C completes a
write when both disks have it, so the DR disk's order bounds the tail.

Each of PEER_ROUNDS (3) rounds runs these QD16 jobs over the LAN, remirror in sync mode and
DRBD in protocol C, in an order rotated between rounds, each after both hosts went quiet:

- the bare disk (/dev/lab/a2) with mq-deadline, as in every peer run, and with mq-deadline
  made first in, first out (every write expired at once, one dispatched at a time);
- remirror's mirror;
- DRBD with its default write ordering (flush), and with none (disk-flushes, disk-barrier and
  disk-drain off: wo:n, for this measurement only);

and records the job's IOPS, p50, p99 and mean, and how many writes each leg's disk held during
it (its device-mapper device's `inflight`, every 0.2 s: the scheduler's queue and the disk's
two slots together). If the reading holds, the FIFO bare disk's p99 is near DRBD's, DRBD
without the drain has the bare disk's, and DRBD's DR disk holds fewer writes than remirror's.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import peer  # bench/'s own, beside this file: the peer's hosts, disks, mirrors and jobs
from peer import DISKS, DRBD_DEVICE, MD, log

from remirror.lab.hosts import drbd
from remirror.lab.hosts.lab import HostsLab
from remirror.lab.hosts.machine import Host

ROUNDS = int(os.environ.get("PEER_ROUNDS", "3"))
# (system, how): "" as peer.py runs it; "fifo" the bare disk's scheduler FIFO; "no-drain"
# DRBD with write ordering none.
CONDITIONS = (("bare", ""), ("bare", "fifo"), ("remirror", ""), ("drbd", ""), ("drbd", "no-drain"))
SAMPLE_EVERY_S = 0.2


def named(condition: tuple[str, str]) -> str:
    system, how = condition
    return system + (f", {how}" if how else "")


def sampling(host: Host, disk: str) -> tuple[str, str]:
    """Start recording `disk`'s writes in flight (its dm device's inflight) every
    SAMPLE_EVERY_S in the background: the sampler's pid and the file it writes."""
    dm = host.run(f"basename $(readlink -f {disk})").stdout.strip()
    file = f"/run/peer-inflight-{dm}"  # /run: on both hosts (site-b has no bench directory)
    loop = f"while :; do cat /sys/block/{dm}/inflight; sleep {SAMPLE_EVERY_S}; done"
    pid = host.run(f"nohup sh -c '{loop}' >{file} 2>/dev/null </dev/null & echo $!").stdout.strip()
    return pid, file


def sampled(host: Host, sampler: tuple[str, str]) -> list[int]:
    """Stop a sampler; the writes in flight it saw (inflight's second figure), in order."""
    pid, file = sampler
    host.run(f"kill {pid} 2>/dev/null || true")
    text = host.run(f"cat {file}; rm -f {file}").stdout
    return [int(fields[1]) for fields in (line.split() for line in text.splitlines()) if len(fields) == 2]


# mq-deadline made first in, first out: every write expired at once and one dispatched per
# look at the FIFO. (Not scheduler `none`: without one the queue holds only the driver's two
# tags, so fio would wait to submit, outside the completion latency it reports.)
FIFO = {"iosched/write_expire": "0", "iosched/fifo_batch": "1"}


def swap_queue(host: Host, disk: str, settings: dict[str, str]) -> dict[str, str]:
    """`settings` written to the queue of `disk`'s null_blk; what they were before (to swap
    back)."""
    nullb = host.run(f"ls /sys/block/$(basename $(readlink -f {disk}))/slaves").stdout.split()[0]
    queue = f"/sys/block/{nullb}/queue"
    before = {name: host.run(f"cat {queue}/{name}").stdout.strip() for name in settings}
    for name, text in settings.items():
        host.run(f"echo {text} > {queue}/{name}")
    return before


def set_drain(lab: HostsLab, resource: drbd.Resource, drain: bool) -> str:
    """DRBD's write ordering on both hosts (drbdadm adjust); what the DR site's /proc/drbd says."""
    changed = dataclasses.replace(resource, tuning=dataclasses.replace(resource.tuning, drain=drain))
    for host in (lab["site-a"], lab["site-b"]):
        host.write(changed.path, changed.text())
        host.run(f"drbdadm adjust {changed.name}")
    now = drbd.state(lab["site-b"], changed)
    ordering = now.write_ordering if now else ""
    if ordering != ("f" if drain else "n"):
        raise SystemExit(f"peer_tail: DRBD's write ordering is {ordering!r} after adjust (drain {drain})")
    return ordering


def one_job(lab: HostsLab, factor: float, condition: tuple[str, str]) -> dict[str, Any]:
    """One of CONDITIONS, after both hosts went quiet: fio's figures and each leg's disk's writes
    in flight."""
    a, b = lab["site-a"], lab["site-b"]
    system, how = condition
    device = {"bare": peer.BASELINE, "remirror": MD, "drbd": DRBD_DEVICE}[system]
    legs = {"bare": (peer.BASELINE,), "remirror": DISKS["remirror"], "drbd": DISKS["drbd"]}[system]
    resource = peer.drbd_resource("C", peer.LINKS["LAN"], factor)
    saved: dict[str, str] = {}
    samplers: list[tuple[Host, tuple[str, str]]] = []
    ordering = ""
    try:
        if how == "fifo":
            saved = swap_queue(a, peer.BASELINE, FIFO)
        if how == "no-drain":
            ordering = set_drain(lab, resource, drain=False)
        waited = peer.quiet(lab)
        before = peer.health(lab, resource)
        for host, disk in zip((a, b), legs, strict=False):
            samplers.append((host, sampling(host, disk)))
        done = a.run(
            f"cd {peer.BENCH_DIR} && BENCH_SECONDS={peer.SECONDS} BENCH_RAMP_SECONDS={peer.RAMP_SECONDS}"
            f" python3 workloads.py {device} --job qd16",
            timeout=3600,
        )
    finally:
        # The next condition stands on these: put back before anything else can fail.
        try:
            if saved:
                swap_queue(a, peer.BASELINE, saved)
            if how == "no-drain":
                set_drain(lab, resource, drain=True)
        finally:
            in_flight = {host.name: sampled(host, sampler) for host, sampler in samplers}
    after = peer.health(lab, resource)
    return {
        **json.loads(done.stdout),
        "in_flight": in_flight,
        "write_ordering": ordering,
        "valid": system == "bare" or (peer.whole(before) and peer.whole(after)),
        "quiet_wait_s": waited,
        "machine_load": Path("/proc/loadavg").read_text().split()[:3],
    }


def valid_jobs(one_round: dict[str, Any]) -> dict[str, Any]:
    """A round's jobs whose mirror kept its peer throughout (the bare disk's always)."""
    return {name: job for name, job in one_round.items() if job.get("valid", True)}


def report(results: dict[str, Any]) -> str:
    """Each condition's figures, median and range over the rounds (a job whose mirror lost its
    peer left out): IOPS, p50, p99 and the mean, p99 against the bare disk's in the same round,
    and the writes each leg's disk held (median and most)."""
    meta = results["meta"]
    rounds = [valid_jobs(one) for one in results.get("rounds", [])]
    lines = [
        f"# DRBD's QD16 tail against the bare disk's, {len(rounds)} rounds (peer_tail.py, {meta['commit']},"
        f" dilation {meta['dilation']['factor']:.2f})",
        "",
        "LAN; remirror in sync mode, DRBD in protocol C; lab milliseconds. In flight: the writes a"
        " leg's disk held, sampled every 0.2 s, median / most.",
        "",
        "| QD16 | IOPS | p50 ms | p99 ms | mean ms | p99 / bare's | in flight at site-a | at site-b |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def spread(values: list[float]) -> str:
        values = sorted(values)
        return f"{statistics.median(values):.2f} ({values[0]:.2f}-{values[-1]:.2f})"

    def held(jobs: list[dict[str, Any]], site: str) -> str:
        # The looks while the disk held any (fio's start and the sampler's last looks idle).
        seen = [n for job in jobs for n in job["in_flight"].get(site, []) if n]
        return f"{statistics.median(seen):.0f} / {max(seen)}" if seen else "-"

    bare = named(("bare", ""))
    for condition in CONDITIONS:
        name = named(condition)
        jobs = [r[name] for r in rounds if name in r]
        if not jobs:
            continue
        tails = [r[name]["p99_ms"] / r[bare]["p99_ms"] for r in rounds if name in r and bare in r]
        lines.append(
            f"| {name} | {spread([j['iops'] for j in jobs])} | {spread([j['p50_ms'] for j in jobs])}"
            f" | {spread([j['p99_ms'] for j in jobs])} | {spread([j['mean_ms'] for j in jobs])}"
            f" | {spread(tails) if tails else '-'} | {held(jobs, 'site-a')} | {held(jobs, 'site-b')} |"
        )
    return "\n".join(lines) + "\n"


def measure(lab: HostsLab, factor: float, out: Path) -> None:
    peer.results["meta"]["conditions"] = [named(c) for c in CONDITIONS]
    peer.build_both(lab, factor, ("remirror", "drbd"))
    peer.results["settings"] = peer.set_mode(lab, "sync", "LAN", factor)
    peer.warm_up(lab["site-a"])
    for number in range(ROUNDS):
        shift = number * 2 % len(CONDITIONS)  # each round starts two conditions on
        this: dict[str, Any] = {}
        peer.results["rounds"].append(this)
        for condition in CONDITIONS[shift:] + CONDITIONS[:shift]:
            try:
                this[named(condition)] = one_job(lab, factor, condition)
            except Exception as error:  # noqa: BLE001 - one failed job must not end the run
                this[named(condition)] = {"error": str(error)[-500:], "valid": False}
            log(f"round {number + 1} {named(condition)}: {json.dumps(this[named(condition)])[:160]}")
            peer.save(out)


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "bench/out-peer-tail").resolve()
    started = time.monotonic()
    code = peer.run_on_hosts(out, measure)
    if peer.results.get("rounds"):
        (out / "report.md").write_text(report(peer.results))
    log(f"peer_tail: {time.monotonic() - started:.0f}s")
    return code


if __name__ == "__main__":
    sys.exit(main())
