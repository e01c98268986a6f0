"""What site B's copy is worth after site A is lost, in sync and async mode.

Run inside a lab (docs/failover.md, "What async mode gives"); the lab does not
pass the host's environment in, so settings go through `env`:

    remirror lab run --timeout 170m --out bench/out -- python bench/async_disaster.py
    remirror lab run --out bench/out -- env BENCH_ONLY=order RUNS=3 python bench/async_disaster.py

Three experiments, on a mirror of their own (lab4 on a3/b3) over a 40 ms
round trip:

* `database`: remirror.lab.disaster's rehearsal, RUNS times per
  configuration: PostgreSQL under pgbench on ext4, the link cut and site A
  lost at once, site B promoted by force, then `e2fsck -fn` and the
  database's own checks. Configurations: `sync`, `async` (as remirror
  builds it), `async-lio-defaults` (the same, with the iSCSI session
  negotiated as LIO and open-iscsi do by default, and the remote disk's
  default I/O scheduler: what a hand-built md+iSCSI mirror runs with).
* `loss`: the bound on what async mode loses. One writer, 64 KiB at a
  time into fresh blocks (O_DIRECT, no flush): the local disk takes about
  forty a second, a 2 Mbit/s link carries four, so md's behind writes pile
  up to `write_behind` within seconds and stay there; the link cut; after
  site B's forced promotion, the writes acknowledged before the cut that it
  lacks, against `write_behind` and md's high-water mark. WRITE_BEHIND
  (default 16,64,256) lists the limits tried.
* `order`: whether site B holds a prefix of what site A sent (`order`'s
  docstring), with remirror's session and with LIO's defaults, RUNS times.

BENCH_ONLY=database|loss|order picks one; RUNS (default 5) and CONFIGS (default
all three) narrow the first. Results: $LAB_OUT/async-disaster.json.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from basics import log, run
from common import OUT

from remirror.lab import disaster, net, probes
from remirror.lab.spec import Wan

MD, DISKS = disaster.MD, disaster.DISKS
RUNS = int(os.environ.get("RUNS", "5"))
CONFIGS = os.environ.get("CONFIGS", "sync,async,async-lio-defaults").split(",")
ONLY = set(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
RESULTS: dict[str, Any] = {"database": {}, "loss": [], "order": []}


def remirror(*argv: str, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, str, str]:
    """A remirror verb as a process on site A."""
    done = subprocess.run(["remirror", *argv], capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode not in ok_codes:
        raise RuntimeError(f"remirror {' '.join(argv)}: exit {done.returncode}: {done.stdout}{done.stderr}")
    return done.returncode, done.stdout, done.stderr


def save() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "async-disaster.json").write_text(json.dumps(RESULTS, indent=2) + "\n")


def lio_defaults() -> None:
    """The session as LIO and open-iscsi negotiate by default, the remote disk on its default
    scheduler: what a mirror built by hand runs with. Takes effect at a new login (md fails the
    leg; it comes back through its bitmap)."""
    iqn = "iqn.2026-11.org.remirror:lab.lab4.site-b"
    script = (
        "from rtslib_fb import Target, TPG, FabricModule\n"
        f"tpg = TPG(Target(FabricModule('iscsi'), '{iqn}', mode='lookup'), 1, mode='lookup')\n"
        "for k, v in {'InitialR2T': 'Yes', 'ImmediateData': 'Yes', 'FirstBurstLength': '65536',"
        " 'MaxBurstLength': '262144', 'MaxRecvDataSegmentLength': '8192'}.items():\n"
        "    tpg.set_parameter(k, v)\n"
    )
    run(*net.in_site_b([sys.executable, "-c", script]))
    node = ["iscsiadm", "-m", "node", "-T", iqn, "-p", "192.0.2.2:3260"]
    for key, value in {"FirstBurstLength": "262144", "MaxBurstLength": "16776192"}.items():
        run(*node, "-o", "update", "-n", f"node.session.iscsi.{key}", "-v", value)
    run(*node, "--logout")
    run(*node, "--login")
    disk = Path(f"/dev/disk/by-path/ip-192.0.2.2:3260-iscsi-{iqn}-lun-0")
    deadline = time.monotonic() + 60
    while not disk.exists():
        if time.monotonic() > deadline:
            sys.exit("bench: the replica leg did not come back after the new login")
        time.sleep(0.5)
    Path(f"/sys/class/block/{disk.resolve().name}/queue/scheduler").write_text("mq-deadline")
    # The old session's disk is gone: md holds it as failed, or as detached if nothing was written.
    run("mdadm", MD, "--fail", "detached", "--remove", "detached", ok=(0, 1))
    run("mdadm", MD, "--remove", "failed", ok=(0, 1))
    run("mdadm", MD, "--re-add", str(disk))
    Path(f"/sys/block/{Path(MD).resolve().name}/md/dev-{disk.resolve().name}/state").write_text("writemostly")
    probes.wait_idle(MD, 900)


def database_runs() -> None:
    for config in CONFIGS:
        mode = "sync" if config == "sync" else "async"
        site_a, site_b = disaster.profiles(Path("/run"), mode)
        found: list[dict[str, Any]] = RESULTS["database"].setdefault(config, [])
        for n in range(RUNS):
            log(f"database {config} run {n + 1}/{RUNS}")
            try:
                prepare = lio_defaults if config == "async-lio-defaults" else None
                rehearsal = disaster.rehearse(
                    remirror, site_a, site_b, wan=Wan(delay="20ms"), prepare=prepare
                )
                found.append(rehearsal.as_json())
                log(
                    f"{config}: {rehearsal.acknowledged} committed before the cut,"
                    f" {rehearsal.missing} missing at site B,"
                    f" fsck {'clean' if rehearsal.fsck_clean else 'ERRORS'},"
                    f" database {'sound' if rehearsal.sound else 'BROKEN'}"
                )
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                found.append({"error": str(error)[-2000:]})
                log(f"{config}: run failed: {error}")
            finally:
                disaster.cleanup(remirror, site_a)
            save()


def write_data(fd: int, offset: int, size: int = 4096) -> str:
    """`size` bytes of random data at `offset` (acknowledged by md when it returns); their sha256."""
    block = mmap.mmap(-1, size)
    block.write(os.urandom(size))
    os.pwrite(fd, block, offset)
    return hashlib.sha256(block).hexdigest()


def read_data(fd: int, offset: int, size: int = 4096) -> str:
    block = mmap.mmap(-1, size)
    os.preadv(fd, [block], offset)
    return hashlib.sha256(block).hexdigest()


def loss(write_behind: int, seconds: float = 20.0, size: int = 64 << 10) -> None:
    """Writes acknowledged before a cut that site B lacks after its forced promotion, with md's
    backlog full: the link drains `size` writes ten times slower than the local disk takes them.
    (A 4 KiB writer at queue depth 1 did not fill it: under emulation it wrote about 50 a
    second, which a 2 Mbit/s link carries, and md's high-water mark stayed near 25.)"""
    site_a, site_b = disaster.profiles(Path("/run"), "async", write_behind, "64MiB")
    log(f"loss: write_behind {write_behind}")
    remirror("apply", "--yes", site_a)
    probes.wait_idle(MD, 900)
    run("remirror", "lab", "wan", "--delay", "20ms", "--rate", "2mbit")
    base = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    (base / "bitmap/max_backlog_used").write_text("0")
    remote = next(m for m in base.glob("dev-sd*"))
    # O_DIRECT without O_SYNC: on a block device O_SYNC adds a cache flush to every write, and
    # md sends a flush to every leg: each write would wait for site B (docs/failover.md).
    fd = os.open(MD, os.O_WRONLY | os.O_DIRECT)
    written: list[tuple[int, str]] = []
    stop = threading.Event()
    end = int(probes.md_sysfs("component_size", MD)) << 10  # KiB: a raid1 leg is the array

    def writer() -> None:
        offset = 64 << 20
        while not stop.is_set() and offset + size <= end:
            written.append((offset, write_data(fd, offset, size)))
            offset += size

    # The cut comes from here, at a moment of its own, not when a write returns: once md's
    # backlog is full a write waits for the link to drain it, so "after a write returned" is
    # the one moment the backlog is empty (a first version cut there and found nothing missing).
    thread = threading.Thread(target=writer, daemon=True)
    try:
        thread.start()
        time.sleep(seconds)
        high_water = int((base / "bitmap/max_backlog_used").read_text())
        in_flight = int((remote / "block/inflight").read_text().split()[1])
        acknowledged = len(written)  # these returned before the cut
        net.set_link(False)
        stop.set()
        thread.join(timeout=600)  # its last write returns once md fails the remote leg
    finally:
        os.close(fd)
    written = written[:acknowledged]
    # Site A is lost; site B is promoted by force and serves what it has.
    run("mdadm", "--stop", MD, timeout=300)
    promote = ["remirror", "promote", site_b, disaster.MIRROR, "--site", "site-b", "--force", "--yes"]
    run(*net.in_site_b(promote))
    promoted = os.open(MD, os.O_RDONLY | os.O_DIRECT)
    try:
        missing = sum(1 for at, digest in written if read_data(promoted, at, size) != digest)
    finally:
        os.close(promoted)
    RESULTS["loss"].append(
        {
            "write_behind": write_behind,
            "acknowledged": len(written),
            "missing_at_site_b": missing,
            "max_backlog_used": high_water,
            "writes_in_flight_at_the_cut": in_flight,
            "write_size": size,
            "missing_bytes": missing * size,
            "link": "2 Mbit/s, 40 ms round trip",
        }
    )
    log(f"loss: write_behind {write_behind}: {missing} of {len(written)} missing, high water {high_water}")
    save()
    disaster.cleanup(remirror, site_a)


def order(config: str, seconds: float = 10.0) -> None:
    """Whether site B holds a prefix of the writes site A sent: one writer, 64 KiB and 4 KiB
    writes in turn into fresh blocks, each issued when the last completed (as a journal's are),
    no flush; the link cut; after the promotion, the writes site B lacks that come before one it
    has ("holes"). None with remirror's session; LIO's defaults let a 4 KiB write overtake a
    64 KiB one waiting for its R2T."""
    site_a, site_b = disaster.profiles(Path("/run"), "async", 4096, "64MiB")
    log(f"order: {config}")
    remirror("apply", "--yes", site_a)
    probes.wait_idle(MD, 900)
    if config == "async-lio-defaults":
        lio_defaults()
    run("remirror", "lab", "wan", "--delay", "20ms", "--rate", "10mbit")
    base = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    (base / "bitmap/max_backlog_used").write_text("0")
    fd = os.open(MD, os.O_WRONLY | os.O_DIRECT)
    written: list[tuple[int, int, str]] = []
    try:
        deadline, offset = time.monotonic() + seconds, 64 << 20
        while time.monotonic() < deadline:
            size = 65536 if len(written) % 2 == 0 else 4096
            written.append((offset, size, write_data(fd, offset, size)))
            offset += size
        high_water = int((base / "bitmap/max_backlog_used").read_text())
        net.set_link(False)
    finally:
        os.close(fd)
    run("mdadm", "--stop", MD, timeout=300)
    promote = ["remirror", "promote", site_b, disaster.MIRROR, "--site", "site-b", "--force", "--yes"]
    run(*net.in_site_b(promote))
    promoted = os.open(MD, os.O_RDONLY | os.O_DIRECT)
    try:
        present = [read_data(promoted, at, size) == digest for at, size, digest in written]
    finally:
        os.close(promoted)
    last = max((i for i, here in enumerate(present) if here), default=-1)
    holes = sum(1 for here in present[:last] if not here)
    RESULTS["order"].append(
        {
            "config": config,
            "written": len(written),
            "at_site_b": sum(present),
            "holes": holes,
            "max_backlog_used": high_water,
            "link": "10 Mbit/s, 40 ms round trip",
        }
    )
    log(f"order {config}: {sum(present)} of {len(written)} at site B, {holes} hole(s), held {high_water}")
    save()
    disaster.cleanup(remirror, site_a)


def main() -> int:
    if not ONLY or "database" in ONLY:
        database_runs()
    if not ONLY or "loss" in ONLY:
        for write_behind in os.environ.get("WRITE_BEHIND", "16,64,256").split(","):
            loss(int(write_behind))
    if not ONLY or "order" in ONLY:
        for _ in range(RUNS):
            for config in ("async", "async-lio-defaults"):
                order(config)
    save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
