"""`remirror apply` on the lab: site A primary, site B replica over SSH (profiles/lab.yaml)."""

from __future__ import annotations

import json
import mmap
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from remirror.lab import net
from remirror.lab.demo import leg_digest
from tests.conftest import PROFILES
from tests.lab.conftest import on_b, sh

LAB = str(PROFILES / "lab.yaml")
MD = "/dev/md/lab0"
SLOW = 900  # seconds: apply observes two sites and starts Python on site B, under emulation


def remirror(*args: str, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, str, str]:
    done = sh("remirror", *args, ok_codes=ok_codes, timeout=SLOW)
    return done.returncode, done.stdout, done.stderr


def variant(tmp_path: Path, name: str, **replace: str) -> str:
    """A copy of the lab profile with some text replaced."""
    text = Path(LAB).read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def md_sysfs(name: str) -> str:
    kernel = Path(MD).resolve().name
    return Path(f"/sys/block/{kernel}/md/{name}").read_text().strip()


def teardown_mirror(iqn: str, backstore: str, disks: tuple[str, ...]) -> None:
    """Undo what apply built, so later tests start from bare disks (destroy is not written yet)."""
    sh("mdadm", "--stop", MD, ok_codes=(0, 1))
    portal = "192.0.2.2:3260"
    sh("iscsiadm", "-m", "node", "-T", iqn, "-p", portal, "--logout", ok_codes=(0, 21))
    sh("iscsiadm", "-m", "node", "-T", iqn, "-p", portal, "-o", "delete", ok_codes=(0, 21))
    script = (
        "import sys\nfrom rtslib_fb import RTSRoot\nroot = RTSRoot()\n"
        "[t.delete() for t in list(root.targets) if t.wwn == sys.argv[1]]\n"
        "[s.delete() for s in list(root.storage_objects) if s.name == sys.argv[2]]\n"
    )
    on_b(sys_python(), "-c", script, iqn, backstore)
    for disk in disks:
        sh("wipefs", "--all", "--quiet", disk)


def sys_python() -> str:
    import sys

    return sys.executable


@pytest.fixture(scope="module")
def mirror() -> Iterator[dict[str, str]]:
    code, out, err = remirror("apply", "--yes", LAB)
    assert code == 0, out + err
    yield {"apply_output": out}
    teardown_mirror("iqn.2026-11.org.remirror:lab.lab0.site-b", "lab0-site-b", ("/dev/lab/a0", "/dev/lab/b0"))


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


def test_data_written_through_the_mirror_is_on_both_legs(mirror: dict[str, str]) -> None:
    payload = mmap.mmap(-1, 8 * 1024 * 1024)  # page-aligned, as O_DIRECT wants
    payload.write(os.urandom(len(payload)))
    fd = os.open(MD, os.O_WRONLY | os.O_DIRECT | os.O_SYNC)
    try:
        assert os.pwrite(fd, payload, 4 * 1024 * 1024) == len(payload)
    finally:
        os.close(fd)
    # Write-behind: give the remote leg a moment to catch up, then compare
    # the legs' data regions (their superblocks differ by design).
    time.sleep(3)
    assert leg_digest("/dev/lab/a0", site_b=False) == leg_digest("/dev/lab/b0", site_b=True)
    # And md's own check agrees.
    kernel = Path(MD).resolve().name
    Path(f"/sys/block/{kernel}/md/sync_action").write_text("check")
    deadline = time.monotonic() + SLOW
    while md_sysfs("sync_action") != "idle":
        assert time.monotonic() < deadline, "check did not finish"
        time.sleep(1)
    assert md_sysfs("mismatch_cnt") == "0"


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
