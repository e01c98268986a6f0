"""The benchmark suite: the seeds' experiments on stock parts, in one lab run.

Run it from the checkout (the lab boots with the performance model, runs this
inside, copies results back, and bench/report.py writes the report with its
calibration, the targets' verdicts and the plots):

    ./dev bench

Configurations, named like the DCD paper's (docs/performance.md):

    baseline  one data disk (the modelled HDD), no mirror
    S-S       md RAID1 over two local data disks (mdadm by hand, as remirror would)
    S-iL      remirror, sync, the replica over iSCSI on the lab's LAN link
    S-iW      the same over a WAN: 7 ms each way (14 ms round trip), 1 Gbit/s
    S-iDL     S-iL with a writecache on the replica's disk (the DCD)
    S-iDW     S-iDL over the WAN
    D-iDL     S-iDL with a writecache on the primary's disk too (a DCD at both sites); and
              its steady state: writes past the caches until writeback bounds them
    async-W   remirror, async (write-behind), over the WAN
    CDP-stack S-iL with CDP's stack (dm-era over a thin volume), no point taken
    CDP-60s   S-iL with CDP, a recovery point every 60 s (the contract's cadence), taken by
              CDP's daemon (`remirror cdp run`) while the jobs run
    CDP-60s-D CDP-60s with a writecache on the primary's disk (the DCD under the copy-on-write)
    CDP-60s-DD CDP-60s with a writecache on both legs' disks (D-iDL's DCD at both sites)
    CDP-10s   the same, a point every 10 s (as Mariner took them)

Then: the calibration of the modelled SSD (the baseline calibrates the HDD);
on the S-iL mirror, the iSCSI round trip, what `status`, `check`, a no-op
`apply` and a reconcile pass cost, and a link outage with its resync (timed
over 50 Mbit/s, 1 Gbit/s and the LAN); the capstone's link grid only when
asked (`grid`).

Results: $LAB_OUT/results.json, rewritten after each step so that a run cut
off still reports what it finished. BENCH_SECONDS (default 15) sets each fio
job's length, BENCH_TRACE_SECONDS (60) the part of the trace replayed,
BENCH_SYNC_PHASE_SECONDS (40) how long the resync runs over 50 Mbit/s (a
quarter of it over 1 Gbit/s, which the disk bounds, then the LAN to the end),
BENCH_ONLY a comma-separated subset: `configs` (every configuration and the
calibration), a step's name (baseline, calibration, S-S, S-iL, S-iD, D-iDL,
async-W, CDP-stack, CDP-60s, CDP-60s-D, CDP-60s-DD, CDP-10s, own-points), `control`, `resync`, `grid` (the
last three run on the S-iL mirror). own-points: the DR site's own points in async mode over the
WAN, BENCH_ROUNDS (3) rounds with and without them; BENCH_LEG_WBT=off turns writeback throttling off
on the DR leg's iSCSI disk for them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from basics import SECONDS, log, run, site_costs
from common import (
    CDP_VOLUME,
    MD,
    MIRROR,
    OUT,
    REMOTE_LEG,
    apply,
    destroy,
    destroy_with_site_b_points,
    md_sysfs,
    profile,
    site_b_view,
    wait_idle,
    wan,
    wipe,
)
from points_daemon import PointsDaemon
from workloads import (
    FIO_SHAPES,
    REGION_OFFSET,
    REGION_SIZE,
    TRACE,
    TRACE_SECONDS,
    all_workloads,
    fio,
    fio_argv,
    latency,
)

from remirror.facts.dm import parse_cache_status
from remirror.facts.parsers import ParseError, parse_bitmap_examine
from remirror.lab import net
from remirror.lab.probes import Waits, sectors_written, writes_in_flight

WAN_DELAY_MS = 7  # each way: the DCD paper's 14 ms round trip
WAN_RATE_MBIT = 1000  # a metro fibre: the WAN's delay, not its rate, is what S-iW and async-W test
LAN_DELAY_MS = 0.05  # each way, as the modelled LAN (remirror.lab.model.LAN)
SYNC_LINKS_MBIT = (50, 1000)  # the links a 1 TB sync time is given for (issue 27)
SYNC_PHASE_SECONDS = int(os.environ.get("BENCH_SYNC_PHASE_SECONDS", "40"))
# Seconds of the resync over each slow link: the disk bounds the 1 Gbit/s phase, which moves
# ten times the 50 Mbit/s one's bytes a second; a shorter phase leaves the LAN its share.
SYNC_PHASES = ((SYNC_LINKS_MBIT[0], SYNC_PHASE_SECONDS), (SYNC_LINKS_MBIT[1], SYNC_PHASE_SECONDS / 4))
BITMAP_CHUNK = 64 << 20  # remirror's default bitmap chunk, which the bench's profiles keep
GRID_RATES_MBIT = (1, 45, 100)
GRID_DELAYS_MS = (0, 50, 100, 150)
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))

results: dict[str, Any] = {}


def save() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "results.json").write_text(json.dumps(results, indent=2) + "\n")


def wanted(part: str) -> bool:
    """Whether BENCH_ONLY asks for this part, or a configuration's step (`configs`: all). The
    link grid runs only when asked: in a dilated lab its 1 Mbit cells take hours."""
    if part == "grid":
        return part in ONLY
    return (
        not ONLY or part in ONLY or (part not in ("control", "resync", "calibration") and "configs" in ONLY)
    )


def measure(
    name: str,
    device: str,
    setup: Callable[[], None] | None = None,
    cadence: tuple[Callable[[], None], int] | None = None,
) -> None:
    if setup is not None:
        setup()
    started = time.monotonic()
    results["configs"][name] = all_workloads(device, name, cadence)
    log(f"{name}: done in {time.monotonic() - started:.0f}s")
    save()


def calibration() -> None:
    """The modelled cache disk (an SSD) measured with the jobs that measure the baseline's
    data disk (an HDD), so that the report can hold both against the model's declared figures."""
    fast = "/dev/lab/a-fast0"
    region = (0, 32 << 20)
    results["calibration"] = {
        "ssd": {
            "qd1": latency(fio(fast, "randwrite", "4k", 1, region=region)["write"]),
            "qd16": latency(fio(fast, "randwrite", "4k", 16, region=region)["write"]),
            "seq": latency(fio(fast, "write", "1M", 4, region=region)["write"]),
        }
    }
    wipe((fast,))
    save()


