"""status, check, metrics and verify on the lab: healthy, a cut link, a resync, an unreachable
site, a bad profile, bytes changed behind md's back.

The tests share the lab's one mirror (conftest.py) and run in file order; each
leaves it MIRRORED for the next.
"""

from __future__ import annotations

import json
import mmap
import os
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from remirror import __version__
from remirror.facts.parsers import parse_data_offset
from remirror.lab import net, probes
from remirror.lab.spec import VETH_A, Wan
from tests.lab.conftest import on_b, sh
from tests.lab.mirror import (
    LAB,
    MD,
    SLOW,
    MiB,
    Writer,
    md_sysfs,
    remirror,
    variant,
    wait_faulty,
    wait_in_sync,
    write_random,
)


def status() -> dict[str, Any]:
    """The lab mirror in `status -o json`."""
    # Exit 1 while the link is cut (site B unreachable), 0 otherwise.
    document = json.loads(remirror("status", "-o", "json", LAB, ok_codes=(0, 1))[1])
    assert document["kind"] == "status"
    (lab0,) = document["mirrors"]
    assert isinstance(lab0, dict)
    return lab0


def check(profile: str = LAB, ok_codes: tuple[int, ...] = (0,)) -> tuple[int, str]:
    """`remirror check` with a time limit for the lab: its 60 s default is for real machines,
    and under emulation a check during a resync can take longer (it would say CRITICAL)."""
    code, out, err = remirror("check", "-t", str(SLOW), profile, ok_codes=(0, 1, 2, 3))
    assert code in ok_codes, out + err  # the check's own words on what it saw
    return code, out


def replica(lab0: dict[str, Any]) -> dict[str, Any]:
    leg = lab0["legs"][1]
    assert leg["site"] == "site-b"
    assert isinstance(leg, dict)
    return leg


def test_a_healthy_mirror_checks_ok_with_perfdata(mirror: dict[str, str]) -> None:
    wait_in_sync()
    code, out = check()
    assert code == 0, out
    summary, _, perfdata = out.strip().partition(" | ")
    assert summary == "REMIRROR OK - lab0 MIRRORED"
    assert "'lab0 out_of_sync'=0B;" in perfdata
    assert "'lab0 rpo'=0s;" in perfdata
    leg = replica(status())
    assert (leg["status"], leg["session"], leg["write_mostly"]) == ("in_sync", "LOGGED_IN", True)
    assert (leg["out_of_sync_bytes"], leg["rpo_seconds"]) == (0, 0)
    assert 0 < leg["rtt_seconds"] < 1  # measured to the portal by the primary's agent


def test_an_outage_is_critical_out_of_sync_grows_with_the_writes_and_a_resync_warns(
    mirror: dict[str, str], record_property: Callable[[str, object], None]
) -> None:
    wait_in_sync()
    chunk = int(md_sysfs("bitmap/chunksize"))
    kernel = Path(MD).resolve().name
    # md only throttles a resync below sync_speed_min when asked to: set both.
    speeds = [Path(f"/sys/block/{kernel}/md/sync_speed_{end}") for end in ("min", "max")]
    net.set_link(False)
    cut = time.monotonic()
    try:
        write_random(32 * MiB, 8 * MiB)  # chunk-aligned: 8 chunks of 1 MiB
        wait_faulty()
        first = replica(status())
        write_random(96 * MiB, 8 * MiB)
        second = replica(status())
        record_property("out_of_sync_after_8MiB", first["out_of_sync_bytes"])
        record_property("out_of_sync_after_16MiB", second["out_of_sync_bytes"])
        # Within one bitmap chunk per chunk touched (a chunk in flight when the leg failed counts too).
        assert 8 * MiB <= first["out_of_sync_bytes"] <= 8 * MiB + 8 * chunk, first
        assert 16 * MiB <= second["out_of_sync_bytes"] <= 16 * MiB + 16 * chunk, second
        assert second["rpo_seconds"] >= first["rpo_seconds"] > 0  # dated from the last healthy look
        assert second["rpo_seconds"] <= time.monotonic() - cut + 600  # and not from long before
        code, out = check(ok_codes=(2,))
        assert out.startswith("REMIRROR CRITICAL - lab0 MIRROR_DEFUNCT: "), out
        assert "site-b" in out.partition(" | ")[0], out
        for speed in speeds:  # KiB/s: keeps the coming resync visible for a minute or so
            speed.write_text("200\n")
    finally:
        net.set_link(True)
        net.wait_until_reachable()
    try:
        deadline = time.monotonic() + 300
        while True:  # passes until one re-adds the leg and md recovers onto it
            code, out, _ = remirror("reconcile", LAB, ok_codes=(1, 2))
            if code == 1 and md_sysfs("sync_action") == "recover":
                break
            assert time.monotonic() < deadline, out
            time.sleep(3)
        resync = status()["resync"]
        code, out = check(ok_codes=(1,))
        assert out.startswith("REMIRROR WARNING - lab0 SYNCING: md is running recover, "), out
        assert "% done" in out, out
        assert resync is not None, "the resync ended before status looked"
        assert resync["action"] == "recover"
        assert 0 <= resync["percent"] < 100
    finally:
        for speed in speeds:
            speed.write_text("system\n")
    wait_in_sync()
    leg = replica(status())
    assert (leg["status"], leg["out_of_sync_bytes"], leg["rpo_seconds"]) == ("in_sync", 0, 0)


