"""`remirror lab run` as the operator and CI use it: boots real VMs (about a minute each).

The host tier: needs qemu, virtme-ng and a Debian kernel (./dev setup), not
the lab itself. ./dev test runs it; the unit tier does not.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REMIRROR = [sys.executable, "-m", "remirror"]


def test_the_command_runs_on_site_a_with_the_boot_options_and_its_exit_code_comes_back(
    tmp_path: Path,
) -> None:
    """One boot (about a minute) shows it all: the options, the exit code, and that the console
    does not overwrite a log file the output goes to (QEMU reopens the file it is given and writes
    from offset 0: CI logs, `./dev test > log`)."""
    out, log = tmp_path / "out", tmp_path / "log"
    nullb = "/sys/kernel/config/nullb/nullb"
    script = (
        'cat /etc/iscsi/initiatorname.iscsi > "$LAB_OUT/iqn"; cp /etc/remirror/lab/lab.json "$LAB_OUT/";'
        f' cat {nullb}-a1/completion_nsec {nullb}-a1/hw_queue_depth > "$LAB_OUT/a1.nullb";'
        f' cat {nullb}-b-fast0/completion_nsec > "$LAB_OUT/fast.nullb";'
        " cd /sys/block/nullb-a1/queue && cat nr_requests iosched/async_depth rotational wbt_lat_usec"
        ' > "$LAB_OUT/a1.queue"; cat /sys/block/nullb-b-fast0/queue/rotational > "$LAB_OUT/fast.rotational";'
        ' blockdev --getsize64 /dev/lab/a-fast0 > "$LAB_OUT/fast.size"; cd /;'
        # md RAID1 over two modelled disks sends its legs queued writes two at a time, as to
        # the disk alone (writeback throttling, on, let them through one at a time).
        # Sampled from before the first write to after the last (a sampler started after them
        # missed them all on a fast day). One fio keeps sixteen queued for 64 writes: sixteen
        # dd processes, started one after another, reached md one at a time on a slow day.
        " mdadm --create /dev/md/t --run --level=1 --raid-devices=2 --metadata=1.2 --bitmap=none"
        " --assume-clean /dev/lab/a0 /dev/lab/a1 2>/dev/null; udevadm settle;"
        " (while [ ! -e /tmp/md-writes-done ]; do cat /sys/block/nullb-a0/inflight; sleep 0.02; done"
        ' > "$LAB_OUT/md.inflight") & sampler=$!;'
        " fio --name=md --filename=/dev/md/t --direct=1 --ioengine=libaio --iodepth=16"
        " --rw=randwrite --bs=4k --size=32M --io_size=256k --output=/dev/null;"
        " touch /tmp/md-writes-done; wait $sampler; mdadm --stop /dev/md/t 2>/dev/null;"
        ' dmsetup deps -o devname lab-a1 > "$LAB_OUT/a1.deps";'
        # Five 4 KiB writes one at a time: each waits at least half the modelled service time.
        " s=$(date +%s%N); dd if=/dev/zero of=/dev/lab/a1 bs=4k count=5 oflag=direct status=none;"
        ' echo $(( ($(date +%s%N) - s) / 1000000 )) > "$LAB_OUT/five-writes.ms";'
        # Sixteen at once: a disk serves two at a time, so they queue (dm-delay would not).
        " s=$(date +%s%N); for i in $(seq 16); do"
        " dd if=/dev/zero of=/dev/lab/a1 bs=4k count=1 seek=$((i * 97)) oflag=direct status=none & done; wait;"
        ' echo $(( ($(date +%s%N) - s) / 1000000 )) > "$LAB_OUT/sixteen-writes.ms";'
        ' blockdev --getsize64 /dev/lab/b1 > "$LAB_OUT/b1.size"; ls /dev/lab > "$LAB_OUT/disks";'
        ' tc qdisc show dev veth-a > "$LAB_OUT/qdisc"; echo to-stdout; exit 7'
    )
    with log.open("w") as handle:
        handle.write("BEFORE THE LAB\n")
        handle.flush()
        done = subprocess.run(
            [
                *REMIRROR,
                *("lab", "run", "--disks", "2", "--disk-size", "64MiB", "--fast-disk-size", "32MiB"),
                *("--disk-model", "hdd"),
                *("--wan", "delay=3ms,rate=100mbit", "--out", str(out), "--", "sh", "-c", script),
            ],
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    said = log.read_text()
    assert done.returncode == 7, said
    assert said.startswith("BEFORE THE LAB\n"), said
    assert "to-stdout" in said.splitlines()
    assert (out / "iqn").read_text().strip() == "InitiatorName=iqn.2026-11.org.remirror.lab:site-a"
    assert (out / "disks").read_text().split() == ["a-fast0", "a0", "a1", "b-fast0", "b0", "b1"]
    assert int((out / "b1.size").read_text()) == 64 * 1024**2
    # The time dilation was measured at boot against this host, every probe slower in the guest.
    performance = json.loads((out / "lab.json").read_text())["performance"]
    dilation = performance["dilation"]
    assert dilation["measured"] is True
    assert set(dilation["ratios"]) == {"cpu", "syscall", "tcp_round_trip", "block_write"}
    assert all(ratio > 1 for ratio in dilation["ratios"].values()), dilation
    factor = dilation["factor"]
    assert performance["declared"]["hdd"]["random_iops"] == 200
    assert performance["queue"]["hdd"]["wbt_lat_usec"] == "0"  # lab.json records the queue's settings
    # Data disks are HDDs dilated by that factor (10 ms per request, two at a time), cache
    # disks SSDs (60 us); both null_blk under the lab's dm name.
    # The guest's own time per request, measured on a scratch disk, comes off the HDDs' 10 ms.
    taken_off = performance["request_overhead"]["taken_off_s"]
    assert 0 <= taken_off <= 0.010 * factor / 2
    assert (out / "a1.nullb").read_text().split() == [str(round((0.010 * factor - taken_off) * 1e9)), "2"]
    assert (out / "fast.nullb").read_text().strip() == str(round(60e3 * factor))
    assert (out / "fast.size").read_text().strip() == str(32 * 1024**2)
    # Room to queue in front of it, 3/4 of it for writes, rotational, no writeback throttling.
    assert (out / "a1.queue").read_text().split() == ["64", "48", "1", "0"]
    assert (out / "fast.rotational").read_text().strip() == "0"
    in_flight = [int(line.split()[1]) for line in (out / "md.inflight").read_text().splitlines()]
    assert max(in_flight) == 2, in_flight
    assert "nullb" in (out / "a1.deps").read_text()
    assert int((out / "five-writes.ms").read_text()) >= 5 * 5 * factor
    assert int((out / "sixteen-writes.ms").read_text()) >= 16 / 2 * 5 * factor
    # The WAN is a physical link: 3 ms and 100 Mbit/s, dilated.
    qdisc = (out / "qdisc").read_text()
    assert "netem" in qdisc
    delay = re.search(r"delay ([\d.]+)(ms|s)", qdisc)
    assert delay is not None, qdisc
    assert float(delay.group(1)) * (1000 if delay.group(2) == "s" else 1) == pytest.approx(
        3 * factor, rel=0.01
    )
    rate = re.search(r"rate (\d+)([KM])bit", qdisc)
    assert rate is not None, qdisc
    assert int(rate.group(1)) * (1000 if rate.group(2) == "M" else 1) == pytest.approx(
        100_000 / factor, rel=0.01
    )
    assert (out / "lab-setup.log").exists()
    assert "lab is up after" in said


def test_a_lab_that_cannot_come_up_in_time_exits_124_and_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [*REMIRROR, "lab", "run", "--timeout", "3s", "--", "true"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 124
    assert "lab: the lab timed out after 3s" in done.stderr


def test_bad_lab_options_exit_3_without_booting() -> None:
    done = subprocess.run(
        [*REMIRROR, "lab", "run", "--disks", "0", "--", "true"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 3
    assert done.stderr.strip() == "remirror: lab: --disks must be 1 to 16"


def _processes_naming(text: str) -> list[int]:
    """Processes whose command line names `text`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # ended meanwhile
    return found


def test_a_term_stops_the_lab_and_its_vm_and_leaves_nothing_behind(tmp_path: Path) -> None:
    # QEMU runs in a session of its own: a CI tier stopped at its guard (a TERM to its group)
    # must not leave it running beside the tier that goes on.
    lab = subprocess.Popen(
        [*REMIRROR, "lab", "run", "--", "sleep", "600"],
        env={**os.environ, "REMIRROR_LAB_TMPDIR": str(tmp_path)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not [pid for pid in _processes_naming(str(tmp_path)) if pid != lab.pid]:
            assert lab.poll() is None, lab.stderr.read() if lab.stderr else ""
            assert time.monotonic() < deadline, "QEMU did not start"
            time.sleep(0.5)
        lab.send_signal(signal.SIGTERM)
        lab.wait(timeout=60)
    finally:
        if lab.poll() is None:
            lab.kill()
            lab.wait()
    assert lab.returncode != 0
    assert _processes_naming(str(tmp_path)) == []  # no QEMU (nor virtme-ng) left
    assert list(tmp_path.iterdir()) == []  # its work directory gone