def iscsi_round_trip() -> None:
    """4 KiB reads one at a time from the replica's disk over iSCSI and from the same kind of
    disk at site A: the difference is what the iSCSI round trip on the LAN costs. (Reads:
    writing to one leg behind md's back would make the legs differ.)"""
    remote = str(Path(REMOTE_LEG).resolve())  # fio splits file names at ':'
    over_iscsi = latency(fio(remote, "randread", "4k", 1)["read"])
    local = latency(fio("/dev/lab/a0", "randread", "4k", 1)["read"])
    results["iscsi_round_trip"] = {"remote_read": over_iscsi, "local_read": local}
    save()


def local_mirror() -> None:
    """S-S: md RAID1 over two local data disks, with what remirror gives a mirror (a bitmap
    with 64 MiB chunks), built by hand: remirror's mirrors always have a remote leg."""
    wipe(("/dev/lab/a2", "/dev/lab/a3"))
    run(
        "mdadm", "--create", "/dev/md/bench-ss", "--run", "--level=1", "--raid-devices=2",
        "--metadata=1.2", "--bitmap=internal", "--bitmap-chunk=64M", "--assume-clean",
        "/dev/lab/a2", "/dev/lab/a3",
    )  # fmt: skip
    measure("S-S", "/dev/md/bench-ss")
    run("mdadm", "--stop", "/dev/md/bench-ss")
    run("mdadm", "--zero-superblock", "/dev/lab/a2", "/dev/lab/a3")
    wipe(("/dev/lab/a2", "/dev/lab/a3"))