def test_an_unreachable_site_is_critical_and_a_broken_profile_unknown(
    mirror: dict[str, str], tmp_path: Path
) -> None:
    elsewhere = variant(tmp_path, "port.yaml", **{"ssh://root@site-b": "ssh://root@site-b:2222"})
    _, out = check(elsewhere, ok_codes=(2,))
    assert out.startswith("REMIRROR CRITICAL - lab0 MIRRORED: site unreachable for replica leg on site-b"), (
        out
    )
    broken = variant(tmp_path, "broken.yaml", **{"mode: async": "mode: sometimes"})
    _, out = check(broken, ok_codes=(3,))
    assert out.startswith(f"REMIRROR UNKNOWN - {broken}:"), out


def test_the_textfile_is_valid_prometheus_text_replaced_atomically(
    mirror: dict[str, str], tmp_path: Path
) -> None:
    wait_in_sync()  # the test before leaves the mirror MIRRORED
    remirror("metrics", LAB, "--textfile", str(tmp_path))
    textfile = tmp_path / "remirror_lab.prom"
    first = textfile.stat().st_ino
    remirror("metrics", LAB, "--textfile", str(tmp_path))
    assert textfile.stat().st_ino != first  # a new file renamed over the old: never half-written
    assert [p.name for p in tmp_path.iterdir()] == ["remirror_lab.prom"]  # no temporary file left
    every = [s for family in text_string_to_metric_families(textfile.read_text()) for s in family.samples]
    assert {s.labels.get("profile") for s in every} == {"lab"}  # two profiles' series never clash
    samples = {(s.name, tuple(sorted(s.labels.items() - {("profile", "lab")}))): s.value for s in every}
    assert samples[("remirror_build_info", (("version", __version__),))] == 1
    leg = (("leg", "site-b"), ("mirror", "lab0"), ("role", "replica"))
    assert samples[("remirror_mirror_state", (("mirror", "lab0"), ("state", "MIRRORED")))] == 1
    assert samples[("remirror_leg_out_of_sync_bytes", leg)] == 0
    assert samples[("remirror_session_up", leg)] == 1
    assert samples[("remirror_rpo_seconds", leg)] == 0
    assert samples[("remirror_write_behind_limit", (("mirror", "lab0"),))] == 1024
    assert abs(samples[("remirror_check_timestamp_seconds", ())] - time.time()) < 600


