"""What every benchmark script needs and nothing of a lab: the fio job's length, progress
lines, running a command. It runs wherever a workload runs: inside the single-VM lab
(bench/suite.py, through bench/common.py) and on a host of the hosts' lab (bench/peer.py
copies bench/workloads.py and this file there, where no lab profile exists).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

SECONDS = int(os.environ.get("BENCH_SECONDS", "15"))


def log(message: str) -> None:
    """Progress on stderr (the lab's log), so a run cut off shows how far it got."""
    sys.stderr.write(f"bench {time.strftime('%H:%M:%S')}: {message}\n")
    sys.stderr.flush()


def run(*argv: str, ok: tuple[int, ...] = (0,), timeout: float = 1800) -> str:
    """Run a command; exit the benchmark with its error if it fails."""
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout)
    if done.returncode not in ok:
        sys.exit(f"bench: {' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return done.stdout


def site_costs(stderr: str) -> dict[str, dict[str, int]]:
    """The per-site cost lines `remirror -v` logs when it closes its connections (the
    controller's count: requests to each site's agent, the commands it ran, answers' bytes)."""
    costs = {}
    for site, requests, commands, answered in re.findall(
        r"site (\S+): (\d+) agent requests, (\d+) commands run, (\d+) bytes of answers", stderr
    ):
        costs[site] = {"requests": int(requests), "commands": int(commands), "answer_bytes": int(answered)}
    return costs
