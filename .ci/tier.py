"""Run one tier of `./dev test`, print its time, and hold it to a budget.

    python3 .ci/tier.py NAME [--budget MINUTES] [--prefix TEXT] -- COMMAND [ARGS...]

CI stops a run at 90 minutes, and a run cut off there says nothing about
why. A tier with a budget is stopped when it passes it, with one line that
says so, so that a slow change is caught by its own CI run, with a message.
The decision is `verdict`, which tests/unit/test_ci_tier.py checks.
`--prefix`: each line the tier prints (stdout and stderr) starts with TEXT, for
a tier that runs beside another (./dev test runs the two VM tiers at once).
Standard library only: it runs before and beside the venv.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from typing import IO


def minutes(seconds: float) -> str:
    """12m03s."""
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s"


def verdict(name: str, returncode: int | None, seconds: float, budget: float | None) -> tuple[int, str]:
    """The tier's exit code and the line that reports it.

    `returncode` None: the tier was stopped at its budget. A tier that ends
    past its budget (it was not stopped in time) fails too: the budget is
    what keeps the whole run inside CI's limit.
    """
    took = f"tier {name}: {minutes(seconds)}"
    if budget is None:
        return (1 if returncode is None else returncode), f"{took}, exit {returncode}"
    allowed = f"budget {minutes(budget)}"
    if returncode is None or seconds > budget:
        return 1, (
            f"{took}: FAILED: the {name} tier passed its {allowed} (CI stops a run at 90m):"
            " make the product or the tests cheaper (docs/lab.md, Cost), or raise the budget in ./dev"
        )
    return returncode, f"{took} of its {allowed}, exit {returncode}"


def _copy_prefixed(stream: IO[bytes], prefix: bytes) -> None:
    """Each line of `stream` to our stdout with `prefix` before it, as it comes."""
    for line in iter(stream.readline, b""):
        sys.stdout.buffer.write(prefix + line)
        sys.stdout.buffer.flush()


def run(command: list[str], budget: float | None, prefix: str | None = None) -> tuple[int | None, float]:
    """Run `command` in its own process group; (exit code or None if stopped at the budget, seconds)."""
    started = time.monotonic()
    piped = subprocess.PIPE if prefix is not None else None
    # Through a pipe, a Python child (pytest) buffers its stdout and not its stderr: unbuffered,
    # its lines keep their order, and none is lost when the tier is stopped.
    env = {**os.environ, "PYTHONUNBUFFERED": "1"} if piped else None
    proc = subprocess.Popen(
        command, start_new_session=True, stdout=piped, stderr=subprocess.STDOUT if piped else None, env=env
    )
    copier = None
    if proc.stdout is not None and prefix is not None:
        copier = threading.Thread(target=_copy_prefixed, args=(proc.stdout, prefix.encode()), daemon=True)
        copier.start()
    try:
        returncode: int | None = proc.wait(timeout=budget)
    except subprocess.TimeoutExpired:
        returncode = None
        _stop_group(proc)
    except KeyboardInterrupt:
        _stop_group(proc)
        if copier is not None:
            copier.join(timeout=5)
        raise
    if copier is not None:
        # What the tier printed last; a child it left holding the pipe is not waited for.
        copier.join(timeout=30)
    return returncode, time.monotonic() - started


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """TERM to the command's process group, then KILL if it has not ended 30 s later."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _stopped(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="tier.py", description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("--budget", type=float, metavar="MINUTES", help="stop the tier and fail past this")
    parser.add_argument("--prefix", metavar="TEXT", help="start each line the tier prints with TEXT")
    parser.add_argument("command", nargs="+")
    args = parser.parse_args(argv)
    # A tier run in the background (the hosts' tier beside the lab's) ignores SIGINT, as a
    # script's shell starts it: ./dev stops it with SIGTERM, which stops its command's group too.
    before = signal.signal(signal.SIGTERM, _stopped)
    budget = args.budget * 60 if args.budget is not None else None
    try:
        returncode, seconds = run(args.command, budget, args.prefix)
    finally:
        signal.signal(signal.SIGTERM, before)
    code, line = verdict(args.name, returncode, seconds, budget)
    sys.stderr.write(f"{args.prefix or ''}ci: {line}\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
