"""No hole in the DR copy goes unseen (docs/safety.md, "A write a leg did not take").

Faults injected with device-mapper under the lab's disks while md and LIO hold them: an
`error` segment under site B's disk (a medium that fails writes; the link and the session stay
up), a `flakey` one that fails only writes under site A's, and site B's own points filling
their thin pool with real writes. In each, writes through the mirror with O_DIRECT|O_SYNC
record what was acknowledged; remirror says at once which leg lacks what (status, check
CRITICAL, metrics), repairs it by itself once the disk takes writes again with a resync no
larger than what the leg missed, and `verify` then finds the legs identical, with every
acknowledged write on site B's disk.

Two sync mirrors of one profile, built once for the module: `hole0` (a1/b1) for the faults,
`hole1` (a2/b2) with site B's own points for the full pool. Site B's own view of the profile
(itself local) is what its operator runs `cdp` and `check` with there; it is kept outside
/etc/remirror, so that site B's agent does not load it as its scope at every command (that
costs seconds under emulation; the scope is test_security's).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from remirror.agent.digest import data_offset
from remirror.facts.cdp import parse_thin_pool_status
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import SLOW, remirror, site_views, wait_in_sync, write_random

MiB = 1024 * 1024
CHUNK = MiB  # the mirrors' bitmap chunk
HOLE0, HOLE1 = "/dev/md/hole0", "/dev/md/hole1"
DISKS = ("/dev/lab/a1", "/dev/lab/b1", "/dev/lab/a2", "/dev/lab/b2")
MIRRORS = """\
  - name: hole0
    primary: {site: site-a, disk: /dev/lab/a1}
    replicas:
      - {site: site-b, disk: /dev/lab/b1, portal: "192.0.2.2:3260"}
    replication: {mode: sync, bitmap_chunk: 1MiB}
    iscsi: {timeouts: lan}
  - name: hole1
    primary: {site: site-a, disk: /dev/lab/a2}
    replicas:
      - site: site-b
        disk: /dev/lab/b2
        portal: "192.0.2.2:3260"
        points: {every: 1d, keep: 7d}
    replication: {mode: sync, bitmap_chunk: 1MiB}
    iscsi: {timeouts: lan}