def control_plane(path: Path) -> None:
    """Wall time and commands per site of the verbs an operator and cron run, on a healthy mirror."""
    verbs = {
        "status": ["status", str(path)],
        "check": ["check", "--timeout", "600", str(path)],
        "apply (no-op)": ["apply", "--yes", str(path)],
        "reconcile pass": ["reconcile", str(path)],
    }
    cost = {}
    for name, args in verbs.items():
        started = time.monotonic()
        done = subprocess.run(["remirror", "-v", *args], capture_output=True, text=True, check=False)
        cost[name] = {
            "seconds": time.monotonic() - started,
            "exit": done.returncode,
            "sites": site_costs(done.stderr),
        }
        log(f"control: {name} {cost[name]['seconds']:.0f}s, exit {done.returncode}")
    results["control"] = cost
    save()


def dirty_bitmap(disk: str) -> tuple[int, int]:
    """Dirty chunks and chunk size (bytes) of the write-intent bitmap on `disk` (mdadm -X, read
    by the parser the product reads it with)."""
    out = run("mdadm", "--examine-bitmap", disk)
    try:
        bitmap = parse_bitmap_examine(out)
    except ParseError as error:
        sys.exit(f"bench: cannot read the bitmap of {disk}: {error}")
    return bitmap.dirty, bitmap.chunk_size


