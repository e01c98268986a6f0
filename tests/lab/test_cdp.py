"""CDP on a real kernel: recovery points on a mirror (docs/cdp.md), restored, rolled back, listed
by what changed, pruned to the window, and held by the DR site's leg too.

A mirror of its own (`lab2` on a2/b2, sync mode) with `cdp`, beside the
session's `lab0`: built by this module's fixture, destroyed at its end.
"""

from __future__ import annotations

import base64
import json
import mmap
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from remirror.facts.cdp import INDEX_BYTES, INDEX_SLOT
from remirror.facts.cdp_index import decode_index
from remirror.facts.parsers import parse_data_offset
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import LAB, md_digest, md_sysfs, remirror

MD = "/dev/md/lab2"
VOLUME = "/dev/mapper/remirror-lab2-cdp"
MiB = 1024 * 1024
CHUNK = 64 * 1024  # the pool's
ERA_BLOCK = MiB  # dm-era's (remirror.facts.cdp.ERA_BLOCK): what `changes` and a rollback see
PROFILE = (
    Path(LAB)
    .read_text()
    .replace("  - name: lab0\n    device: /dev/md/lab0\n", "  - name: lab2\n    device: /dev/md/lab2\n")
    .replace("      disk: /dev/lab/a0\n", "      disk: /dev/lab/a2\n")
    .replace("        disk: /dev/lab/b0\n", "        disk: /dev/lab/b2\n")
    .replace("mode: async", "mode: sync")
    .replace("      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", "")
    + "    cdp: {every: 3s, keep: 20s}\n"
)


def cdp(profile: str, *args: str, ok_codes: tuple[int, ...] = (0,)) -> str:
    verb, *rest = args
    _, out, err = remirror("cdp", verb, profile, *rest, ok_codes=ok_codes)
    return out + err


def write_marker(offset: int, text: str) -> None:
    """A 4 KiB marker at `offset` of the volume, O_DIRECT|O_SYNC (acknowledged when it returns)."""
    buffer = mmap.mmap(-1, 4096)
    buffer.write(text.encode().ljust(4096, b"."))
    fd = os.open(VOLUME, os.O_WRONLY | os.O_DIRECT | os.O_SYNC)
    try:
        assert os.pwrite(fd, buffer, offset) == 4096
    finally:
        os.close(fd)


def digest(device: str) -> str:
    """sha256 of a whole device, read past the page cache."""
    out = sh("sh", "-c", f"dd if={device} bs=1M iflag=direct status=none | sha256sum", timeout=600)
    return out.stdout.split()[0]


def hour(profile: str) -> str:
    """The module's profile with a window of an hour (see `protected`)."""
    return str(Path(profile).with_name("hour.yaml"))


