"""A writer that says what was acknowledged: run on a host, read from the test runner.

`python3 writer.py FILE` appends 4 KiB records to FILE, each numbered, and after each one's
fsync returns prints its number: what the runner has read was acknowledged to the
application before the power went. `python3 writer.py --check FILE LAST` says whether
records 0..LAST are all there, whole; exit 0 if so. Standard library only: it runs on the
hosts with Debian's python3, outside remirror's venv.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

RECORD = 4096


def record(number: int) -> bytes:
    head = f"record {number:09d}\n".encode()
    return head + bytes([number % 251]) * (RECORD - len(head) - 1) + b"\n"


def write(path: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    number = os.fstat(fd).st_size // RECORD
    while True:
        os.write(fd, record(number))
        os.fsync(fd)
        print(number, flush=True)  # noqa: T201 - the acknowledgement, to the runner
        number += 1


def check(path: str, last: int) -> int:
    with Path(path).open("rb") as data:
        for number in range(last + 1):
            if data.read(RECORD) != record(number):
                print(f"record {number} of 0..{last} is missing or torn in {path}")  # noqa: T201
                return 1
    print(f"records 0..{last} are all in {path}")  # noqa: T201 - the verdict
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--check":
        sys.exit(check(sys.argv[2], int(sys.argv[3])))
    write(sys.argv[1])
