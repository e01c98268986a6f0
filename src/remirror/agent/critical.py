"""Sections of a step that must run to their end once begun.

Some steps leave an array in a state nobody should find it in if they stop
half-way: `local_leg_last` (remirror.agent.md_slots) holds every write to
the array while it takes the local leg out and puts it back. Inside such a
section the signals that end a command (SIGINT from a terminal, SIGTERM,
SIGHUP) are held back, in this thread and in the commands it starts, which
inherit the mask; an agent whose controller went away waits for the
section before it ends itself and what it started (remirror.agent.serve).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

_ENDING = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
_section = threading.Lock()


@contextlib.contextmanager
def must_finish() -> Iterator[None]:
    """Run the block to its end: the signals that end a command wait until it is done."""
    with _section:
        before = signal.pthread_sigmask(signal.SIG_BLOCK, _ENDING)
        try:
            yield
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


def wait_for_sections() -> None:
    """Until no section is running, and none starts after: an agent about to end itself calls it
    first, and ends next (a section begun between the wait and the end would be cut)."""
    _section.acquire()  # kept: the process ends holding it
