"""Caches in front of legs on a real kernel: the DCD seed's replica writecache, drained and removed
under fio verify, never dropped while dirty, and back after a crash of the replica side.

A mirror of its own (`lab1` on a1/b1, the fast disks as caches, sync mode as the seed ran
it), beside the session's `lab0`: built by this module's fixture, destroyed at its end.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from remirror.agent.client import end_kept_agents
from remirror.lab.probes import array_size, legs_hold_the_same_data, sectors_written
from tests.lab import mirror as lab0
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import LAB, SLOW, fio_verified, remirror, start_fio_verify

MD = "/dev/md/lab1"
PRIMARY_CACHE = "remirror-lab1-site-a"
REPLICA_CACHE = "remirror-lab1-site-b"
MiB = 1024 * 1024
PROFILE = (
    Path(LAB)
    .read_text()
    .replace("  - name: lab0\n    device: /dev/md/lab0\n", "  - name: lab1\n    device: /dev/md/lab1\n")
    .replace(
        "      disk: /dev/lab/a0\n",
        "      disk: /dev/lab/a1\n      cache: {disk: /dev/lab/a-fast0}\n",
    )
    .replace(
        "        disk: /dev/lab/b0\n",
        "        disk: /dev/lab/b1\n        cache: {disk: /dev/lab/b-fast0}\n",
    )
    .replace("mode: async", "mode: sync")
    .replace("      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", "")
)


def md_sysfs(name: str) -> str:
    return lab0.md_sysfs(name, MD)


def wait_idle() -> None:
    lab0.wait_in_sync(MD)


def write_random(offset: int, size: int) -> str:
    return lab0.write_random(offset, size, MD)


def md_digest(offset: int, size: int) -> str:
    return lab0.md_digest(offset, size, MD)


def profile_file(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


def without_caches(text: str) -> str:
    return text.replace("      cache: {disk: /dev/lab/a-fast0}\n", "").replace(
        "        cache: {disk: /dev/lab/b-fast0}\n", ""
    )


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cached mirror, MIRRORED; the directory holding its profile variants."""
    directory = tmp_path_factory.mktemp("cache")
    profile = profile_file(directory, "cached.yaml", PROFILE)
    code, out, err = remirror("apply", "--yes", profile)
    assert code == 0, out + err
    wait_idle()
    yield directory
    # The last profile applied may be without caches: destroy with the one that has them
    # removes whatever is there (drained first).
    remirror("destroy", "--yes", profile, "lab1", ok_codes=(0, 1))
    for disk in ("/dev/lab/a1", "/dev/lab/b1", "/dev/lab/a-fast0", "/dev/lab/b-fast0"):
        sh("wipefs", "--all", "--quiet", disk, ok_codes=(0, 1))
        sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=1", "oflag=direct", "status=none")


def legs_match(primary: str, replica: str) -> bool:
    """Whether the two legs' devices (a cache's, or the disk) hold the same array data."""
    return legs_hold_the_same_data(primary, replica, array_size(MD))


def status_legs(profile: str) -> dict[str, dict[str, object]]:
    _, out, _ = remirror("status", profile, "-o", "json", ok_codes=(0, 1, 2))
    (mirror,) = [m for m in json.loads(out)["mirrors"] if m["mirror"] == "lab1"]
    return {leg["site"]: leg for leg in mirror["legs"]}


def dm_target(name: str) -> str:
    """The target type of a dm device (`writecache`, `linear`), or `` if it does not exist."""
    done = sh("dmsetup", "table", name, ok_codes=(0, 1))
    return done.stdout.split()[2] if done.returncode == 0 and done.stdout.strip() else ""


def dm_name(disk: str) -> str:
    return Path(f"/sys/block/{Path(disk).resolve().name}/dm/name").read_text().strip()


def replica_dirty_blocks() -> int:
    """Dirty blocks of the replica's cache, read on site B (`remirror status` is shown in the first test)."""
    fields = on_b("dmsetup", "status", REPLICA_CACHE).stdout.split()
    return int(fields[4]) - int(fields[5])  # writecache: ERROR BLOCKS FREE WRITEBACK ...


def fast_digest() -> str:
    """sha256 of the first 8 MiB of site B's fast disk (where a cache's set-up writes)."""
    command = "dd if=/dev/lab/b-fast0 iflag=direct bs=1M count=8 status=none | sha256sum"
    return on_b("sh", "-c", command).stdout.split()[0]


def progress(line: str) -> None:
    print(f"\n  {line}", file=sys.__stderr__, flush=True)


