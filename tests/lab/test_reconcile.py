"""The reconciler on the lab: cut links, flaps, a DR host restart, a failed primary leg, split brain.

The tests share the lab's one mirror (conftest.py) and run in file order; each
leaves it MIRRORED for the next, except the split brain, which comes last.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from remirror.agent.digest import data_offset
from remirror.facts.parsers import parse_bitmap_examine, parse_examine_role
from remirror.lab import net
from remirror.lab.probes import sectors_written
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import (
    LAB,
    MD,
    SLOW,
    MiB,
    Writer,
    fio_verified,
    legs_match,
    md_digest,
    md_sysfs,
    reconcile_until_mirrored,
    remirror,
    remote_member_state,
    start_fio_verify,
    variant,
    wait_faulty,
    wait_in_sync,
    wait_writing,
    write_random,
)


def test_after_a_link_cut_one_pass_re_adds_the_leg_with_a_partial_resync(
    mirror: dict[str, str], record_property: Callable[[str, object], None]
) -> None:
    wait_in_sync()
    before = write_random(0, 4 * MiB)
    net.set_link(False)
    try:
        # Under `degrade` md fails the remote leg within seconds and the write goes on.
        during = write_random(64 * MiB, 4 * MiB)
        wait_faulty()
        code, out, _ = remirror("reconcile", LAB, ok_codes=(2,))
        assert out.startswith("lab0: MIRROR_DEFUNCT: site site-b could not be reached: waiting for it")
        # What the replica missed, as the local leg's bitmap counts it: a few chunks, not the disk.
        bitmap = parse_bitmap_examine(sh("mdadm", "--examine-bitmap", "/dev/lab/a0").stdout)
        record_property("resync_bytes", bitmap.dirty * bitmap.chunk_size)  # into junit-lab.xml
        record_property("written_during_cut_bytes", 4 * MiB)
        assert 0 < bitmap.dirty <= bitmap.bits // 10
    finally:
        net.set_link(True)
        link_up = time.monotonic()
        net.wait_until_reachable()
    deadline = time.monotonic() + 300
    while True:  # iscsid logs in again by itself; until then the pass waits
        code, out, _ = remirror("reconcile", LAB, ok_codes=(0, 1, 2))
        if code != 2:
            break
        assert time.monotonic() < deadline, out
        time.sleep(5)
    assert out.strip().splitlines()[-1].startswith("lab0: MIRROR_DEFUNCT -> "), out  # after the `done:` lines
    record_property("recovery_after_link_up_seconds", round(time.monotonic() - link_up, 1))
    # Only what the bitmap marked is resynchronised, not the disk.
    wait_in_sync()
    assert remirror("reconcile", LAB)[1].strip() == "lab0: MIRRORED: every leg is in sync"  # nothing to do
    assert md_digest(0, 4 * MiB) == before
    assert md_digest(64 * MiB, 4 * MiB) == during
    assert legs_match()
    assert md_sysfs("degraded") == "0"


def start_watch(log: Path, profile: str = LAB) -> subprocess.Popen[bytes]:
    """`remirror watch` in the background, as its systemd unit would run it, logging to `log`.

    With the lab's timings: a pass every 5 s at most, also while a site is unreachable (the
    default backs off to 10 minutes), every 2 s while a resync runs, so the mirror is back a
    few seconds after the link rather than tens of seconds.
    """
    with log.open("w") as out:
        return subprocess.Popen(
            ["remirror", "watch", profile, "--interval", "5", "--busy", "2", "--max-backoff", "5"],
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop_watch(watcher: subprocess.Popen[bytes], log: Path) -> list[dict[str, Any]]:
    """Stop it as systemd would (SIGTERM); its decisions, one JSON object per line."""
    watcher.terminate()
    watcher.wait(timeout=300)
    assert watcher.returncode == 0, log.read_text()
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


SYNC = {
    "mode: async": "mode: sync",
    "      write_behind: 1024        # distinct from md's default 256, so tests can tell\n": "",
}


def test_watch_brings_a_sync_mirror_back_while_fio_verifies(
    mirror: dict[str, str], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """Synchronous: each write waits for the replica until md fails the leg, and fio's writes go
    on and read back as written. The lab profile's own mode (async, write-behind) is the flap
    test's below: its outages are this cut four times over, under the same watch, with a
    writer whose every block is checked, so a run of this test in async mode (43 s) showed
    nothing that one does not."""
    profile = variant(tmp_path, "sync.yaml", **SYNC)
    code, out, err = remirror("apply", "--yes", profile)
    assert code == 0, out + err
    assert md_sysfs("bitmap/backlog") == "0"  # no write-behind: each write waits for the replica
    wait_in_sync()
    log = tmp_path / "watch.log"
    watcher = start_watch(log, profile)
    try:
        fio = start_fio_verify()
        wait_writing()
        net.set_link(False)
        wait_faulty()
        net.set_link(True)
        link_up = time.monotonic()
        net.wait_until_reachable()
        fio_verified(fio)  # writes went on, and read back as written
        # The watch (already running) notices and re-adds the leg by itself.
        while not (remote_member_state().startswith("in_sync") and md_sysfs("sync_action") == "idle"):
            assert time.monotonic() - link_up < 600, log.read_text()
            time.sleep(2)
        record_property("watch_recovery_after_link_up_seconds", round(time.monotonic() - link_up, 1))
    finally:
        net.set_link(True)
        decisions = stop_watch(watcher, log)
        assert remirror("apply", "--yes", LAB)[0] == 0  # write-behind back for the next tests
    assert any("site-a ReAddLeg" in d.get("repaired", []) for d in decisions), decisions
    assert legs_match()


def progress(line: str) -> None:
    """A line on the terminal as it happens (past pytest's capture): long tests show where they are."""
    print(f"\n  {line}", file=sys.__stderr__, flush=True)


def test_ten_link_flaps_each_end_mirrored_after_a_bitmap_resync(
    mirror: dict[str, str], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    seed = int(os.environ.get("REMIRROR_FLAP_SEED", time.time()))
    record_property("flap_seed", seed)  # REMIRROR_FLAP_SEED=... replays the same outages
    outages = random.Random(seed)
    # Random lengths on both sides of the time md takes to fail the leg (about
    # 7-12 s under `degrade` with the lab profile's NOP timeouts: 2-7 s to notice
    # the cut, 5 s of replacement timeout): six blips it rides out, four outages it
    # does not (each costs a re-add and a resync).
    lengths = [round(outages.uniform(1, 4), 1) for _ in range(6)]
    lengths += [round(outages.uniform(14, 20), 1) for _ in range(4)]
    outages.shuffle(lengths)
    wait_in_sync()
    disk_bytes = int(sh("blockdev", "--getsize64", "/dev/lab/b0").stdout)
    log = tmp_path / "watch.log"
    watcher = start_watch(log)
    flaps: list[dict[str, Any]] = []
    try:
        # 16 MiB of a 256 MiB disk: a bitmap resync copies at most that, a rebuild all of it.
        with Writer(176 * MiB, 16 * MiB, seed=seed) as writer:
            for down in lengths:
                written_before = sectors_written("/dev/lab/b0")
                writer_before = writer.bytes_written
                net.set_link(False)
                time.sleep(down)
                failed = "faulty" in remote_member_state()
                written_during = writer.bytes_written - writer_before
                # What the replica missed, as the primary's bitmap counts it (read from the disk).
                bitmap = parse_bitmap_examine(sh("mdadm", "--examine-bitmap", "/dev/lab/a0").stdout)
                net.set_link(True)
                link_up = time.monotonic()
                while not (
                    remote_member_state().startswith("in_sync")
                    and md_sysfs("sync_action") == "idle"
                    and md_sysfs("degraded") == "0"
                ):
                    assert time.monotonic() - link_up < 600, (flaps, log.read_text()[-3000:])
                    time.sleep(1)
                flap = {
                    "down_s": down,
                    "leg_failed": failed,
                    "written_during_outage_bytes": written_during,
                    "bitmap_dirty_bytes": bitmap.dirty_bytes,
                    "replica_written_bytes": (sectors_written("/dev/lab/b0") - written_before) * 512,
                    "back_to_mirrored_s": round(time.monotonic() - link_up, 1),
                }
                flaps.append(flap)
                progress(f"flap {len(flaps)}/{len(lengths)}: {json.dumps(flap)}")
        writer.check()
    finally:
        net.set_link(True)
        decisions = stop_watch(watcher, log)
    record_property("flaps", json.dumps(flaps))  # into junit-lab.xml
    assert sum(f["leg_failed"] for f in flaps) >= 3, flaps  # the outages were long enough to matter
    for flap in flaps:
        # A full rebuild would write the whole disk to the replica; a bitmap resync, what it missed.
        assert flap["replica_written_bytes"] < disk_bytes // 4, flap
        assert flap["bitmap_dirty_bytes"] <= disk_bytes // 10, flap
    readds = sum("site-a ReAddLeg" in d.get("repaired", []) for d in decisions)
    assert readds >= sum(f["leg_failed"] for f in flaps), decisions
    assert not any("--add" in str(d) for d in decisions)
    assert legs_match()


def test_under_wait_an_outage_of_20s_or_more_fails_no_leg_and_io_resumes_by_itself(
    mirror: dict[str, str], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    waiting = variant(tmp_path, "wait.yaml", **{"on_link_loss: degrade": "on_link_loss: wait"})
    code, out, err = remirror("apply", "--yes", waiting)
    assert code == 0, out + err
    # The new replacement timeout is written into the running session: no logout, no failed leg.
    assert "SetSessionTimeout" in out, out
    assert "LoginSession" not in out, out
    assert [p.read_text().strip() for p in Path("/sys/class/iscsi_session").glob("*/recovery_tmo")] == [
        "86400"
    ]
    wait_in_sync()
    try:
        with Writer(176 * MiB, 64 * MiB) as writer:
            writer.wait_writes(10)
            net.set_link(False)
            cut = time.monotonic()
            states = set()
            while time.monotonic() - cut < 10:  # until the session has seen the cut (no-op timeouts)
                states.add(remote_member_state())
                time.sleep(1)
            # A pass during the outage. While a write waits for the replica, md can hold
            # its lock and observing the array waits with it: the link comes back after
            # a minute at most, and the pass must then end by itself.
            reconciling = subprocess.Popen(
                ["remirror", "reconcile", waiting], stdout=subprocess.PIPE, text=True
            )
            while time.monotonic() - cut < 60 and (time.monotonic() - cut < 20 or reconciling.poll() is None):
                states.add(remote_member_state())
                time.sleep(1)
            during_outage = reconciling.poll() is not None
            stalled = writer.last_done
            net.set_link(True)
            link_up = time.monotonic()
            out, _ = reconciling.communicate(timeout=SLOW)
            record_property("pass_ended_during_outage", during_outage)
            record_property("outage_seconds", round(link_up - cut, 1))
            if during_outage:
                assert reconciling.returncode == 2, out
                assert out.startswith("lab0: DEGRADED_WAITING"), out
            else:
                assert reconciling.returncode in (0, 1, 2), out  # it waited for md, then reported
            while writer.last_done <= link_up:  # the next write completes by itself
                assert time.monotonic() - link_up < 180, "I/O did not resume after the link came back"
                time.sleep(1)
            record_property("io_resumed_after_link_up_seconds", round(writer.last_done - link_up, 1))
            record_property("io_stalled_seconds", round(writer.last_done - stalled, 1))
            writer.wait_writes(10)  # and go on
        writer.check()
        assert not any("faulty" in state for state in states), states
        assert remote_member_state().startswith("in_sync")
        assert md_sysfs("degraded") == "0"
    finally:
        net.set_link(True)
        code, out, err = remirror("apply", "--yes", LAB)  # back to `degrade`, live again
        assert code == 0, out + err
    assert remirror("reconcile", LAB)[1].startswith("lab0: MIRRORED")


def test_nothing_changes_a_site_while_another_command_holds_its_lock(
    mirror: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Safety, flow 6: a reconcile pass (or an apply) that observed site B while, say, a forced
    # promotion fenced its target would re-create it from what it saw. The promotion holds
    # site B's lock from its first look to its end: the pass waits, then gives up, touching
    # no site.
    from remirror.agent import lock
    from remirror.agent.client import AgentClient
    from remirror.profile import load_profile

    wait_in_sync()
    written = write_random(100 * MiB, MiB)
    member = next(Path(f"/sys/block/{Path(MD).resolve().name}/md").glob("dev-sd*/state"))
    member.write_text("-writemostly")  # what a pass would repair, to see that it does not
    holder = AgentClient("site-b", load_profile(LAB).sites["site-b"])  # an agent over SSH, as promote's
    monkeypatch.setenv("REMIRROR_LOCK_WAIT", "3")
    try:
        holder.lock(lock.SITE_LOCK, "remirror promote (the lab's test)", 0)
        for verb in (["reconcile", LAB], ["apply", "--yes", LAB]):
            _, out, err = remirror(*verb, ok_codes=(1,))
            # Who holds it, in site B's words (the agent and the controller's address), then the holder's.
            assert "site site-b: busy: remirror's agent (pid " in err, out + err
            assert (
                "for a controller at 192.0.2.1 over SSH, saying: remirror promote (the lab's test) since"
                in err
            )
            assert "holds its site lock" in err
        assert "write_mostly" not in member.read_text()  # nothing was done on site A either
        assert lock.held() == []  # and its lock let go with the command
    finally:
        holder.close()  # its agent ends, and site B's lock with it
    lines = reconcile_until_mirrored()
    assert "write_mostly" in member.read_text(), lines
    assert md_digest(100 * MiB, MiB) == written


def test_with_the_primary_leg_down_nothing_is_touched(mirror: dict[str, str]) -> None:
    sh("mdadm", MD, "--fail", "/dev/lab/a0")
    try:
        _, out, _ = remirror("reconcile", LAB, ok_codes=(2,))
        assert out.startswith("lab0: LOCAL_DEFUNCT: the primary leg is down: remirror repairs nothing")
        # The replica keeps serving: the array still reads and writes.
        assert md_digest(0, 4 * MiB)
        local = Path("/dev/lab/a0").resolve().name
        assert "faulty" in Path(f"/sys/block/{Path(MD).resolve().name}/md/dev-{local}/state").read_text()
    finally:
        sh("mdadm", MD, "--remove", "/dev/lab/a0")
        sh("mdadm", MD, "--re-add", "/dev/lab/a0")
        wait_in_sync()


def test_a_leg_that_ran_on_its_own_is_not_re_added(mirror: dict[str, str], tmp_path: Path) -> None:
    # Last in the module: it leaves the mirror split for the fixture to destroy.
    wait_in_sync()
    net.set_link(False)
    try:
        primary_wrote = write_random(8 * MiB, MiB)  # the primary goes on without the replica
        wait_faulty()
        # Meanwhile the DR site runs on its copy (as a promotion would): LIO lets go of the
        # disk, which is assembled alone and written. It gets its own, empty md map file, as
        # a DR host has: mdadm refuses to assemble an array whose UUID its map lists as
        # active ("Found some drive for an array that is already active"), and the VM's map
        # lists the primary's array. Without a map file at all mdadm rebuilds one from the
        # running arrays, which lists the primary's array again (this failed in CI), so the
        # private /run/mdadm gets an empty one.
        on_b(str(Path(sys.executable).parent / "targetctl"), "clear")
        dr = (
            "mount -t tmpfs none /run/mdadm && : > /run/mdadm/map"
            " && mdadm --assemble --run /dev/md100 /dev/lab/b0"
            " && dd if=/dev/urandom of=/dev/md100 bs=1M count=1 seek=24 oflag=direct status=none"
            " && mdadm --stop /dev/md100"
        )
        on_b("unshare", "--mount", "--propagation", "private", "sh", "-c", dr)
        diverged = on_b("mdadm", "--examine", "/dev/lab/b0").stdout
        # Its superblock records the array without the primary's leg: a '.' in that leg's slot.
        primary_slot, _ = parse_examine_role(sh("mdadm", "--examine", "/dev/lab/a0").stdout)
        _, recorded = parse_examine_role(diverged)
        assert primary_slot is not None, diverged
        assert recorded[primary_slot] == ".", diverged
        assert recorded.count("A") == 1, diverged  # and its own slot active
        # The leg's first 32 MiB of data, the DR site's write among them: a resync starts there.
        replica_data = md_digest(data_offset("/dev/lab/b0"), 32 * MiB, "/dev/lab/b0")
    finally:
        net.set_link(True)
        net.wait_until_reachable()
    # Passes re-create the DR site's LIO and log in; then they read the leg's superblock.
    deadline = time.monotonic() + 300
    lines: list[str] = []
    while not lines or not lines[-1].startswith("lab0: SPLIT_BRAIN: "):
        assert time.monotonic() < deadline, lines
        code, out, _ = remirror("reconcile", LAB, ok_codes=(1, 2))
        lines.append(out.strip().splitlines()[-1])
        time.sleep(2)
    assert code == 2
    assert f"Array State {recorded}" in lines[-1], lines  # what the leg's superblock says, quoted
    assert not any("ReAddLeg" in line for line in lines), lines
    # Neither side's writes were touched: the leg stays out, its data as the DR site left it.
    assert md_sysfs("degraded") == "1"
    assert md_digest(8 * MiB, MiB) == primary_wrote
    assert md_digest(data_offset("/dev/lab/b0"), 32 * MiB, "/dev/lab/b0") == replica_data
