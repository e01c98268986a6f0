"""`remirror lab run` as the operator and CI use it: boots real VMs (about a minute each).

The host tier: needs qemu, virtme-ng and a Debian kernel (./dev setup), not
the lab itself. ./dev test runs it; the unit tier does not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REMIRROR = [sys.executable, "-m", "remirror"]


def test_the_command_runs_on_site_a_with_the_boot_options_and_its_exit_code_comes_back(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    script = (
        'cat /etc/iscsi/initiatorname.iscsi > "$LAB_OUT/iqn";'
        ' dmsetup table lab-a1 > "$LAB_OUT/a1.table"; dmsetup table lab-a-fast0 > "$LAB_OUT/fast.table";'
        ' blockdev --getsize64 /dev/lab/b1 > "$LAB_OUT/b1.size"; ls /dev/lab > "$LAB_OUT/disks";'
        ' tc qdisc show dev veth-a > "$LAB_OUT/qdisc"; echo to-stdout; exit 7'
    )
    done = subprocess.run(
        [
            *REMIRROR,
            *("lab", "run", "--disks", "2", "--disk-size", "64MiB", "--slow-disk-ms", "5"),
            *("--wan", "delay=3ms,rate=100mbit", "--out", str(out), "--", "sh", "-c", script),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 7, done.stderr
    assert "to-stdout" in done.stdout.splitlines()
    assert (out / "iqn").read_text().strip() == "InitiatorName=iqn.2026-11.org.remirror.lab:site-a"
    assert (out / "disks").read_text().split() == ["a-fast0", "a0", "a1", "b-fast0", "b0", "b1"]
    assert int((out / "b1.size").read_text()) == 64 * 1024**2
    # Data disks are slowed (dm-delay, 5 ms), cache disks are not.
    assert " delay " in (out / "a1.table").read_text()
    assert (out / "a1.table").read_text().split()[-1] == "5"
    assert " linear " in (out / "fast.table").read_text()
    qdisc = (out / "qdisc").read_text()
    assert "netem" in qdisc
    assert "delay 3ms" in qdisc
    assert "rate 100Mbit" in qdisc
    assert (out / "lab-setup.log").exists()
    assert "lab is up after" in done.stderr


def test_the_console_does_not_overwrite_a_log_file(tmp_path: Path) -> None:
    log = tmp_path / "log"
    with log.open("w") as handle:
        handle.write("BEFORE THE LAB\n")
        handle.flush()
        done = subprocess.run(
            [*REMIRROR, "lab", "run", "--disks", "1", "--", "echo", "FROM THE LAB"],
            stdout=handle,
            stderr=subprocess.STDOUT,
            timeout=900,
        )
    text = log.read_text()
    assert done.returncode == 0
    assert text.startswith("BEFORE THE LAB\n")
    assert "FROM THE LAB" in text


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