def test_apply_builds_both_caches_and_the_replica_acknowledges_from_its_fast_disk(cached: Path) -> None:
    profile = str(cached / "cached.yaml")
    assert dm_target(PRIMARY_CACHE) == dm_target(REPLICA_CACHE) == "writecache"
    # md's member on the primary is the cache device; LIO exports the replica's.
    members = {p.name for p in Path(f"/sys/block/{Path(MD).resolve().name}/md").glob("dev-*")}
    assert f"dev-{Path('/dev/mapper/' + PRIMARY_CACHE).resolve().name}" in members
    backstore = Path("/sys/kernel/config/target/core").glob("iblock_*/lab1-site-b/udev_path")
    assert [p.read_text().strip() for p in backstore] == [f"/dev/mapper/{REPLICA_CACHE}"]
    # The initial resync went through the replica's cache and left it near its high
    # watermark (50%): 4 MiB more would start the kernel's writeback during the
    # measurement. Start from a clean cache, as a replica that was idle a while.
    on_b("dmsetup", "message", REPLICA_CACHE, "0", "flush", timeout=SLOW)
    assert replica_dirty_blocks() == 0
    written_before = sectors_written("/dev/lab/b1")
    write_random(32 * MiB, 4 * MiB)
    legs = status_legs(profile)
    # The 4 MiB sit in the replica's cache (sync mode acknowledged them from there), not its disk.
    assert int(legs["site-b"]["cache_dirty_blocks"]) >= 1024, legs  # type: ignore[call-overload]
    written_after = sectors_written("/dev/lab/b1")
    assert written_after - written_before < 4 * MiB // 512
    assert remirror("plan", "--detailed-exitcode", profile)[0] == 0  # adopted as built: nothing to do


def test_destage_when_idle_writes_the_replica_cache_back_once_writes_stop(
    cached: Path, record_property: Callable[[str, object], None]
) -> None:
    # `remirror destage` runs on site B itself (as its systemd unit would), on a profile
    # that asks for it; the cache as built stays (destage is not a table option). One file for
    # both sites (site A written with its address): site B finds itself in it by its host name.
    assert "  site-a:\n    host: local\n" in PROFILE
    profile = profile_file(
        cached,
        "destage.yaml",
        PROFILE.replace(
            "cache: {disk: /dev/lab/b-fast0}",
            "cache: {disk: /dev/lab/b-fast0, destage: idle, idle_after: 2s}",
        ).replace("  site-a:\n    host: local\n", "  site-a:\n    host: ssh://root@site-a\n"),
    )
    destage = subprocess.Popen(["site-b", "remirror", "destage", profile], stdout=subprocess.PIPE, text=True)
    try:
        write_random(40 * MiB, 4 * MiB)
        written = time.monotonic()
        while replica_dirty_blocks() > 0:
            assert time.monotonic() - written < 300, "the idle cache was never written back"
            time.sleep(2)
        record_property("destage_idle_clean_after_seconds", round(time.monotonic() - written, 1))
    finally:
        destage.terminate()
        out, _ = destage.communicate(timeout=60)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert any(e["event"] == "destaged" and e["cache"] == REPLICA_CACHE for e in events), out
    assert destage.returncode == 0, out


def test_a_dirty_cache_is_never_dropped(cached: Path) -> None:
    plain = profile_file(cached, "plain.yaml", without_caches(PROFILE))
    write_random(48 * MiB, 8 * MiB)
    # The replica's disk answers each write after 8 s: the drain cannot finish in 3 s.
    disk = dm_name("/dev/lab/b1")
    table = sh("dmsetup", "table", disk).stdout.split()
    assert table[2] == "linear", table
    slow = " ".join([*table[:2], "delay", *table[3:5], "0", table[3], table[4], "8000"])
    sh("dmsetup", "load", disk, "--table", slow)
    sh("dmsetup", "resume", disk)
    try:
        _, out, err = remirror("apply", "--yes", "--drain-timeout", "3", plain, ok_codes=(1,))
        assert "DrainCache" in out + err, out + err
        assert "dirty block(s) after 3s" in out + err, out + err
        # Still there, holding what the disk lacks; the next test drains it and checks the data.
        assert dm_target(REPLICA_CACHE) == "writecache"
        assert replica_dirty_blocks() > 0
    finally:
        sh("dmsetup", "load", disk, "--table", " ".join(table))
        sh("dmsetup", "resume", disk, timeout=SLOW)
    assert md_sysfs("degraded") == "0"
    # The drain cut short left the cache in cleaner mode: the profile with the cache ends it, live.
    code, out, err = remirror("apply", "--yes", str(cached / "cached.yaml"))
    assert code == 0, out + err
    assert "cleaner off" in out, out
    assert dm_target(PRIMARY_CACHE) == dm_target(REPLICA_CACHE) == "writecache"
    assert "cleaner" not in sh("dmsetup", "table", REPLICA_CACHE).stdout