def resync_after_outage(path: Path) -> None:
    """Cut the link, write while it is down, restore it; what the resync cost, and how fast it
    ran over each of the issue's links: 50 Mbit/s, then 1 Gbit/s, then the LAN to the end."""
    # The writes fall on six bitmap chunks (384 MiB of the 512 MiB disk): enough to resync for
    # a while over each link, the LAN last.
    hot = 6 * BITMAP_CHUNK
    writes = 1000
    run("remirror", "lab", "link", "down")
    log("resync: link down, writing (the first write waits until md fails the leg)")
    outage = latency(
        fio(MD, "randwrite", "4k", 1, seconds=3600, number_ios=str(writes), region=(0, hot), time_based="0")[
            "write"
        ]
    )
    dirty, chunk = dirty_bitmap("/dev/lab/a0")
    replica_before = sectors_written("/dev/lab/b0")
    wan(LAN_DELAY_MS, SYNC_LINKS_MBIT[0])
    run("remirror", "lab", "link", "up")
    link_back = time.monotonic()
    # One pass puts the leg back; md then resyncs what the bitmap marked, while this process
    # measures it and changes the link under it.
    reconcile = subprocess.Popen(["remirror", "reconcile", str(path)], stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while md_sysfs("sync_action") not in ("recover", "resync"):
        if time.monotonic() > deadline or (reconcile.poll() is not None and md_sysfs("degraded") == "0"):
            break
        time.sleep(0.5)
    rates = []
    for rate, phase_seconds in (*SYNC_PHASES, (None, None)):
        if rate != SYNC_PHASES[0][0]:
            wan(LAN_DELAY_MS, rate) if rate else wan()
        seconds, moved = resync_phase(phase_seconds)
        if seconds > 0 and moved > 0:  # a resync that ended in an earlier phase leaves this one none
            rates.append(
                {"link_mbit": rate, "seconds": seconds, "bytes": moved, "bytes_per_s": moved / seconds}
            )
            log(f"resync over {rate or 'the LAN'}: {moved / seconds / 1e6:.2f} MB/s for {seconds:.0f}s")
    reconcile.wait(timeout=900)
    passes = 1
    while md_sysfs("degraded") != "0" or md_sysfs("sync_action") != "idle":
        if passes >= 10:
            sys.exit("bench: the mirror did not come back within 10 reconcile passes")
        run("remirror", "reconcile", str(path), ok=(0, 1, 2))
        passes += 1
        time.sleep(2)
    wait_idle()
    to_mirrored = time.monotonic() - link_back
    resynced = (sectors_written("/dev/lab/b0") - replica_before) * 512
    results["resync"] = {
        "writes_during_outage": writes,
        "bytes_written_during_outage": writes * 4096,
        "hot_region_bytes": hot,
        "dirty_chunks": dirty,
        "chunk_bytes": chunk,
        "dirty_bytes": dirty * chunk,
        "bytes_resynced": resynced,
        "resynced_over_dirty": resynced / (dirty * chunk) if dirty else None,
        "seconds_link_back_to_mirrored": to_mirrored,
        "reconcile_passes": passes,
        "first_write_stall_ms": outage["max_ms"],  # until md failed the leg
        "rates": rates,  # lab time: times the dilation for the modelled hardware's
    }
    log(f"resync: {resynced} bytes for {dirty} dirty chunks in {to_mirrored:.0f}s")
    save()


def resync_phase(cap: float | None) -> tuple[float, int]:
    """Seconds and bytes the resync wrote to the replica from now until `cap` seconds have passed
    or, sooner, it ended (then to its last write, without the wait for md to go idle)."""
    before, started = sectors_written("/dev/lab/b0"), time.monotonic()
    last_change, last = started, before
    while md_sysfs("sync_action") in ("recover", "resync"):
        time.sleep(1)
        now = sectors_written("/dev/lab/b0")
        if now != last:
            last_change, last = time.monotonic(), now
        if cap is not None and time.monotonic() - started >= cap:
            return time.monotonic() - started, (last - before) * 512
    return last_change - started, (last - before) * 512


def grid(device: str, through: str) -> list[dict[str, Any]]:
    """Sequential writes over each link of the capstone's grid: 128 KiB writes, enough of
    them in flight to fill the link (2 at 1 Mbit, where more would only queue)."""
    cells = []
    for rate in GRID_RATES_MBIT:
        for delay in GRID_DELAYS_MS:
            wan(delay, rate)
            depth = 2 if rate == 1 else 32
            # At 1 Mbit one 128 KiB write takes a second: twice as long, for enough of them.
            seconds = SECONDS * 2 if rate == 1 else SECONDS
            done = latency(fio(device, "write", "128k", depth, seconds=seconds)["write"])
            ideal = rate * 1e6 / 8 / 1e6
            cells.append(
                {"through": through, "rate_mbit": rate, "delay_ms": delay, "mb_per_s": done["mb_per_s"],
                 "ideal_mb_per_s": ideal, "of_ideal": done["mb_per_s"] / ideal}
            )  # fmt: skip
            log(f"grid {through} {rate}mbit {delay}ms: {done['mb_per_s']:.2f} MB/s of {ideal:.2f}")
    wan()
    return cells


def link_grid() -> None:
    """The grid through the mirror, then to the iSCSI disk alone: md stopped, the session
    kept, and the array assembled again after, so that `remirror destroy` finds what it built."""
    results["grid"] = grid(MD, "mirror")
    save()
    # fio splits file names at ':', which by-path names are full of: the kernel's name.
    remote = str(Path(REMOTE_LEG).resolve())
    run("mdadm", "--stop", MD)
    results["grid"] += grid(remote, "iSCSI")
    save()
    run("mdadm", "--assemble", MD, "/dev/lab/a0", remote)


def remote_mirror_configs() -> None:
    """S-iL and S-iW on one mirror, then the control plane, the outage and the grid on it."""
    sil = profile("sil")
    apply(sil)
    if wanted("S-iL"):
        iscsi_round_trip()
        measure("S-iL", MD)
        measure("S-iW", MD, setup=lambda: wan(WAN_DELAY_MS, WAN_RATE_MBIT))
        wan()
    if wanted("control"):
        control_plane(sil)
    if wanted("resync"):
        resync_after_outage(sil)
    if wanted("grid"):
        link_grid()
    destroy(sil)


def replica_cache_configs() -> None:
    sid = profile("sid", replica_cache=True)
    apply(sid)
    measure("S-iDL", MD)
    measure("S-iDW", MD, setup=lambda: wan(WAN_DELAY_MS, WAN_RATE_MBIT))
    wan()
    destroy(sid)


def both_caches_config() -> None:
    """The DCD paper's S-iD is bounded by its primary disk for synchronous writes (its
    table 2): with a cache on both legs neither leg waits for a slow disk. Its QD16 job
    writes 128 MiB into 256 MiB caches, a burst that writeback never limits; the steady
    state beside it writes past the caches until writeback bounds the writes."""
    both = profile("did", replica_cache=True, primary_cache=True)
    apply(both)
    caches = (leg_cache("site-a"), leg_cache("site-b"))  # one kernel holds both sites'
    try:
        dirty = caches_dirty(caches)
        measure("D-iDL", MD)
        results["configs"]["D-iDL"]["caches_dirty_at_start"] = dirty
        results["configs"]["D-iDL"]["steady"] = steady_state(MD, caches)
        save()
    finally:  # the next step builds on wiped disks
        destroy(both)


def leg_cache(site: str) -> str:
    """The writecache in front of `site`'s leg of the bench's mirror (profile.names.cache_name's
    name, from the mirror's name alone)."""
    return f"remirror-{MIRROR}-{site}"


def caches_dirty(caches: tuple[str, ...]) -> dict[str, float]:
    """Each writecache's dirty share of its blocks now, what the jobs that follow start with:
    md's initial sync of a new mirror writes the whole disk through them (2026-12-04's D-iDL
    ran at 3.4x S-iL's QD16 where 2026-12-03's ran at 47x, with p50 fast and the mean slow)."""
    shares = {}
    for cache in caches:
        status = parse_cache_status(run("dmsetup", "status", cache))
        shares[cache] = round(status.dirty / status.blocks, 4)
    return shares


STEADY_REGION = (0, 480 << 20)  # of the 512 MiB disk: nearly twice the 256 MiB cache
STEADY_FULL = 0.98  # of the cache's blocks dirty: full, each write waiting for a writeback
STEADY_SECONDS = 4 * SECONDS  # measured once the cache is full


def steady_state(device: str, caches: tuple[str, str]) -> dict[str, Any]:
    """4 KiB random writes at QD16 over a region larger than the writecaches, as D-iDL's QD16
    job but until the primary's cache (`caches[0]`) is full (STEADY_FULL of its blocks used,
    writeback running since it passed its high watermark) and then STEADY_SECONDS more: the
    rate in each second (fio's IOPS log), the burst's (the first 10 s) and the steady state's
    (the last STEADY_SECONDS), the cache's fill over time; then both caches written back
    (dm-writecache's `flush` message: what `destroy` would wait for, longer than it waits),
    and how long that took."""
    logs = Path("/run/bench-steady")
    run("rm", "-rf", str(logs))
    logs.mkdir()
    # Past this, the last STEADY_SECONDS are reported as they are, the cache marked not full.
    cap = 1800
    # No ramp: the burst is the first seconds of the job, and each second is in the IOPS log.
    logged = {"write_iops_log": f"{logs}/steady", "log_avg_msec": "1000"}
    argv = fio_argv(device, "randwrite", "4k", 16, cap, STEADY_REGION, ramp=False, extra=logged)
    fio = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    started, full_at, fill = time.monotonic(), None, []
    try:
        while fio.poll() is None:
            now = time.monotonic() - started
            status = parse_cache_status(run("dmsetup", "status", caches[0]))
            fill.append({"at_s": round(now, 1), "used_of_blocks": round(status.dirty / status.blocks, 4)})
            if full_at is None and status.dirty >= STEADY_FULL * status.blocks:
                full_at = now
                log(f"steady: the cache full after {now:.0f}s")
            if full_at is not None and now >= full_at + STEADY_SECONDS:
                break
            time.sleep(2)
        fio.send_signal(signal.SIGINT)  # fio ends its job and reports it
        report, _ = fio.communicate(timeout=600)
    finally:  # never left writing under the teardown
        if fio.poll() is None:
            fio.kill()
            fio.wait()
    end = time.monotonic() - started
    # (msec since fio started, the IOPS of the second that ended then); a second in which no
    # write completed has no line: it counts as none.
    windows = [
        (int(fields[0]), int(fields[1]))
        for path in sorted(logs.glob("steady_iops*.log"))
        for line in path.read_text().splitlines()
        if len(fields := line.split(",")) > 1
    ]
    last = windows[-1][0] / 1000 if windows else 0.0
    burst = sum(iops for ms, iops in windows if ms <= 10_000) / 10 if windows else None
    steady = (
        sum(iops for ms, iops in windows if ms / 1000 > last - STEADY_SECONDS) / STEADY_SECONDS
        if last > STEADY_SECONDS
        else None
    )
    # fio's JSON after its own line about the signal, wherever fio puts that line.
    whole = json.loads(report[report.index("{") :])["jobs"][0]["write"] if "{" in report else None
    done = {
        "region_bytes": STEADY_REGION[1],
        "cache_full_after_s": full_at,
        "seconds": end,
        "burst_iops": burst,
        "steady_iops": steady,
        "steady_seconds": STEADY_SECONDS,
        "iops_per_second": [iops for _, iops in windows],
        "fill": fill[::5],  # every tenth second
        "whole_job": latency(whole) if whole else None,
        "written_back_s": write_back(caches),
    }
    log(f"steady: burst {burst} IOPS, steady {steady} IOPS; written back in {done['written_back_s']:.0f}s")
    return done


def write_back(caches: tuple[str, ...]) -> float:
    """Seconds until every cache has written all it holds back to its disk (`flush`, both at once)."""
    started = time.monotonic()
    flushing = [subprocess.Popen(["dmsetup", "message", name, "0", "flush"]) for name in caches]
    for each in flushing:
        if each.wait(timeout=3600) != 0:
            sys.exit(f"bench: a writecache's flush failed: {each.args!r}")
    return time.monotonic() - started


def async_config() -> None:
    asynchronous = profile("async", mode="async")
    apply(asynchronous)
    measure("async-W", MD, setup=lambda: wan(WAN_DELAY_MS, WAN_RATE_MBIT))
    wan()
    destroy(asynchronous)


def cdp_config(every: int, primary_cache: bool = False, replica_cache: bool = False) -> None:
    """CDP on S-iL, a recovery point every `every` seconds of the modelled hardware's time
    (`every` times the dilation in the lab's: the cadence is a physical figure like the
    disks'), taken by CDP's daemon (`remirror cdp run`, bench/points_daemon.py) while the jobs
    run, as at a site. Each job the targets judge runs one interval (see all_workloads), so
    that it holds about one point, wherever in the job the daemon's schedule puts it, and the
    ratio is a cadence's average cost and not the rush after a point alone. With `every` 0,
    the same stack with no point taken (CDP-stack): what dm-era and the thin volume cost
    standing, apart from what each point costs after it (copy-on-write, a new era). With
    `primary_cache`, the primary's leg has a writecache (the DCD), which takes the
    copy-on-write's writes at the primary as it takes any other (CDP-60s-D); with
    `replica_cache` too, the replica's leg has one as well (CDP-60s-DD, over D-iDL's legs): in
    sync mode every write, the copy-on-write's included, waits for the replica's disk, so a
    cache at the primary alone leaves CDP's cost at the replica's uncached disk."""
    caches = ("D" if primary_cache else "") + ("D" if replica_cache else "")
    name = (f"CDP-{every}s" if every else "CDP-stack") + (f"-{caches}" if caches else "")
    interval = max(1, round(every * (net.dilation() or 1.0)))
    label = f"cdp{every}{caches.lower()}"
    cdp = profile(
        label, cdp_every=interval if every else 60, primary_cache=primary_cache, replica_cache=replica_cache
    )
    apply(cdp)
    # Written once before measuring: the pool's first allocation of a chunk is a
    # one-time cost; what is measured is copy-on-write after each point.
    log(f"{name}: filling the region once")
    run("dd", "if=/dev/zero", f"of={CDP_VOLUME}", "bs=1M", f"seek={REGION_OFFSET >> 20}",
        f"count={REGION_SIZE >> 20}", "oflag=direct", "status=none", timeout=1800)  # fmt: skip
    if not every:
        measure(name, CDP_VOLUME)
        destroy(cdp)
        return
    dirty = caches_dirty(
        tuple(leg_cache(site) for site, has in (("site-a", primary_cache), ("site-b", replica_cache)) if has)
    )
    job_starts: list[float] = []
    daemon = PointsDaemon(cdp, MIRROR)
    try:
        daemon.wait_for_point(timeout=600)
        measure(name, CDP_VOLUME, cadence=(lambda: job_starts.append(time.monotonic()), interval))
    finally:
        daemon.stop()
        destroy(cdp)
    done = daemon.record(job_starts, interval)
    results["configs"][name].update(
        points_taken=len(done["points"]),
        daemon=done,
        every_s=every,
        interval_lab_s=interval,
        caches_dirty_at_start=dirty,
    )
    save()


# The DR site's own points under its leg (`replicas[].points`) in async mode: every 10 modelled
# seconds, a stress beside a site's daily points, so that each judged job holds one.
OWN_POINTS_EVERY = 10
OWN_POINTS_ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def drained(device: str, timeout: float = 900) -> float | None:
    """Seconds until `device` (site A's disk of the DR leg) has had no write in flight for two
    looks in a row: md's write-behind backlog to the DR site gone; None past `timeout`."""
    started, calm = time.monotonic(), 0
    while calm < 2:
        if time.monotonic() - started > timeout:
            return None
        calm = calm + 1 if writes_in_flight(device) == 0 else 0
        time.sleep(0.25)
    return round(time.monotonic() - started, 2)


class Looks:
    """What a job shows every 0.2 s while the block runs: the most writes in flight at a disk
    (its sysfs `inflight`), whether the DR leg's queue at the primary fills during a point; and
    where fio and md's raid1 thread sleep uninterruptibly (probes.Waits): the layer a write
    waits in while a point holds the DR leg."""

    def __init__(self, device: str) -> None:
        self.device, self.most = device, 0
        self.waits = Waits(lambda name: name == "fio" or re.fullmatch(r"md\d+_raid1", name) is not None)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._look, daemon=True)

    def _look(self) -> None:
        while not self._stop.wait(0.2):
            self.most = max(self.most, writes_in_flight(self.device))
            self.waits.look()

    def __enter__(self) -> Looks:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)


