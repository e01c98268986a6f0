"""What the benchmarks share: running commands, building and removing the lab's mirror, fio.

The benchmarks run inside a lab (`./dev bench`); results go to $LAB_OUT
(bench/out/ on the host). Under an emulated CPU the absolute numbers mean
little: every benchmark compares configurations measured in one run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

LAB_PROFILE = Path(__file__).resolve().parent.parent / "profiles" / "lab.yaml"
OUT = Path(os.environ.get("LAB_OUT", "bench/out"))
SECONDS = int(os.environ.get("BENCH_SECONDS", "60"))
MD = "/dev/md/lab0"
CAUTION = "lab: QEMU/TCG emulated CPU; compare the ratio, measured in one run, not absolute numbers"


def run(*argv: str, ok: tuple[int, ...] = (0,)) -> str:
    """Run a command; exit the benchmark with its error if it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if done.returncode not in ok:
        sys.exit(f"bench: {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout


def sync_profile(name: str, extra: dict[str, str], append: str = "") -> Path:
    """The lab profile in sync mode, with text replaced (`extra`) and appended; its path."""
    text = LAB_PROFILE.read_text().replace("mode: async", "mode: sync")
    text = text.replace(
        "      write_behind: 1024        # distinct from md's default 256, so tests can tell\n", ""
    )
    for old, new in extra.items():
        text = text.replace(old, new)
    path = Path("/run") / f"bench-{name}.yaml"
    path.write_text(text + append)
    return path


def wait_idle() -> None:
    """Until md has nothing to resync."""
    kernel = Path(MD).resolve().name
    while (
        Path(f"/sys/block/{kernel}/md/sync_action").read_text().strip() != "idle"
        or Path(f"/sys/block/{kernel}/md/degraded").read_text().strip() != "0"
    ):
        time.sleep(2)


def destroy(profile: Path, disks: tuple[str, ...]) -> None:
    """Take the mirror apart and wipe its disks for the next configuration."""
    run("remirror", "destroy", "--yes", str(profile), "lab0")
    for disk in disks:
        run("wipefs", "--all", "--quiet", disk)
        run("dd", "if=/dev/zero", f"of={disk}", "bs=1M", "count=8", "oflag=direct", "status=none")


def fio(
    device: str, rw: str, block: str, size: str = "32M", offset: str = "64M", sync: bool = True
) -> dict[str, float]:
    """One fio job at queue depth 1, O_DIRECT (and O_SYNC unless told): IOPS, bandwidth, latency."""
    report = json.loads(
        run(
            "fio", f"--name={rw}", f"--filename={device}", f"--rw={rw}", f"--bs={block}", "--iodepth=1",
            "--ioengine=psync", "--direct=1", f"--sync={int(sync)}", f"--size={size}", f"--offset={offset}",
            "--time_based", f"--runtime={SECONDS}", "--randrepeat=0", "--output-format=json",
        )
    )  # fmt: skip
    write = report["jobs"][0]["write"]
    clat = write["clat_ns"]
    return {
        "iops": write["iops"],
        "mb_per_s": write["bw_bytes"] / 1e6,
        "mean_ms": clat["mean"] / 1e6,
        "p50_ms": clat["percentile"]["50.000000"] / 1e6,
        "p99_ms": clat["percentile"]["99.000000"] / 1e6,
        "writes": write["total_ios"],
    }


def slow_disk_ms() -> int:
    """How much the lab slowed its data disks (0: not at all)."""
    from remirror.lab.spec import LAB_FILE

    disks = json.loads(Path(LAB_FILE).read_text())["disks"]
    return max(int(d.get("slow_ms", 0)) for d in disks if "fast" not in d["path"])


def write_report(name: str, result: dict[str, object], markdown: list[str]) -> None:
    """bench/out/NAME.json and NAME.md, and the JSON on stdout."""
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (OUT / f"{name}.md").write_text("\n".join([*markdown, "", CAUTION + ".", ""]))
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
