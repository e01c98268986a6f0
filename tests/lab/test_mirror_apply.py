"""`remirror apply` and `destroy` on the lab: site A primary, site B replica over SSH (profiles/lab.yaml).

The tests share the lab's one mirror (conftest.py) and run in file order: each
leaves it running and MIRRORED for the next.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from remirror.agent.generations import read_record
from remirror.controller import ApplyError, Controller, read_secrets
from remirror.facts.parsers import parse_bitmap_examine
from remirror.lab import net
from remirror.lab.probes import sectors_written
from remirror.lab.spec import INITIATOR_NAMES
from remirror.profile import load_profile
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import (
    IQN,
    LAB,
    MD,
    PORTAL,
    SLOW,
    MiB,
    Writer,
    examine_uuid,
    legs_match,
    lio_objects,
    md_digest,
    md_sysfs,
    remirror,
    slowed,
    variant,
    wait_in_sync,
    wait_sessions_back,
    write_random,
)


def test_apply_builds_the_mirror_the_profile_asks_for(mirror: dict[str, str]) -> None:
    mdstat = Path("/proc/mdstat").read_text()
    # The remote (iSCSI) leg is write-mostly; the bitmap has the profile's 1 MiB chunk.
    assert re.search(r"sd[a-z]+\[\d+\]\(W\)", mdstat), mdstat
    assert "1024KB chunk" in mdstat
    assert md_sysfs("bitmap/backlog") == "1024"
    assert "CreateArray" in mirror["apply_output"]


def test_plan_right_after_apply_is_empty_and_a_second_apply_changes_nothing(mirror: dict[str, str]) -> None:
    code, out, _ = remirror("plan", "--detailed-exitcode", LAB)
    assert code == 0, out
    assert "No changes" in out
    code, out, _ = remirror("apply", "--yes", "-o", "json", LAB)
    assert code == 0
    assert json.loads(out)["changed"] is False


def session_send_buffer() -> int:
    """The send buffer (bytes) of site A's TCP connection to the replica's target (`ss -m`)."""
    shown = sh("ss", "-tnm", "state", "established", "( dport = :3260 )").stdout
    found = re.findall(r"\btb(\d+)\b", shown)
    assert len(found) == 1, shown
    return int(found[0])


def test_the_session_s_tcp_buffers_grow_with_a_long_link(mirror: dict[str, str]) -> None:
    # open-iscsi's default window (512 KiB asked, capped by net.core.wmem_max: 416 KB, never
    # grown) held sequential writes over the bench's 14 ms WAN to 0.17 of the disk: remirror's
    # node record leaves the buffers to the kernel's autotuning (profile/timeouts.py).
    fixed = 2 * min(524288, int(Path("/proc/sys/net/core/wmem_max").read_text()))
    remirror("lab", "wan", "--delay", "20ms")
    try:
        sh("fio", "--name=stream", f"--filename={MD}", "--rw=write", "--bs=1M", "--iodepth=4",
           "--ioengine=libaio", "--direct=1", "--offset=64M", "--size=32M")  # fmt: skip
        grown = session_send_buffer()
    finally:
        remirror("lab", "wan", "--clear")
    assert grown > fixed, f"the session's send buffer is {grown} bytes: set by hand, not autotuned"


def test_a_pause_between_writes_costs_the_replica_no_superblock_write(mirror: dict[str, str]) -> None:
    # md marks an idle array clean after its safe mode's delay, and the next write waits for the
    # superblock on every leg, the replica's over the link; remirror lengthens md's 0.2 s
    # (plan/md.SAFE_MODE_DELAY), so writes a second apart send site B nothing but themselves.
    assert md_sysfs("safe_mode_delay") == "10.000"
    remote = next(name for name in slots() if name.startswith("sd"))
    writes = Path(f"/sys/block/{remote}/stat")

    def write_at(mib: int) -> None:
        sh("dd", "if=/dev/urandom", f"of={MD}", "bs=4k", "count=1", f"seek={mib * 256}", "oflag=direct",
           "conv=notrunc", "status=none")  # fmt: skip

    # From a clean bitmap: md writes a chunk's cleared bit 10-15 s after the chunk's last write,
    # and a chunk the test before dirtied, cleared here, was one more write to site B (CI's run).
    local = next(name for name in slots() if not name.startswith("sd"))
    deadline = time.monotonic() + 120
    while parse_bitmap_examine(shown := sh("mdadm", "--examine-bitmap", f"/dev/{local}").stdout).dirty:
        assert time.monotonic() < deadline, shown
        time.sleep(1)
    write_at(80)  # its bitmap chunk dirty from here on (bits clear seconds after the last write)
    # md's bitmap daemon writes the bitmap's events_cleared once after the first write, at its
    # next 5 s pass: past it, still inside the 10 s delay.
    time.sleep(6)
    before = int(writes.read_text().split()[4])
    for _ in range(4):
        write_at(80)
        time.sleep(1)  # five times md's default delay
    assert int(writes.read_text().split()[4]) - before == 4


def test_data_written_through_the_mirror_is_on_both_legs(mirror: dict[str, str]) -> None:
    written = write_random(4 * MiB, 8 * MiB)
    assert md_digest(4 * MiB, 8 * MiB) == written
    # Write-behind: the remote leg may trail a moment; then the legs' data
    # regions match (their superblocks differ by design).
    deadline = time.monotonic() + 60
    while not legs_match():
        assert time.monotonic() < deadline, "the legs still differ a minute after the writes"
        time.sleep(1)
    # And md's own check agrees.
    kernel = Path(MD).resolve().name
    Path(f"/sys/block/{kernel}/md/sync_action").write_text("check")
    deadline = time.monotonic() + SLOW
    while md_sysfs("sync_action") != "idle":
        assert time.monotonic() < deadline, "check did not finish"
        time.sleep(1)
    assert md_sysfs("mismatch_cnt") == "0"


def qd1_p50_ms(device: str, ios: int, offset: int = 64 * MiB) -> float:
    """fio's median latency of 4 KiB random writes one at a time (O_DIRECT) into 16 MiB of `device`.

    16 MiB is 16 of the lab's 1 MiB bitmap chunks: after its first write to each (which
    writes the bitmap to every leg, the remote one too) the median is the steady state."""
    done = sh(
        "fio", "--name=qd1", f"--filename={device}", "--rw=randwrite", "--bs=4k", "--iodepth=1",
        "--ioengine=psync", "--direct=1", f"--offset={offset}", "--size=16M", f"--number_ios={ios}",
        "--output-format=json", timeout=600,
    )  # fmt: skip
    return float(json.loads(done.stdout)["jobs"][0]["write"]["clat_ns"]["percentile"]["50.000000"]) / 1e6


def sync_variant(tmp_path: Path) -> str:
    """The lab profile with `mode: sync`."""
    return variant(
        tmp_path,
        "sync.yaml",
        **{
            "mode: async": "mode: sync",
            "      write_behind: 1024        # distinct from md's default 256, so tests can tell\n": "",
        },
    )


def slots() -> dict[str, tuple[int, str]]:
    """The array's members: kernel name -> (slot, md's state)."""
    base = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    return {
        p.name.removeprefix("dev-"): (int((p / "slot").read_text()), (p / "state").read_text().strip())
        for p in base.glob("dev-*")
        if (p / "slot").read_text().strip().isdigit()
    }


def test_async_writes_go_behind_and_sync_writes_do_not(
    mirror: dict[str, str], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    # md (raid1.c of Debian 12's 6.1) sends a write behind only when the first leg it writes to
    # is write-mostly (bench/write_behind_order.sh): apply puts site B's leg in slot 0.
    first = next(name for name, (slot, _) in slots().items() if slot == 0)
    assert first.startswith("sd"), slots()  # the iSCSI disk: site B's leg
    assert "write_mostly" in slots()[first][1]
    base = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    (base / "bitmap/max_backlog_used").write_text("0")  # a high-water mark: counted from here
    # Disks that take 8 ms a write, like the bench's spinning disks, and a 40 ms round trip.
    with slowed(8, "/dev/lab/a0", "/dev/lab/b0", "/dev/lab/a2"):
        remirror("lab", "wan", "--delay", "20ms")
        try:
            single = qd1_p50_ms("/dev/lab/a2", 300)  # a disk like the local leg, alone
            behind = qd1_p50_ms(MD, 300)
            used = int(md_sysfs("bitmap/max_backlog_used"))
            remirror("apply", "--yes", sync_variant(tmp_path))
            assert md_sysfs("bitmap/backlog") == "0"
            waiting = qd1_p50_ms(MD, 60)
        finally:
            remirror("lab", "wan", "--clear")
            zeros = ("if=/dev/zero", "of=/dev/lab/a2", "bs=1M", "seek=64", "count=16", "oflag=direct")
            sh("dd", *zeros, "status=none")
            remirror("apply", "--yes", LAB)
    # The medians are recorded, not judged: how long a write waits is the bench's to show
    # (bench/suite.py, async-W; docs/performance.md), on a machine that is not shared.
    record_property("qd1_p50_ms", {"single_disk": single, "async": behind, "sync": waiting})
    wait_in_sync()
    assert used > 0, "no write went behind: the async mirror's writes waited for site B"
    assert md_sysfs("bitmap/backlog") == "1024"


def put_local_leg_first() -> None:
    """Give the array the slot order remirror made before (the local leg first), as md allows:
    the replica leg out, the array shrunk to the local leg alone (slot 0) and grown back, the
    replica leg back in with `--re-add` (slot 1, a bitmap resync)."""
    base = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    remote = next(name for name in slots() if name.startswith("sd"))
    sh("mdadm", MD, "--fail", f"/dev/{remote}")
    deadline = time.monotonic() + 30
    while sh("mdadm", MD, "--remove", f"/dev/{remote}", ok_codes=(0, 1)).returncode:
        assert time.monotonic() < deadline, "md did not let go of the replica leg"
        time.sleep(0.5)
    (base / "raid_disks").write_text("1")
    (base / "raid_disks").write_text("2")
    sh("mdadm", MD, "--re-add", f"/dev/{remote}")
    wait_in_sync()
    (base / f"dev-{remote}/state").write_text("writemostly")
    assert slots()[remote][0] == 1, slots()


def test_a_live_change_of_mode_moves_the_legs_with_the_bitmap_and_keeps_the_array(
    mirror: dict[str, str], tmp_path: Path
) -> None:
    kernel, uuid_ = Path(MD).resolve().name, md_sysfs("uuid")
    put_local_leg_first()  # an array an older remirror made, or one assembled on a promoted site
    written = write_random(40 * MiB, 4 * MiB)
    # To sync: nothing goes behind in sync mode, so nothing is moved.
    code, out, err = remirror("apply", "--yes", sync_variant(tmp_path))
    assert "ReorderLegs" not in out, out
    assert md_sysfs("bitmap/backlog") == "0"
    # To async, with an application writing all along: the local leg goes last through the
    # bitmap (no full resync: a0 takes a few MiB, not its 256), the array stays the same one.
    local_written = sectors_written("/dev/lab/a0")
    with Writer(160 * MiB, 16 * MiB, block=4096) as writer:
        writer.wait_writes(20)
        code, out, err = remirror("apply", "--yes", LAB)
        writer.wait_writes(20)
    writer.check()
    assert code == 0, out + err
    assert "ReorderLegs" in out, out
    moved = (sectors_written("/dev/lab/a0") - local_written) * 512
    assert moved < 32 * MiB, f"{moved} bytes written to the local leg: a full resync?"
    order = sorted(slots().items(), key=lambda item: item[1][0])
    assert [name.startswith("sd") for name, _ in order] == [True, False], order
    assert "write_mostly" in order[0][1][1]
    assert (Path(MD).resolve().name, md_sysfs("uuid"), md_sysfs("suspend_hi")) == (kernel, uuid_, "0")
    assert md_sysfs("bitmap/backlog") == "1024"
    assert remirror("plan", "--detailed-exitcode", LAB)[0] == 0
    # Back to sync and to async again: only the backlog changes.
    assert "ReorderLegs" not in remirror("apply", "--yes", sync_variant(tmp_path))[1]
    assert md_sysfs("bitmap/backlog") == "0"
    assert "ReorderLegs" not in remirror("apply", "--yes", LAB)[1]
    assert (Path(MD).resolve().name, md_sysfs("uuid")) == (kernel, uuid_)
    assert md_digest(40 * MiB, 4 * MiB) == written
    wait_in_sync()
    assert legs_match()


def test_a_new_write_behind_is_applied_to_the_live_array(mirror: dict[str, str], tmp_path: Path) -> None:
    kernel_before = Path(MD).resolve().name
    uuid_before = md_sysfs("uuid")
    changed = variant(tmp_path, "wb.yaml", **{"write_behind: 1024": "write_behind: 64"})
    code, out, err = remirror("apply", "--yes", changed)
    assert code == 0, out + err
    assert "SetWriteBehind" in out
    assert "CreateArray" not in out
    assert md_sysfs("bitmap/backlog") == "64"
    assert (Path(MD).resolve().name, md_sysfs("uuid")) == (kernel_before, uuid_before)
    remirror("apply", "--yes", LAB)
    assert md_sysfs("bitmap/backlog") == "1024"


EXPORT_IQN = "iqn.2026-11.org.remirror:lab.lab0.export"
APP = "iqn.2026-11.org.remirror.lab:site-b.app"


def test_the_export_serves_the_mirror_to_an_initiator_on_site_b(
    mirror: dict[str, str], tmp_path: Path
) -> None:
    secret = tmp_path / "app.chap"
    secret.write_text(secrets.token_urlsafe(18))  # no newline: QEMU reads the file as it is
    secret.chmod(0o600)
    exported = variant(
        tmp_path,
        "export.yaml",
        append=(
            f"    export:\n      iqn: {EXPORT_IQN}\n      portal: 192.0.2.1:3260\n"
            f"      initiators: [{APP}]\n      chap: {{username: app, password_file: {secret}}}\n"
        ),
    )
    code, out, err = remirror("apply", "--yes", exported)
    assert code == 0, out + err
    assert f"CreateNodeAcl {APP} on {EXPORT_IQN}" in out
    assert "CreateArray" not in out
    written = write_random(16 * MiB, 4 * MiB)
    # Site B reads the mirror as an application host would: a userspace
    # initiator (QEMU's libiscsi; iscsid works only in the VM's root netns).
    # (`qemu-img dd` cannot skip on an iSCSI source and says so with exit 0:
    # copy the whole LUN, then look at the region.)
    source = (
        f"driver=iscsi,transport=tcp,portal=192.0.2.1:3260,target={EXPORT_IQN},lun=0,"
        f"user=app,password-secret=chap,initiator-name={APP}"
    )
    copy = tmp_path / "read-on-site-b.img"
    on_b(
        "qemu-img", "convert", "--object", f"secret,id=chap,file={secret}", "--image-opts", source,
        "-O", "raw", str(copy),
    )  # fmt: skip
    region = f"dd if={copy} bs=1M skip=16 count=4 status=none | sha256sum"
    assert on_b("sh", "-c", region).stdout.split()[0] == written
    # Dropping the export from the profile takes it down; the mirror stays.
    code, out, err = remirror("apply", "--yes", LAB)
    assert code == 0, out + err
    assert f"DeleteTarget {EXPORT_IQN}" in out
    assert EXPORT_IQN not in lio_objects()
    assert "lab0-export" not in lio_objects()
    assert md_digest(16 * MiB, 4 * MiB) == written


def test_a_wrong_chap_secret_fails_the_login_naming_chap_and_the_target(mirror: dict[str, str]) -> None:
    wait_in_sync()
    sh("mdadm", "--stop", MD)
    sh("iscsiadm", "-m", "node", "-T", IQN, "-p", PORTAL, "--logout")
    profile = load_profile(LAB)
    controller = Controller(profile)
    try:
        plan = controller.plan(read_secrets(profile))
        assert [a.verb for a in plan.actions] == ["LoginSession", "AssembleArray"]
        # Between plan and apply, someone gives the target's ACL another secret.
        script = (
            "import sys\nfrom rtslib_fb import RTSRoot\n"
            "for tpg in RTSRoot().tpgs:\n"
            "    for acl in tpg.node_acls:\n"
            "        if tpg.parent_target.wwn == sys.argv[1] and acl.node_wwn == sys.argv[2]:\n"
            "            acl.chap_password = 'not-the-secret-at-all'\n"
        )
        on_b(sys.executable, "-c", script, IQN, INITIATOR_NAMES["a"])
        with pytest.raises(ApplyError) as caught:
            controller.apply(plan, lambda _line: None)
    finally:
        controller.close()
    assert f"CHAP authentication to target {IQN} at {PORTAL} was refused" in str(caught.value)
    assert not Path(MD).exists()  # nothing after the failed login ran
    # The next apply sees the changed ACL, puts the profile's secret back, and recovers.
    code, out, err = remirror("apply", "--yes", LAB)
    assert code == 0, out + err
    assert "UpdateNodeAcl" in out
    assert "AssembleArray" in out
    wait_in_sync()


def test_destroy_refuses_a_mirror_in_use(mirror: dict[str, str], tmp_path: Path) -> None:
    with Path(MD).open("rb") as device:
        holder = subprocess.Popen(["sleep", "600"], stdin=device)
    try:
        _, _, err = remirror("destroy", "--yes", LAB, "lab0", ok_codes=(1,))
    finally:
        holder.kill()
        holder.wait()
    assert f"/dev/md/lab0 is in use (open by pid {holder.pid} (sleep))" in err
    mountpoint = tmp_path / "mnt"
    mountpoint.mkdir()
    sh("mkfs.ext4", "-q", MD)
    sh("mount", MD, str(mountpoint))
    try:
        _, _, err = remirror("destroy", "--yes", LAB, "lab0", ok_codes=(1,))
    finally:
        sh("umount", str(mountpoint))
    assert f"/dev/md/lab0 is in use (mounted on {mountpoint})" in err
    # Nothing was taken down.
    assert md_sysfs("array_state") in ("clean", "active", "active-idle")
    assert IQN in lio_objects()


def test_destroy_keeps_the_data_and_apply_adopts_it(mirror: dict[str, str]) -> None:
    written = write_random(48 * MiB, 4 * MiB)
    wait_in_sync()
    size = int(sh("blockdev", "--getsize64", MD).stdout)
    code, out, err = remirror("destroy", "--yes", LAB, "lab0")
    assert code == 0, out + err
    for verb in ("StopArray", "LogoutSession", "DeleteIscsiNode", "DeleteTarget", "DeleteBackstore"):
        assert verb in out
    assert not Path(MD).exists()
    assert IQN not in lio_objects()
    assert "lab0-site-b" not in lio_objects()
    assert sh("iscsiadm", "-m", "session", ok_codes=(0, 21)).returncode == 21
    # Both disks still hold the array and the same data.
    uuid = examine_uuid("/dev/lab/a0", site_b=False)
    assert uuid
    assert examine_uuid("/dev/lab/b0", site_b=True) == uuid
    assert legs_match(size)
    assert (
        remirror("destroy", "--yes", LAB, "lab0")[1]
        .strip()
        .endswith("No changes: the sites match the profile.")
    )
    # apply adopts the disks: the same array, assembled, with the data.
    code, out, err = remirror("apply", "--yes", LAB)
    assert code == 0, out + err
    assert "AssembleArray" in out
    assert "CreateArray" not in out
    assert md_sysfs("uuid").replace("-", "") == uuid.replace(":", "")
    assert md_digest(48 * MiB, 4 * MiB) == written
    assert remirror("plan", "--detailed-exitcode", LAB)[0] == 0


def test_a_blank_disk_in_the_primarys_place_is_rebuilt_from_the_replica(
    mirror: dict[str, str], record_property: Callable[[str, object], None]
) -> None:
    # docs/safety.md, flow 1: site A's disk dies; a new, blank one takes its place and site A
    # restarts. The replica on site B holds the mirror: it must be the source, never overwritten.
    written = write_random(80 * MiB, 4 * MiB)
    wait_in_sync()
    size = int(sh("blockdev", "--getsize64", MD).stdout)
    sh("mdadm", "--stop", MD)
    sh("iscsiadm", "-m", "node", "-T", IQN, "-p", PORTAL, "--logout")
    sh("blkdiscard", "--zeroout", "/dev/lab/a0")  # the new disk: zeros, no superblock, no leg record
    replica = read_record("/dev/lab/b0")
    assert replica is not None
    _, out, _ = remirror("status", LAB)
    assert "DEFUNCT" in out, out
    assert "holds no copy" in out, out
    code, out, err = remirror("plan", "--detailed-exitcode", LAB, ok_codes=(2,))
    record_property("plan_output", out)  # quoted in the note
    assert "AssembleArray" in out, out + err
    assert "RebuildLeg" in out, out + err
    assert "CreateArray" not in out, out
    assert "DESTROYS" not in out, out
    code, out, err = remirror("apply", "--yes", LAB)
    assert code == 0, out + err
    wait_in_sync()
    assert md_digest(80 * MiB, 4 * MiB) == written  # read from site A's new disk (site B's is write-mostly)
    assert legs_match(size)
    rebuilt = read_record("/dev/lab/a0")
    assert rebuilt is not None
    assert rebuilt.generations == replica.generations
    assert remirror("plan", "--detailed-exitcode", LAB)[0] == 0


def test_a_disk_with_a_filesystem_is_refused(tmp_path: Path) -> None:
    sh("mkfs.ext4", "-q", "-L", "precious", "/dev/lab/a2")
    profile = variant(
        tmp_path,
        "ext4.yaml",
        **{
            "name: lab0": "name: lab2",
            "/dev/lab/a0": "/dev/lab/a2",
            "/dev/lab/b0": "/dev/lab/b2",
            "/dev/md/lab0": "/dev/md/lab2",
        },
    )
    try:
        _, _, err = remirror("apply", "--yes", profile, ok_codes=(1,))
        assert "refusing to write over data without --allow-destructive" in err
        assert "/dev/lab/a2 holds ext4 filesystem labelled 'precious'" in err
        # Nothing changed anywhere: no LIO object on site B, the filesystem intact.
        assert (
            "lab2-site-b" not in on_b("ls", "/sys/kernel/config/target/core/iblock_0", ok_codes=(0, 2)).stdout
        )
        assert "precious" in sh("blkid", "/dev/lab/a2").stdout
    finally:
        sh("wipefs", "--all", "--quiet", "/dev/lab/a2")


def test_a_disk_a_process_holds_open_is_refused(tmp_path: Path) -> None:
    # docs/safety.md, flow 5: a raw disk in use (a VM's disk, a database) carries no signature
    # for wipefs to find; md's initial sync would write over it all the same.
    profile = variant(
        tmp_path,
        "in-use.yaml",
        **{
            "name: lab0": "name: lab2",
            "/dev/lab/a0": "/dev/lab/a2",
            "/dev/lab/b0": "/dev/lab/b2",
            "/dev/md/lab0": "/dev/md/lab2",
        },
    )
    written = write_random(MiB, 4 * MiB, "/dev/lab/a2")  # the application's data, no signature
    with Path("/dev/lab/a2").open("rb") as disk:
        holder = subprocess.Popen(["sleep", "600"], stdin=disk)
    try:
        _, _, err = remirror("apply", "--yes", profile, ok_codes=(1,))
        assert f"/dev/lab/a2 is in use (open by pid {holder.pid} (sleep))" in err, err
        # Nothing changed anywhere: no array, no LIO object on site B, the data as it was.
        assert not Path("/dev/md/lab2").exists()
        assert not any("lab2" in name for name in lio_objects())
        assert md_digest(MiB, 4 * MiB, "/dev/lab/a2") == written
    finally:
        holder.kill()
        holder.wait()
        sh("dd", "if=/dev/zero", "of=/dev/lab/a2", "bs=1M", "count=8", "oflag=direct", "status=none")


def test_an_unreachable_site_fails_fast_and_changes_nothing() -> None:
    net.set_link(False)
    try:
        _, _, err = remirror("plan", LAB, ok_codes=(1,))
        lines = [line for line in err.splitlines() if line.startswith("remirror:")]
        assert lines == [lines[0]]
        assert lines[0].startswith("remirror: site site-b: cannot connect to root@site-b:22")
    finally:
        net.set_link(True)
        net.wait_until_reachable()
        # The cut may have outlasted the lab's NOP timeouts (2 + 5 s): the session recovers
        # by itself; the next test must not see it mid-recovery (found in CI: `FREE`).
        wait_sessions_back()


def test_initial_sync_skip_refuses_a_leg_with_data_before_it_makes_anything(tmp_path: Path) -> None:
    # Its way with blank legs (no copy) is lab4's in tests/lab/test_transport.py.
    profile = variant(
        tmp_path,
        "skip.yaml",
        **{
            "name: lab0": "name: lab4",
            "/dev/lab/a0": "/dev/lab/a3",
            "/dev/lab/b0": "/dev/lab/b3",
            "/dev/md/lab0": "/dev/md/lab4",
            "      on_link_loss: degrade\n": "      on_link_loss: degrade\n      initial_sync: skip\n",
        },
    )
    sh("blkdiscard", "--zeroout", "/dev/lab/a3")
    on_b("blkdiscard", "--zeroout", "/dev/lab/b3")
    # One byte of data on the replica's disk, with no signature for wipefs to see.
    at = 100 * MiB + 17
    on_b("sh", "-c", f"printf x | dd of=/dev/lab/b3 bs=1 seek={at} conv=notrunc status=none")
    try:
        _, _, err = remirror("apply", "--yes", profile, ok_codes=(1,))
        assert f"/dev/lab/b3 is not blank: byte {at} is not zero" in err, err
        # The proofs came first: no array, no export holding the replica's disk.
        assert not Path("/dev/md/lab4").exists()
        assert not [name for name in lio_objects() if "lab4" in name]
    finally:
        sh("blkdiscard", "--zeroout", "/dev/lab/a3")
        on_b("blkdiscard", "--zeroout", "/dev/lab/b3")  # refused while LIO held it
