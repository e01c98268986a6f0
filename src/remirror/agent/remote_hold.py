"""How long another host's controller may hold this site's lock (issue 44).

A remote controller takes the site's `site` lock for a command (apply, destroy, a reconcile
pass, a promotion), and its agent holds it for as long as it runs. A controller that stops
asking while holding it (hung, or in an attacker's hands) would hold back everything the DR
site does under that lock, its own promotion among them. So the agent lets go of it after
REMOTE_LOCK_IDLE seconds without a request, or REMOTE_LOCK_HOLD in all, and refuses that
controller's further steps and locks until it lets go itself (`unlock`): its command fails with
one line, and the next one starts afresh. A controller may ask for shorter bounds
(REMIRROR_REMOTE_LOCK_IDLE and _HOLD in its agent's environment), never longer ones.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from remirror.agent import lock
from remirror.agent.protocol import PROTOCOL_VERSION

REMOTE_LOCK_IDLE = 600.0  # a reconcile pass or a plan's step takes seconds to minutes
REMOTE_LOCK_HOLD = 7200.0  # a whole apply with a first sync's proof of blank disks included


def _bound(name: str, default: float) -> float:
    """The default, or the environment's shorter one."""
    try:
        asked = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return min(default, asked) if asked > 0 else default


class RemoteHold:
    """The site lock as one remote controller's agent holds it (serve.py's request loop)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.idle = _bound("REMIRROR_REMOTE_LOCK_IDLE", REMOTE_LOCK_IDLE)
        self.hold = _bound("REMIRROR_REMOTE_LOCK_HOLD", REMOTE_LOCK_HOLD)
        self.since: float | None = None  # when the lock was taken
        self.last = clock()  # the last request
        self.lapsed = ""  # why the hold ended, until the controller lets go itself

    def wait(self) -> float | None:
        """How long the loop may wait for the next request before `lapse`; None: for ever."""
        if self.since is None:
            return None
        return max(0.0, min(self.last + self.idle, self.since + self.hold) - self.clock())

    def lapse(self) -> None:
        """Let go of the lock once a bound is past."""
        if self.since is None or (self.wait() or 0.0) > 0:
            return
        now = self.clock()
        held, quiet = now - self.since, now - self.last
        lock.release(lock.SITE_LOCK)
        self.since = None
        self.lapsed = (
            f"this controller's hold of the site lock ended after {quiet:.0f} s without a request"
            f" ({held:.0f} s in all; at most {self.idle:g} and {self.hold:g}): run the command again"
        )

    def refusal(self, request: Any) -> dict[str, Any] | None:
        """The answer to a step or a lock asked after the hold lapsed; None otherwise."""
        op = request.get("op") if isinstance(request, dict) else None
        if not self.lapsed or op not in ("run", "lock"):
            return None
        return {
            "protocol": PROTOCOL_VERSION,
            "error": f"refused: {self.lapsed}",
            "refused": True,
            "commands": 0,
        }

    def answered(self, request: Any, answer: dict[str, Any]) -> None:
        """Note a request and its answer."""
        self.last = self.clock()
        op = request.get("op") if isinstance(request, dict) else None
        if op == "lock" and answer.get("locked") is not None and self.since is None:
            self.since = self.last
        elif op == "unlock":
            self.since, self.lapsed = None, ""