def test_data_survives_the_removal_of_the_replica_cache_while_fio_verifies(
    cached: Path, record_property: Callable[[str, object], None]
) -> None:
    """Also the end of the previous test: the cache it could not drain is drained now, live."""
    profile = str(cached / "cached.yaml")
    replica_only = profile_file(
        cached, "replica-only.yaml", PROFILE.replace("        cache: {disk: /dev/lab/b-fast0}\n", "")
    )
    digests = {offset: write_random(offset, 8 * MiB) for offset in (64 * MiB, 72 * MiB)}
    dirty = replica_dirty_blocks()
    assert dirty > 0
    record_property("replica_cache_dirty_blocks_before_removal", dirty)
    fio = start_fio_verify(MD)
    lab0.wait_writing(MD)
    started = time.monotonic()
    code, out, err = remirror("apply", "--yes", replica_only)
    record_property("replica_cache_drain_and_swap_seconds", round(time.monotonic() - started, 1))
    fio_verified(fio)
    assert code == 0, out + err
    assert "DrainCache" in out
    assert dm_target(REPLICA_CACHE) == "linear"
    assert md_sysfs("degraded") == "0"
    # The replica's own disk (under the linear mapping) holds everything: checksums match.
    assert legs_match(f"/dev/mapper/{PRIMARY_CACHE}", "/dev/lab/b1")
    assert {offset: md_digest(offset, 8 * MiB) for offset in digests} == digests
    # docs/safety.md, flow 4: the drained fast disk is used for something else meanwhile.
    # Adding the cache back would zero its head: refused like any disk that holds data.
    on_b("mkfs.ext4", "-q", "-L", "reused", "/dev/lab/b-fast0")
    reused = fast_digest()
    _, out, err = remirror("apply", "--yes", profile, ok_codes=(1,))
    assert "refusing to write over data without --allow-destructive" in err, out + err
    assert "/dev/lab/b-fast0 holds ext4 filesystem labelled 'reused'" in err, err
    assert fast_digest() == reused
    assert dm_target(REPLICA_CACHE) == "linear"
    # The operator frees it again (wipefs alone leaves the rest of ext4's superblock there).
    on_b("dd", "if=/dev/zero", "of=/dev/lab/b-fast0", "bs=1M", "count=8", "oflag=direct", "status=none")
    # And back on, live, for the next test.
    code, out, err = remirror("apply", "--yes", profile)
    assert code == 0, out + err
    assert "AddCache" in out
    assert dm_target(REPLICA_CACHE) == "writecache"


def test_after_a_crash_of_the_replica_side_the_mirror_comes_back_consistent(
    cached: Path, record_property: Callable[[str, object], None]
) -> None:
    profile = str(cached / "cached.yaml")
    wait_idle()
    digest = write_random(96 * MiB, 8 * MiB)
    assert replica_dirty_blocks() > 0
    # The crash: LIO gone, the cache device torn down with no flush and no writeback, and the
    # agents this process kept on site B with it (a crashed host runs none).
    end_kept_agents()
    on_b(str(Path(sys.executable).parent / "targetctl"), "clear")
    on_b("dmsetup", "suspend", "--nolockfs", "--noflush", REPLICA_CACHE)
    length = on_b("blockdev", "--getsz", f"/dev/mapper/{REPLICA_CACHE}").stdout.strip()
    on_b("dmsetup", "load", REPLICA_CACHE, "--table", f"0 {length} error")
    on_b("dmsetup", "resume", REPLICA_CACHE)
    on_b("dmsetup", "remove", REPLICA_CACHE)
    crashed = time.monotonic()
    written = write_random(112 * MiB, 4 * MiB)  # the primary goes on; md fails the replica leg
    # Reconcile passes (cron's) re-create the cache from its disks, LIO, the session, then re-add.
    deadline = time.monotonic() + SLOW
    lines = []
    while True:
        code, out, _ = remirror("reconcile", profile, ok_codes=(0, 1, 2))
        lines.append(out.strip())
        progress(out.strip().splitlines()[-1] if out.strip() else f"exit {code}")
        if code == 0 and "lab1: MIRRORED" in out and md_sysfs("sync_action") == "idle":
            break
        assert time.monotonic() < deadline, lines
        time.sleep(3)
    record_property("replica_crash_to_mirrored_seconds", round(time.monotonic() - crashed, 1))
    assert any("CreateCache" in line for line in lines), lines
    assert dm_target(REPLICA_CACHE) == "writecache"
    wait_idle()
    # Consistent: the replica, read through its re-created cache, equals the primary.
    assert legs_match(f"/dev/mapper/{PRIMARY_CACHE}", f"/dev/mapper/{REPLICA_CACHE}")
    assert (md_digest(96 * MiB, 8 * MiB), md_digest(112 * MiB, 4 * MiB)) == (digest, written)