def own_points_pass(view: Path, interval: int, number: int, points: bool) -> dict[str, Any]:
    """QD1 and then QD16 random writes, each one `interval` long, with site B's daemon taking
    its leg's points meanwhile or not; after each job, how long md's backlog took to drain."""
    daemon = PointsDaemon(view, MIRROR, at_site_b=True) if points else None
    job_starts: list[float] = []
    done: dict[str, Any] = {"round": number, "points": points}
    queue_depth = Path("/sys/class/block") / Path(REMOTE_LEG).resolve().name / "device" / "queue_depth"
    done["dr_leg_queue_depth"] = int(queue_depth.read_text())
    try:
        if daemon is not None:
            daemon.wait_for_point(timeout=600)
        for job in ("qd1", "qd16"):
            job_starts.append(time.monotonic())
            with Looks(REMOTE_LEG) as seen:
                done[job] = latency(fio(MD, *FIO_SHAPES[job], seconds=interval)["write"])
            done[f"{job}_dr_leg_in_flight_max"] = seen.most
            done[f"{job}_waits"] = {"looks": seen.waits.looks, "most_seen": seen.waits.most()}
            done[f"{job}_drained_s"] = drained(REMOTE_LEG)
    finally:
        if daemon is not None:
            daemon.stop()
    if daemon is not None:
        done["daemon"] = daemon.record(job_starts, interval)
    log(f"own points, round {number}, {'with' if points else 'without'} points: QD1 p50"
        f" {done['qd1']['p50_ms']:.1f} ms, QD16 {done['qd16']['iops']:.0f} IOPS")  # fmt: skip
    return done