"""
SITE_A_VIEW, SITE_B_VIEW = site_views("holes", MIRRORS)
PROFILE = Path("/run/remirror-holes.yaml")  # site A's: not in /etc/remirror, which site B shares
SITE_B_PROFILE = Path("/run/remirror-holes-site-b.yaml")  # site B's own view: itself local
POOL = "remirror-hole1.site-b-cdp-pool"  # the thin pool under site B's points of hole1


@pytest.fixture(scope="module")
def holes() -> Iterator[None]:
    for disk in DISKS:  # blank heads: no --allow-destructive
        sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=64", "oflag=direct", "status=none")
    SITE_B_PROFILE.write_text(SITE_B_VIEW)
    PROFILE.write_text(SITE_A_VIEW)
    code, out, err = remirror("apply", "--yes", str(PROFILE))
    assert code == 0, out + err
    wait_in_sync(HOLE0)
    wait_in_sync(HOLE1)
    try:
        yield
    finally:
        for name in ("hole0", "hole1"):
            remirror("destroy", "--yes", str(PROFILE), name, ok_codes=(0, 1))
        # Site B's points stay up after the primary's destroy: only site B takes them down.
        on_b(
            "remirror", "cdp", "down", str(SITE_B_PROFILE), "hole1", "--leg", ok_codes=(0, 3)
        )  # 3: none there
        SITE_B_PROFILE.unlink(missing_ok=True)
        for disk in DISKS:  # the points' metadata too: wipefs knows none of it
            sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=64", "oflag=direct", "status=none")


@contextlib.contextmanager
def failing(disk: str, offset: int, length: int, writes_only: bool = False) -> Iterator[None]:
    """`disk` (a lab disk: a dm linear device) fails I/O to bytes [offset, offset + length) of it
    while the block runs: an `error` segment (a medium that fails everything there), or with
    `writes_only` a `flakey` one that fails only writes, swapped in live under md and LIO."""
    name = Path(f"/sys/class/block/{Path(disk).resolve().name}/dm/name").read_text().strip()
    table = sh("dmsetup", "table", name).stdout.strip()
    _, length_sectors, target, device, base = table.split()
    assert target == "linear", table
    start, count, end = offset // 512, length // 512, int(length_sectors)
    bad = f"flakey {device} {int(base) + start} 0 1 1 error_writes" if writes_only else "error"
    segments = [
        f"0 {start} linear {device} {base}",
        f"{start} {count} {bad}",
        f"{start + count} {end - start - count} linear {device} {int(base) + start + count}",
    ]
    sh("dmsetup", "reload", name, "--table", "\n".join(segments))
    sh("dmsetup", "resume", name)
    try:
        yield
    finally:
        sh("dmsetup", "reload", name, "--table", table)
        sh("dmsetup", "resume", name)


def written(disk: str) -> int:
    """Bytes written to a lab disk so far (the block layer's count)."""
    return int(Path(f"/sys/class/block/{Path(disk).resolve().name}/stat").read_text().split()[6]) * 512


def write_acknowledged(device: str, offset: int, size: int, block: int = 64 * 1024) -> dict[int, str]:
    """Write `size` bytes at `offset` through the mirror, `block` at a time, each with O_DIRECT and
    O_SYNC: every write returns only once md acknowledged it. Their digests, by offset."""
    return {at: write_random(at, block, device) for at in range(offset, offset + size, block)}


def on_leg(disk: str, acknowledged: dict[int, str], block: int = 64 * 1024) -> list[int]:
    """The acknowledged writes that `disk` (a leg, read directly) does not hold."""
    base = data_offset(disk)
    buffer = mmap.mmap(-1, block)
    fd = os.open(disk, os.O_RDONLY | os.O_DIRECT)
    try:
        wrong = []
        for at, digest in acknowledged.items():
            assert os.preadv(fd, [buffer], base + at) == block
            if hashlib.sha256(buffer).hexdigest() != digest:
                wrong.append(at)
        return wrong
    finally:
        os.close(fd)


def mirror_status(name: str) -> dict[str, Any]:
    document = json.loads(remirror("status", "-o", "json", str(PROFILE), ok_codes=(0, 1))[1])
    found = next(m for m in document["mirrors"] if m["mirror"] == name)
    assert isinstance(found, dict)
    return found


def check() -> tuple[int, str]:
    code, out, _ = remirror("check", "-t", str(SLOW), str(PROFILE), ok_codes=(0, 1, 2))
    return code, out


def metric(name: str, **labels: str) -> float:
    text = remirror("metrics", str(PROFILE))[1]
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    raise AssertionError(f"no {name} {labels} in the metrics")


def reconcile(*args: str) -> tuple[int, str]:
    code, out, _ = remirror("reconcile", *args, str(PROFILE), ok_codes=(0, 1, 2))
    return code, out


def until_mirrored(timeout: float = SLOW) -> list[str]:
    lines, deadline = [], time.monotonic() + timeout
    while True:
        code, out = reconcile()
        lines.append(out.strip())
        if code == 0:
            return lines
        assert time.monotonic() < deadline, lines
        time.sleep(3)


def verify(name: str) -> None:
    code, out, err = remirror("verify", "-o", "json", str(PROFILE), name, ok_codes=(0, 1, 2))
    assert code == 0, out + err
    assert json.loads(out)["mismatched"] == [], out


def bad_block_log(disk: str) -> bool:
    """Whether md gave this leg a bad block log (`mdadm --examine`, read on site B)."""
    return "Bad Block Log" in on_b("mdadm", "--examine", disk).stdout


def replica_member(md: str) -> Path:
    """md's sysfs directory of the replica's member (an iSCSI disk)."""
    (member,) = Path(f"/sys/block/{Path(md).resolve().name}/md").glob("dev-sd*")
    return member


def test_a_write_site_bs_disk_fails_fails_its_leg_and_only_what_it_missed_is_resynced(holes: None) -> None:
    # Made without md's bad block log: a write it fails cannot be absorbed.
    assert not bad_block_log("/dev/lab/b1")
    # 1 MiB of site B's disk 64 MiB into the leg fails writes; the link and the session stay up.
    leg_offset = data_offset("/dev/lab/b1")
    with failing("/dev/lab/b1", leg_offset + 64 * MiB, MiB):
        acknowledged = write_acknowledged(HOLE0, 63 * MiB, 3 * MiB)  # every write returns
        # md failed the leg at the first write it did not take: the bitmap keeps the rest.
        assert "faulty" in (replica_member(HOLE0) / "state").read_text()
        hole0 = mirror_status("hole0")
        assert hole0["state"] == "MIRROR_DEFUNCT", hole0
        replica = hole0["legs"][1]
        assert replica["status"] == "faulty", replica
        assert replica["session"] == "LOGGED_IN", replica
        assert replica["out_of_sync_bytes"] >= 2 * CHUNK, replica
        assert replica["rpo_seconds"] != 0, replica  # unknown (null) or its age, never 0
        code, out = check()
        assert code == 2, out
        assert "hole0 MIRROR_DEFUNCT" in out, out
        # The disk still fails: each re-add fails again. After three the leg is left out, not flapped.
        passes = []
        for _ in range(8):
            code, out = reconcile()
            passes.append(out)
            if "left out" in out:
                break
            time.sleep(1)
        assert "left out" in passes[-1], passes
        assert code == 2, passes
        assert sum(out.count("done: ~ site-a: ReAddLeg") for out in passes) == 3, passes
        hole0 = mirror_status("hole0")
        assert hole0["legs"][1]["held_until"] is not None, hole0
        assert hole0["legs"][1]["failed_readds"] == 3, hole0
        missed = hole0["legs"][1]["out_of_sync_bytes"]
    # Remapped (the disk takes writes again): the operator says so, the leg comes back.
    before = written("/dev/lab/b1")
    code, out = reconcile("--retry")
    assert code in (0, 1), out
    until_mirrored()
    resynced = written("/dev/lab/b1") - before
    # Bitmap-sized: the chunks it missed (and md's own superblock writes), never the disk.
    assert resynced <= missed + CHUNK, (resynced, missed)
    assert on_leg("/dev/lab/b1", acknowledged) == []
    verify("hole0")
    assert mirror_status("hole0")["legs"][1]["failed_readds"] == 0


def test_a_leg_with_a_bad_block_log_that_absorbed_a_write_is_reported_and_rewritten(holes: None) -> None:
    # As an older remirror (or mdadm by hand) made it: the replica leg with md's bad block log.
    member = replica_member(HOLE0)
    leg = f"/dev/{member.name.removeprefix('dev-')}"
    sh("mdadm", HOLE0, "--fail", leg, "--remove", leg)
    sh("mdadm", HOLE0, "--re-add", "--update=bbl", leg)
    wait_in_sync(HOLE0)
    assert bad_block_log("/dev/lab/b1")
    leg_offset = data_offset("/dev/lab/b1")
    with failing("/dev/lab/b1", leg_offset + 64 * MiB, MiB):
        acknowledged = write_acknowledged(HOLE0, 63 * MiB, 3 * MiB)
        # md absorbed it: the leg is in sync for md, its log lists the sectors.
        assert "[UU]" in Path("/proc/mdstat").read_text()
        assert (replica_member(HOLE0) / "bad_blocks").read_text().strip()
        hole0 = mirror_status("hole0")
        assert hole0["state"] == "MIRROR_DEFUNCT", hole0
        replica = hole0["legs"][1]
        assert replica["status"] == "incomplete", replica
        assert replica["missed"] == [{"offset": 64 * MiB, "length": MiB}], replica
        assert replica["out_of_sync_bytes"] >= MiB, replica
        assert replica["rpo_seconds"] != 0, replica
        code, out = check()
        assert code == 2, out
        assert "lacks 1MiB at 64MiB of acknowledged writes" in out, out
        assert metric("remirror_leg_bad_blocks_bytes", mirror="hole0", leg="site-b") == MiB
    # The disk takes writes again: one pass rewrites what the log listed and drops the log.
    before = written("/dev/lab/b1")
    lines = until_mirrored()
    assert any("done: ~ site-a: DropBadBlockLog" in line for line in lines), lines
    assert not any("ReAddLeg" in line for line in lines), lines  # not failed and re-added: rewritten
    resynced = written("/dev/lab/b1") - before
    assert resynced <= 2 * CHUNK, resynced  # the chunk it lacked, and md's superblock writes
    assert not bad_block_log("/dev/lab/b1")
    assert not (replica_member(HOLE0) / "bad_blocks").read_text().strip()
    assert on_leg("/dev/lab/b1", acknowledged) == []
    verify("hole0")


def test_a_write_the_primarys_disk_fails_is_reported_and_read_from_the_replica(holes: None) -> None:
    # The primary's leg keeps md's log: a sector it cannot write is read from the replica.
    leg_offset = data_offset("/dev/lab/a1")
    with failing("/dev/lab/a1", leg_offset + 80 * MiB, MiB, writes_only=True):
        acknowledged = write_acknowledged(HOLE0, 80 * MiB, MiB)
        hole0 = mirror_status("hole0")
        primary = hole0["legs"][0]
        assert primary["status"] == "incomplete", primary
        assert primary["missed"] == [{"offset": 80 * MiB, "length": MiB}], primary
        assert "the only good copy" in hole0["reason"], hole0
        code, out = check()
        assert code == 2, out
        assert "the primary leg lacks 1MiB at 80MiB" in out, out
        # Applications read what they wrote: md reads those sectors from site B.
        fd = os.open(HOLE0, os.O_RDONLY | os.O_DIRECT)
        buffer = mmap.mmap(-1, 64 * 1024)
        try:
            for at, digest in acknowledged.items():
                assert os.preadv(fd, [buffer], at) == len(buffer)
                assert hashlib.sha256(buffer).hexdigest() == digest, at
        finally:
            os.close(fd)
        assert on_leg("/dev/lab/b1", acknowledged) == []


def pool() -> tuple[float, str]:
    """The share of site B's points pool in use, and its mode."""
    status = parse_thin_pool_status(sh("dmsetup", "status", POOL).stdout)
    return status.data_used / status.data_total, status.mode


def test_site_bs_points_filling_their_pool_are_critical_first_then_room_brings_the_leg_back(
    holes: None, record_property: Callable[[str, object], None]
) -> None:
    view = str(SITE_B_PROFILE)
    # A point at site B: what is overwritten from now on takes new blocks of its pool.
    on_b("remirror", "cdp", "point", view, "hole1", "--leg", "--now", timeout=SLOW)
    # Filled in whole MiB (the pool's fill is the point here, not the size of the writes), the
    # pool read every 4 MiB until it nears the threshold, then every MiB.
    acknowledged: dict[int, str] = {}
    at, used = 0, 0.0
    while used < 0.90:
        step = 4 * MiB if used < 0.80 else MiB
        acknowledged |= write_acknowledged(HOLE1, at, step, block=MiB)
        at += step
        used = pool()[0]
    used, mode = pool()
    record_property("pool_used_when_critical", round(used, 3))
    assert mode == "rw"
    assert "faulty" not in (replica_member(HOLE1) / "state").read_text()
    # Reported before any write failed: CRITICAL at both sites, with what to do.
    assert mirror_status("hole1")["state"] == "MIRRORED"
    code, out = check()
    assert code == 2, out
    assert "fill" in out, out
    assert "remirror cdp prune" in out, out
    done = on_b("remirror", "check", "-t", str(SLOW), view, ok_codes=(0, 1, 2), timeout=SLOW)
    assert done.returncode == 2, done.stdout
    assert "fill" in done.stdout, done.stdout
    # Full: the pool fails the replica's writes rather than drop the point; md fails the leg.
    while "faulty" not in (replica_member(HOLE1) / "state").read_text():
        assert at < 256 * MiB, pool()
        acknowledged |= write_acknowledged(HOLE1, at, MiB, block=MiB)
        at += MiB
    acknowledged |= write_acknowledged(
        HOLE1, at, 4 * MiB, block=MiB
    )  # the primary goes on, the bitmap keeps them
    assert pool()[1] == "out_of_data_space"
    code, out = reconcile()
    assert code == 2, out
    assert "fill their pool" in out, out
    assert "ReAddLeg" not in out, out
    # Room at site B: a point of what it holds now, then the older one pruned there.
    on_b("remirror", "cdp", "point", view, "hole1", "--leg", "--now", timeout=SLOW)
    pruned = on_b("remirror", "cdp", "prune", view, "hole1", "--leg", "--keep", "0s", "--yes", timeout=SLOW)
    assert re.search(r"point #\d+ .* pruned", pruned.stdout), pruned.stdout
    assert pool()[1] == "rw"
    until_mirrored()
    assert on_leg("/dev/mapper/remirror-hole1.site-b-cdp", acknowledged, block=MiB) == []
    verify("hole1")
