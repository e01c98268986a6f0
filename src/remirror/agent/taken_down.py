"""The mark of a leg's own points taken down at their site: by its operator (`remirror cdp
down --leg`) or its own `destroy`. Neither its `cdp run`, its `cdp` verbs nor another site's
apply bring them back while it is there; `cdp up --leg` or the site's own apply remove it, and
points laid new on the disk are new, unmarked (remirror.agent.own_points, remirror.agent.cdp).
"""

from __future__ import annotations

import os
from pathlib import Path

TAKEN_DOWN_DIR = Path("/var/lib/remirror/points")


def taken_down_mark(key: str) -> Path:
    """The file that says the site's operator took the points of `key` (MIRROR.SITE) down."""
    return TAKEN_DOWN_DIR / f"{key}.down"


def mark_taken_down(key: str, by: str) -> None:
    """Say that the points of `key` were taken down here (`by`: which verb), on the disk before
    anything is removed (a power cut right after must not lose it)."""
    TAKEN_DOWN_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(taken_down_mark(key), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, f"taken down by this site's {by}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    directory = os.open(TAKEN_DOWN_DIR, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


# Set by `remirror agent --serve` for requests from another host (remirror.agent.serve): the
# mark of points taken down here holds against them, not against this site's own apply.
FROM_ANOTHER_HOST = False