# BENCH_LEG_WBT=off: writeback throttling (blk-wbt) off on the DR leg's iSCSI disk at the
# primary, for own-points: 2026-12-04's run found md's raid1 thread, which submits every leg's
# writes, asleep in `wbt_wait` on that disk in 328 of 1155 looks with the points (46 of 873
# without). md drops the flag that exempts O_DIRECT writes, so wbt counts all of md's.
LEG_WBT_OFF = os.environ.get("BENCH_LEG_WBT") == "off"


def leg_wbt(turn_off: bool) -> str:
    """The DR leg's iSCSI disk's `wbt_lat_usec` (0: off), turned off first if asked."""
    disk = Path(REMOTE_LEG).resolve().name
    knob = Path(f"/sys/block/{disk}/queue/wbt_lat_usec")
    before = knob.read_text().strip()
    if turn_off:
        knob.write_text("0\n")
    return f"{disk}: {before}" + (f" -> {knob.read_text().strip()}" if turn_off else "")


def own_points_config() -> None:
    """Async mode over the WAN with the DR site's own points under its leg, taken by site B's
    own daemon (its view of the profile, its namespaces) every OWN_POINTS_EVERY modelled
    seconds: what they cost the primary (issue 48: QD1's p50 within 1.05x of async without
    them, and md's backlog to the DR site drained after each burst). One mirror, the stack
    under the leg throughout, and OWN_POINTS_ROUNDS rounds of a pass with the daemon and one
    without, their order alternating (ABBA), so that a drift of the machine's speed falls on
    both; async-W in the same run is the mirror with no stack under its leg at all."""
    interval = max(1, round(OWN_POINTS_EVERY * (net.dilation() or 1.0)))
    path = profile("ownpoints", mode="async", replica_points_every=interval)
    view = site_b_view(path)
    passes: list[dict[str, Any]] = []
    results["own_points"] = {"every_s": OWN_POINTS_EVERY, "interval_lab_s": interval, "passes": passes}
    try:
        apply(path)
        results["own_points"]["leg_wbt_lat_usec"] = leg_wbt(LEG_WBT_OFF)
        wan(WAN_DELAY_MS, WAN_RATE_MBIT)
        for number in range(1, OWN_POINTS_ROUNDS + 1):
            for points in (False, True) if number % 2 else (True, False):
                passes.append(own_points_pass(view, interval, number, points))
                save()
    finally:
        wan()
        destroy_with_site_b_points(path, view)


