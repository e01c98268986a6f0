"""Where remirror logs: stderr, one prefix, a level chosen on the command line.

Under systemd, stderr is the journal's stream: each line then starts with the
kernel-style priority prefix (`<3>` for an error, sd-daemon(3)) that journald
reads as the line's priority, so that `journalctl -p warning` shows remirror's
warnings and errors and not every line at `info`.
"""

from __future__ import annotations

import logging
import os
import sys

# logging's levels as syslog priorities (sd-daemon(3): <3> error, <4> warning, <6> info, <7> debug)
PRIORITY = {logging.DEBUG: 7, logging.INFO: 6, logging.WARNING: 4, logging.ERROR: 3, logging.CRITICAL: 2}


def to_journal() -> bool:
    """Whether stderr is systemd's journal stream: $JOURNAL_STREAM names its device and inode
    (systemd.exec(5)), which a pipe or a terminal the process was given does not match."""
    device, _, inode = os.environ.get("JOURNAL_STREAM", "").partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        seen = os.fstat(sys.stderr.fileno())
    except (OSError, ValueError):  # no stderr, or not a real file
        return False
    return (seen.st_dev, seen.st_ino) == (int(device), int(inode))


def journal_prefix(level: int) -> str:
    """The priority prefix for a line at `level`, when stderr is the journal's; "" otherwise."""
    return f"<{PRIORITY.get(level, 6)}>" if to_journal() else ""


class _PriorityFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return journal_prefix(record.levelno) + super().format(record)


def setup_logging(verbose: int, debug: bool) -> None:
    """Logs to stderr: warnings by default, -v info, --debug everything."""
    level = logging.DEBUG if debug else logging.INFO if verbose else logging.WARNING
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PriorityFormatter("remirror: %(levelname)s: %(message)s"))
    root = logging.getLogger("remirror")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False