def test_a_resync_limit_from_the_profile_is_mds_own_changes_live_and_holds_on_a_10_mbit_link(
    mirror: dict[str, str], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    wait_in_sync()
    limit_kib = 256  # a fifth of what a 10 Mbit/s link carries (1.2 MB/s)
    limited = variant(
        tmp_path,
        "limited.yaml",
        **{
            "      on_link_loss: degrade\n": f"      on_link_loss: degrade\n      resync_max: {limit_kib}KiB\n"
        },
    )
    md = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    (member,) = [state.parent.name.removeprefix("dev-") for state in md.glob("dev-sd*/state")]
    leg, replica_disk = f"/dev/{member}", "/dev/lab/b0"
    try:
        _, out, _ = remirror("apply", "--yes", limited)
        assert "SetResyncLimit" in out, out
        assert "CreateArray" not in out  # live, on the running array
        # KiB/s, this array's own; its floor with it (md holds a resync to its limit only above it).
        assert (md / "sync_speed_max").read_text().split() == [str(limit_kib), "(local)"]
        assert (md / "sync_speed_min").read_text().split() == [str(limit_kib), "(local)"]
        assert status()["resync_max_bytes_per_second"] == limit_kib * 1024
        # A resync over a 10 Mbit/s link: the replica's leg out, 16 MiB written, the leg back.
        net.apply_wan(Wan(rate="10mbit"))
        sh("mdadm", MD, "--fail", leg)
        sh("mdadm", MD, "--remove", leg)
        write_random(100 * MiB, 16 * MiB)
        sh("mdadm", MD, "--re-add", leg)  # a bitmap resync of the 16 chunks written
        deadline = time.monotonic() + 30
        while md_sysfs("sync_action") not in ("recover", "resync"):
            assert time.monotonic() < deadline, md_sysfs("sync_action")
            time.sleep(0.2)
        # md counts a resync's progress as its writes complete and lets up to 2 MiB be in flight
        # (raid1's 32 resync buffers of 64 KiB): on a slow link the first seconds run ahead of
        # the limit while that fills. What it holds to is the rate after.
        time.sleep(4)
        first, started = probes.sectors_written(replica_disk), time.monotonic()
        time.sleep(10)
        rate = (probes.sectors_written(replica_disk) - first) * 512 / (time.monotonic() - started)
        record_property("resync_bytes_per_second_at_limit", round(rate))
        assert md_sysfs("sync_action") in ("recover", "resync")  # still going: held to the limit
        # At the limit (md measures over whole seconds: a little over at most), not at the
        # link's 1.2 MB/s.
        assert limit_kib * 1024 / 2 < rate < limit_kib * 1024 * 1.25, rate
        # A profile without one leaves md's limits alone (an operator may have tuned them).
        (md / "sync_speed_max").write_text("system\n")  # and the resync finishes at the link's pace
        _, out, _ = remirror("apply", "--yes", LAB)
        assert "SetResyncLimit" not in out, out
        assert (md / "sync_speed_min").read_text().split() == [str(limit_kib), "(local)"]
    finally:
        for name in ("sync_speed_max", "sync_speed_min"):
            (md / name).write_text("system\n")
        net.clear_wan()
    wait_in_sync()


def test_a_schedules_window_takes_its_limit_at_its_edge_and_status_says_which(
    mirror: dict[str, str], tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    """`replication.schedule` by the lab's clock: a one-minute window opening at the next minute
    but one, `unlimited` outside it. A watch whose interval is ten minutes sets the window's
    limit a moment after its edge: it wakes at the edge, not on its timer."""
    wait_in_sync()
    start = (datetime.now().astimezone() + timedelta(seconds=30)).replace(second=0, microsecond=0)
    start += timedelta(minutes=1)
    end = start + timedelta(minutes=1)
    window, limit_kib = f"{start:%H:%M}-{end:%H:%M}", 256
    scheduled = variant(
        tmp_path,
        "scheduled.yaml",
        **{
            "      on_link_loss: degrade\n": "      on_link_loss: degrade\n      schedule:\n"
            f'        "{window}": {limit_kib}KiB\n        default: unlimited\n'
        },
    )
    md = Path(f"/sys/block/{Path(MD).resolve().name}/md")
    log = tmp_path / "watch.log"
    watcher: subprocess.Popen[bytes] | None = None
    try:
        remirror("apply", "--yes", scheduled)
        assert datetime.now().astimezone() < start, "the apply ran into the window: the lab is too slow"
        assert (md / "sync_speed_max").read_text().split()[1] == "(system)"  # unlimited before it
        with log.open("w") as out:
            watcher = subprocess.Popen(
                ["remirror", "watch", scheduled, "--interval", "600"], stdout=out, stderr=subprocess.STDOUT
            )
        deadline = start + timedelta(seconds=60)  # the watch's timer would wait 600 s
        while (md / "sync_speed_max").read_text().split() != [str(limit_kib), "(local)"]:
            assert datetime.now().astimezone() < deadline, log.read_text()
            time.sleep(0.5)
        seen = datetime.now().astimezone()
        record_property("schedule_limit_set_after_the_edge_seconds", round((seen - start).total_seconds(), 1))
        assert seen >= start  # at the edge, not before
        assert (md / "sync_speed_min").read_text().split() == [str(limit_kib), "(local)"]
        (shown,) = json.loads(remirror("status", "-o", "json", scheduled)[1])["mirrors"]
        now = shown["resync_schedule"]
        assert (now["bytes_per_second"], now["window"]) == (limit_kib * 1024, window), now
        assert datetime.fromisoformat(now["until"]) == end, now
        text = remirror("status", scheduled)[1]
        assert f"resync limit 2.1Mbit/s by the schedule: window {window}, until {end:%a %H:%M}" in text, text
    finally:
        if watcher is not None:
            watcher.terminate()
            watcher.wait(timeout=300)
        for name in ("sync_speed_max", "sync_speed_min"):
            (md / name).write_text("system\n")
        remirror("apply", "--yes", LAB)  # the applied record back to the lab's own


def received_from_site_b() -> int:
    """Bytes site A has received on the link from site B (the veth's counter)."""
    return int(Path(f"/sys/class/net/{VETH_A}/statistics/rx_bytes").read_text())


def verify(*args: str, ok_codes: tuple[int, ...] = (0,)) -> dict[str, Any]:
    code, out, err = remirror("verify", "-o", "json", LAB, "lab0", *args, ok_codes=ok_codes)
    document = json.loads(out)
    assert document["exit_code"] == code, out + err
    assert isinstance(document, dict)
    return document


def test_verify_finds_exactly_the_bytes_changed_behind_md_moving_only_digests(
    mirror: dict[str, str], record_property: Callable[[str, object], None]
) -> None:
    wait_in_sync()  # the test before leaves the mirror MIRRORED
    size = int(sh("blockdev", "--getsize64", MD).stdout)
    before = received_from_site_b()
    healthy = verify()
    over_the_link = received_from_site_b() - before
    record_property("verify_link_bytes_for_whole_mirror", over_the_link)
    record_property("verify_digest_bytes_from_site_b", healthy["bytes_received"]["site-b"])
    record_property("mirror_bytes", size)
    assert healthy["mismatched"] == []
    assert healthy["busy"] == []
    assert healthy["range"] == {"offset": 0, "length": size}
    # md's `check` would read all of the remote leg over the link; verify moves digests and SSH.
    assert over_the_link < size // 100, over_the_link
    # Change 4 KiB on the replica's disk behind md's and LIO's back.
    examined = on_b("mdadm", "--examine", "/dev/lab/b0").stdout
    data_offset = parse_data_offset(examined)
    assert data_offset is not None, examined
    at = 100 * MiB + 8 * 1024
    on_b(
        "dd", "if=/dev/urandom", "of=/dev/lab/b0", "bs=4096", "count=1", f"seek={data_offset + at}",
        "oflag=direct,seek_bytes", "status=none",
    )  # fmt: skip
    # A range around it (the whole mirror was shown above; each pass hashes all it covers).
    found = verify("--range", "96MiB:16MiB", ok_codes=(1,))  # as cmp: 1, they differ
    assert found["mismatched"] == [{"offset": 100 * MiB, "length": MiB}]  # the 1 MiB chunk holding it
    narrow = verify("--range", "100MiB:1MiB", "--chunk", "4KiB", ok_codes=(1,))
    assert narrow["mismatched"] == [{"offset": at, "length": 4096}]  # exactly the bytes changed
    # Repair by writing the primary's copy through md (reads stay on the primary: the replica is write-mostly).
    fd = os.open(MD, os.O_RDWR | os.O_DIRECT | os.O_SYNC)
    try:
        buffer = mmap.mmap(-1, MiB)
        assert os.preadv(fd, [buffer], 100 * MiB) == MiB
        assert os.pwritev(fd, [buffer], 100 * MiB) == MiB
    finally:
        os.close(fd)
    wait_in_sync()
    assert verify("--range", "96MiB:8MiB")["mismatched"] == []


def test_verify_holds_its_rate_and_its_outcome_is_in_status_check_and_metrics(
    mirror: dict[str, str], record_property: Callable[[str, object], None]
) -> None:
    """`verify --rate`: what site B's disk reads during it, over its time, is the rate (a
    second's reading at a time); then `status`, `check` and `metrics` say what it found, and a
    verify of a range after it leaves that alone."""
    wait_in_sync()
    rate, span = 40_000_000, int(sh("blockdev", "--getsize64", MD).stdout)  # 6.6 s at the rate
    first, started = probes.sectors_read("/dev/lab/b0"), time.monotonic()
    paced = verify("--rate", "40MB/s")
    seconds = time.monotonic() - started
    read = (probes.sectors_read("/dev/lab/b0") - first) * 512
    record_property("verify_paced_bytes_per_second", round(read / seconds))
    assert paced["mismatched"] == []
    assert paced["rate_bytes_per_second"] == rate
    assert read >= span  # the whole range, read on the replica's own disk
    # Held to the rate on average: no faster (a request's second of slack, and the answers'
    # round trips, make it a little slower, never faster).
    assert read / seconds <= rate * 1.1, (read, seconds)
    assert seconds >= span / rate * 0.9, seconds
    status = json.loads(remirror("status", "-o", "json", LAB)[1])["mirrors"][0]["verify"]
    assert (status["result"], status["compared_bytes"], status["mismatched_bytes"]) == ("match", span, 0)
    assert abs(status["finished"] - time.time()) < 120
    _, metrics, _ = remirror("metrics", LAB)
    assert 'remirror_verify_last_result{profile="lab",mirror="lab0"} 0' in metrics
    assert 'remirror_verify_last_timestamp_seconds{profile="lab",mirror="lab0"} ' in metrics
    _, said, _ = remirror("check", LAB, ok_codes=(0, 1))
    assert "verify" not in said, said  # a verify that matched says nothing in check
    verify("--range", "0:4MiB")
    assert json.loads(remirror("status", "-o", "json", LAB)[1])["mirrors"][0]["verify"] == status


def test_verify_under_writes_reports_no_false_mismatch(mirror: dict[str, str]) -> None:
    wait_in_sync()
    with Writer(176 * MiB, 16 * MiB) as writer:
        time.sleep(2)
        found = verify("--range", "176MiB:16MiB", "--chunk", "256KiB", ok_codes=(0, 2))
    writer.check()
    assert found["mismatched"] == [], found  # writes in flight settle or show as busy, never as mismatches


def test_estimate_sees_the_primarys_writes_and_measures_the_link(mirror: dict[str, str]) -> None:
    wait_in_sync()
    with Writer(176 * MiB, 16 * MiB) as writer:
        writer.wait_writes(5)
        before, started = writer.bytes_written, time.monotonic()
        _, out, _ = remirror("estimate", "-o", "json", "--window", "6s", "--outage", "1h", LAB)
        rate = (writer.bytes_written - before) / (time.monotonic() - started)
    assert not writer.errors, writer.errors
    (found,) = json.loads(out)["mirrors"]
    assert found["sampled"] == MD  # the mirror runs: what the applications write to
    mean = found["writes"]["mean_bytes_per_second"]
    # The writer ran through the whole call, a little longer than the window sampled.
    assert 0.5 * rate <= mean <= 2 * rate, (mean, rate)
    assert found["writes"]["peak_bytes_per_second"] >= mean
    link = found["link"]
    assert link["measured"] is True, link
    assert link["bytes_per_second"] > 0, link
    assert link["rtt_seconds"] is not None, link
    # What a sync can copy is the link less the writes (the lab profile has no resync_max); with
    # the writer going as fast as the mirror let it, that can be nothing at all.
    room = max(0.0, link["bytes_per_second"] - mean)
    assert abs(found["sync_rate_bytes_per_second"] - room) <= 1e-6 * max(room, 1.0), found
    # `--link RATE` instead of a measurement, and the figures from the rates: tests/unit/test_estimate.py.