def main() -> int:
    results.update(
        meta={
            "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "kernel": platform.release(),
            "fio": run("fio", "--version").strip(),
            "mdadm": subprocess.run(
                ["mdadm", "--version"], capture_output=True, text=True, check=False
            ).stderr.strip(),
            "performance": net.performance(),
            "fio_seconds": SECONDS,
            "only": sorted(ONLY),  # BENCH_ONLY: the steps asked for (none: all)
            "trace": {"file": TRACE.name, "seconds": TRACE_SECONDS},
            "region": {"offset": REGION_OFFSET, "size": REGION_SIZE},
            "wan_delay_ms_each_way": WAN_DELAY_MS,
            "wan_rate_mbit": WAN_RATE_MBIT,
        },
        configs={},
    )
    save()
    steps: list[tuple[str, Callable[[], None]]] = [
        ("baseline", lambda: measure("baseline", "/dev/lab/a3")),
        ("calibration", calibration),
        ("S-S", local_mirror),
        ("S-iL", remote_mirror_configs),
        ("S-iD", replica_cache_configs),
        ("D-iDL", both_caches_config),
        ("async-W", async_config),
        ("CDP-stack", lambda: cdp_config(0)),
        ("CDP-60s", lambda: cdp_config(60)),
        ("CDP-60s-D", lambda: cdp_config(60, primary_cache=True)),
        ("CDP-60s-DD", lambda: cdp_config(60, primary_cache=True, replica_cache=True)),
        ("CDP-10s", lambda: cdp_config(10)),
        ("own-points", own_points_config),
    ]
    on_sil = ("control", "resync", "grid")
    steps = [(n, f) for n, f in steps if wanted(n) or (n == "S-iL" and any(wanted(p) for p in on_sil))]
    for name, step in steps:
        # A step that fails is recorded and the rest still run: each builds from wiped disks.
        try:
            step()
        except (SystemExit, Exception) as error:  # noqa: BLE001 - a bug in one step must not end the run
            log(f"{name}: failed: {error}")
            results.setdefault("errors", {})[name] = str(error)
            save()
    log("all done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