def points(profile: str) -> list[dict[str, Any]]:
    return json.loads(cdp(profile, "list", "lab2", "-o", "json"))["points"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def protected(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The mirror with CDP, MIRRORED; its profile's path."""
    directory = tmp_path_factory.mktemp("cdp")
    path = directory / "cdp.yaml"
    path.write_text(PROFILE)
    # The same mirror with a window of an hour, for the tests that take points by hand:
    # with `keep: 20s` a `cdp point` prunes what a slow test took a minute ago.
    (directory / "hour.yaml").write_text(PROFILE.replace("keep: 20s", "keep: 1h"))
    # `--wait`: apply returns once the initial sync is done (the mirror MIRRORED).
    code, out, err = remirror("apply", "--yes", "--wait", "--wait-timeout", "15m", str(path))
    assert code == 0, out + err
    assert "CreateCdp" in out, out
    assert md_sysfs("sync_action", MD) == "idle"
    assert md_sysfs("degraded", MD) == "0"
    yield str(path)
    remirror("destroy", "--yes", str(path), "lab2", ok_codes=(0, 1))
    for disk in ("/dev/lab/a2", "/dev/lab/b2", "/dev/lab/a3"):
        sh("wipefs", "--all", "--quiet", disk, ok_codes=(0, 1))
        sh("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=8", "oflag=direct", "status=none")


def test_each_point_restores_exactly_what_was_written_before_it(
    protected: str, record_property: Callable[[str, object], None]
) -> None:
    protected = hour(protected)
    recorded = []  # (point id, digest of the whole volume at the point)
    for n in range(1, 5):
        write_marker(n * 3 * MiB, f"marker t{n}")
        write_marker(0, f"t{n} overwrites block 0")
        started = time.monotonic()
        out = cdp(protected, "point", "lab2", "--now")
        record_property(f"point_{n}_seconds", round(time.monotonic() - started, 2))
        recorded.append((int(out.split("#")[1].split()[0]), digest(VOLUME)))
    write_marker(20 * MiB, "after the last point")
    assert [int(p["id"]) for p in points(protected)][-4:] == [p for p, _ in recorded]
    for point, want in recorded:
        out = cdp(protected, "restore", "lab2", "--at", str(point), "--view")
        view = f"/dev/mapper/remirror-lab2-cdp-at-{point}"
        assert view in out, out
        assert digest(view) == want, f"point {point} does not hold the volume as it was"
        # read-only: nothing can change a point
        assert sh("dd", "if=/dev/zero", f"of={view}", "bs=4k", "count=1", "oflag=direct", ok_codes=(1,))
        sh("dmsetup", "remove", "--retry", view.removeprefix("/dev/mapper/"))


def test_changes_lists_exactly_the_blocks_written_since_a_point(protected: str) -> None:
    protected = hour(protected)
    out = cdp(protected, "point", "lab2", "--now")
    since = out.split("#")[1].split()[0]
    written = [5 * MiB + 4096, 9 * MiB, 9 * MiB + CHUNK, 40 * MiB + 12345 // 4096 * 4096]
    for offset in written:
        write_marker(offset, f"changed at {offset}")
    listed = cdp(protected, "changes", "lab2", "--since", since).split()
    ranges = [(int(o), int(n)) for o, n in (line.split(":") for line in listed)]
    changed = {block for o, n in ranges for block in range(o // ERA_BLOCK, (o + n) // ERA_BLOCK)}
    assert changed == {offset // ERA_BLOCK for offset in written}  # era blocks: 1 MiB


def test_rollback_copies_back_only_what_changed_and_keeps_later_points(
    protected: str, record_property: Callable[[str, object], None]
) -> None:
    protected = hour(protected)
    out = cdp(protected, "point", "lab2", "--now")
    target = out.split("#")[1].split()[0]
    at_target = digest(VOLUME)
    for n in range(8):
        write_marker(60 * MiB + n * CHUNK, f"after the target {n}")
    later = cdp(protected, "point", "lab2", "--now").split("#")[1].split()[0]
    at_later = digest(VOLUME)
    write_marker(70 * MiB, "after the later point")
    refused = cdp(protected, "rollback", "lab2", "--at", target, ok_codes=(3,))
    assert "add --yes" in refused
    out = cdp(protected, "rollback", "lab2", "--at", target, "--yes")
    assert digest(VOLUME) == at_target
    record_property("rollback_output", out.strip())
    # The 2 era blocks written since (the 8 markers share one), not the volume.
    assert f"({2 * ERA_BLOCK} bytes) copied" in out, out
    # The later point still restores what it held; the undo point holds the present before the rollback.
    cdp(protected, "restore", "lab2", "--at", later, "--view")
    assert digest(f"/dev/mapper/remirror-lab2-cdp-at-{later}") == at_later
    sh("dmsetup", "remove", "--retry", f"remirror-lab2-cdp-at-{later}")
    # And writing goes on.
    write_marker(80 * MiB, "after the rollback")
    cdp(protected, "point", "lab2", "--now")


def test_a_rollback_never_runs_beside_a_point_or_a_pruning(
    protected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Safety, flow 6: `cdp run` and `cdp rollback` both read the index, change the pool and
    # write the index back; side by side, one's write loses the other's points (the undo
    # point among them). Here another process holds the index, as `cdp run` does mid-point.
    protected = hour(protected)
    target = cdp(protected, "point", "lab2", "--now").split("#")[1].split()[0]
    at_target = digest(VOLUME)
    write_marker(90 * MiB, "after the target")
    written = md_digest(90 * MiB, CHUNK, VOLUME)  # what the rollback would undo
    listed = points(protected)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_INDEX, "remirror cdp run (the lab's test)"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None
    assert holder.stdout.readline() == "held\n"
    monkeypatch.setenv("REMIRROR_LOCK_WAIT", "2")
    try:
        refused = cdp(protected, "rollback", "lab2", "--at", target, "--yes", ok_codes=(1,))
        assert "busy: remirror cdp run (the lab's test) since" in refused, refused
        assert "holds its cdp-lab2 lock" in refused
        assert md_digest(90 * MiB, CHUNK, VOLUME) == written  # nothing rolled back
        assert points(protected) == listed  # and the index as it was
    finally:
        holder.communicate("")  # it lets go
    out = cdp(protected, "rollback", "lab2", "--at", target, "--yes")
    assert digest(VOLUME) == at_target
    undo = int(out.split("before the rollback is point #")[1].split()[0])
    assert undo in [int(p["id"]) for p in points(protected)]


# Holds lab2's CDP index lock, as another process (`cdp run`) would, until stdin closes.
HOLD_INDEX = """
import sys
from remirror.agent import lock
lock.take("cdp-lab2", sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


def test_a_point_is_copied_to_another_device_and_a_disk_with_data_is_refused(protected: str) -> None:
    protected = hour(protected)
    point = str(int(points(protected)[-1]["id"]))
    sh("mkfs.ext4", "-q", "-F", "/dev/lab/a3")
    refused = cdp(protected, "restore", "lab2", "--at", point, "--to", "/dev/lab/a3", ok_codes=(1, 3))
    assert "ext4" in refused, refused
    assert "--allow-destructive" in refused, refused
    cdp(protected, "restore", "lab2", "--at", point, "--to", "/dev/lab/a3", "--allow-destructive")
    view = cdp(protected, "restore", "lab2", "--at", point, "--view").split(" is ")[1].split()[0]
    size = int(sh("blockdev", "--getsize64", view).stdout)
    copy = sh("sh", "-c", f"head -c {size} /dev/lab/a3 | sha256sum").stdout.split()[0]
    assert copy == digest(view)
    sh("dmsetup", "remove", "--retry", view.removeprefix("/dev/mapper/"))


def test_the_daemon_keeps_the_window_and_the_dr_leg_holds_the_points(
    protected: str, record_property: Callable[[str, object], None]
) -> None:
    daemon = subprocess.Popen(["remirror", "cdp", "run", protected], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []

    def read() -> None:
        for line in daemon.stdout or ():
            lines.append(line)  # one at a time: the test watches them arrive

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # Every 3s, keep 20s: until it has taken 8 points and pruned (past the window).
        deadline = time.monotonic() + 300
        while sum('"point"' in line for line in lines) < 8 or not any('"pruned"' in line for line in lines):
            assert time.monotonic() < deadline, "".join(lines)
            time.sleep(0.5)
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        reader.join(timeout=60)
    out = "".join(lines)
    events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    taken = [e for e in events if e["event"] == "point"]
    assert len(taken) >= 8, out
    assert any(e["event"] == "pruned" for e in events), out
    record_property("point_seconds_max", max(e["seconds"] for e in taken))
    now = time.time()
    kept = points(protected)
    ages = [now - p["time"] for p in kept]
    record_property("points_kept", len(kept))
    assert max(ages) <= 20 + 3 + 5, ages  # the window, an interval, and this test's own delay
    assert min(ages) < 10
    # The DR site's leg holds the same index: the history survives the primary.
    examine = on_b("mdadm", "--examine", "/dev/lab/b2").stdout
    offset = parse_data_offset(examine)
    assert offset is not None, examine
    raw = on_b(
        "sh", "-c",
        f"dd if=/dev/lab/b2 iflag=direct,skip_bytes skip={offset} bs=1M count={INDEX_BYTES // MiB} status=none"
        " | base64 -w0",
    ).stdout  # fmt: skip
    replica = decode_index(base64.b64decode(raw), INDEX_SLOT)
    assert replica is not None
    assert [p.id for p in replica.points] == [int(p["id"]) for p in kept]


def test_a_failing_before_hook_still_runs_the_after_hook_and_its_point_is_not_clean(
    protected: str, tmp_path: Path
) -> None:
    """`cdp.hooks` around `cdp point`: a before-hook that fails leaves a crash-consistent point,
    recorded as not clean, and the after-hook (the application's thaw) runs all the same."""
    trail = tmp_path / "trail"
    hooks = (
        f"hooks: {{before: 'echo before $REMIRROR_CDP_MIRROR >> {trail}; exit 7',"
        f" after: 'echo after >> {trail}', timeout: 30s}}"
    )
    failing = tmp_path / "failing.yaml"
    failing.write_text(PROFILE.replace("keep: 20s}", f"keep: 1h, {hooks}}}"))
    said = cdp(str(failing), "point", "lab2", "--now")
    assert "hooks failed" in said, said
    assert "is not clean: before hook exited 7" in said, said
    assert trail.read_text() == "before lab2\nafter\n"
    failed = points(str(failing))[-1]
    assert failed["hooks"] == "failed", failed
    clean = tmp_path / "clean.yaml"
    clean.write_text(failing.read_text().replace("; exit 7", ""))
    cdp(str(clean), "point", "lab2", "--now")
    assert [p["hooks"] for p in points(str(clean))[-2:]] == ["failed", "clean"]
    listed = cdp(str(clean), "list", "lab2")
    assert f"#{failed['id']:<6}" in listed, listed
    assert "hooks failed" in listed, listed
    assert "hooks clean" in listed, listed


# The test's points, by their age in hours when it prunes, a month after its start: the lab's clock
# is moved forward to take each, and put right at the end. Some for each tier of GRID, and three
# within less than an hour (two of them in one hour, whatever the minute), two hours (one day) and
# two hours (one week), so that each tier has one to prune; none within minutes of a tier's edge; after the points the module took
# (the new ones stay in the future of the clock put right: the module's last test only lists
# them, and its end destroys the mirror). None of the lab's own timers minds a clock that jumps:
# the sessions, md and the tests' deadlines count monotonic time.
POINT_AGES = (
    690,
    530,
    360,
    202,
    201,
    200,
    140,
    100,
    75,
    50,
    32,
    31,
    30,
    20,
    9,
    5.1,
    3.7,
    3.4,
    3.1,
    1.5,
    1.0,
    0.3,
)
PRUNED_AT = 700  # hours after the start
GRID = "{all: 2h, hourly: 1d, daily: 7d, weekly: 5w}"


def test_a_grid_prunes_exactly_to_its_points_after_a_dry_run_that_lists_the_same(
    protected: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """Points taken over a month of the lab's clock (moved forward between them) under a
    retention that keeps them all; then the grid's dry run lists what would go and why, its
    prune deletes exactly that, and status counts what is left by tier."""
    from remirror.facts.cdp import RecoveryPoint
    from remirror.retention import Keep
    from tests.unit.test_retention_grid import expected

    taking = tmp_path / "taking.yaml"
    taking.write_text(PROFILE.replace("every: 3s, keep: 20s", "every: 1h, keep: 60d"))
    grid = tmp_path / "grid.yaml"
    grid.write_text(PROFILE.replace("keep: 20s", f"keep: {GRID}"))
    real, started = time.time(), time.monotonic()
    try:
        for age in POINT_AGES:
            moved = (PRUNED_AT - age) * 3600
            time.clock_settime(time.CLOCK_REALTIME, real + moved + (time.monotonic() - started))
            cdp(str(taking), "point", "lab2", "--now")
        time.clock_settime(time.CLOCK_REALTIME, real + PRUNED_AT * 3600 + (time.monotonic() - started))
        now = time.time()  # the tiers' ages are hours from their edges: a few seconds do not matter
        taken = [RecoveryPoint(int(p["id"]), p["time"], 0) for p in points(str(taking))]
        keep = Keep(all=2 * 3600, hourly=86400, daily=7 * 86400, weekly=35 * 86400)
        kept = expected(taken, now, keep)
        doomed = {p.id for p in taken} - kept
        assert len(kept) >= 12, kept  # every tier had work
        assert len(doomed) >= 3, doomed
        dry = cdp(str(grid), "prune", "lab2", "--dry-run")
        listed = {
            int(line.split()[1].lstrip("#")) for line in dry.splitlines() if " would be pruned: " in line
        }
        assert listed == doomed, dry
        assert "not the first point of its hour (hourly tier)" in dry, dry
        assert {int(p["id"]) for p in points(str(taking))} == {
            p.id for p in taken
        }  # a dry run deletes nothing
        done = cdp(str(grid), "prune", "lab2", "--yes")
        assert {
            int(line.split()[1].lstrip("#")) for line in done.splitlines() if " pruned: " in line
        } == doomed
        assert {int(p["id"]) for p in points(str(grid))} == kept, done
        _, out, _ = remirror("status", str(grid), "-o", "json", ok_codes=(0, 1, 2))
        (shown,) = [m["cdp"] for m in json.loads(out)["mirrors"] if m["mirror"] == "lab2"]
        assert sum(shown["tiers"].values()) == len(kept), shown
        assert shown["window_seconds"] >= 28 * 86400, shown  # the oldest point kept: weeks old
        record_property("grid_points_taken", len(taken))
        record_property("grid_points_kept", len(kept))
    finally:
        time.clock_settime(time.CLOCK_REALTIME, real + (time.monotonic() - started))


def test_status_reports_the_points_and_destroy_then_apply_finds_them_again(protected: str) -> None:
    _, out, _ = remirror("status", protected, "-o", "json", ok_codes=(0, 1, 2))
    (mirror,) = [m for m in json.loads(out)["mirrors"] if m["mirror"] == "lab2"]
    assert mirror["cdp"]["points"] >= 1, mirror["cdp"]
    assert mirror["cdp"]["pool_mode"] == "rw", mirror["cdp"]
    before = [p["id"] for p in points(protected)]
    volume = digest(VOLUME)
    code, out, err = remirror("destroy", "--yes", protected, "lab2")
    assert code == 0, out + err
    assert "DeactivateCdp" in out, out
    assert not Path(VOLUME).exists()
    code, out, err = remirror("apply", "--yes", protected)
    assert code == 0, out + err
    assert "ActivateCdp" in out, out
    assert "CreateCdp" not in out, out
    assert [p["id"] for p in points(protected)] == before
    assert digest(VOLUME) == volume
