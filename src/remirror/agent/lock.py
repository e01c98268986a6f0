"""Locks on a site (docs/safety.md, flow 6): one verb at a time changes a site's storage stack,
and one at a time writes a mirror's CDP index.

A lock is `flock` on a file in LOCK_DIR, held by the process that changes
the site: the controller itself for its own site, the remote agent (`agent
--serve`, one per controller command) for the others. The kernel lets go of
it when that process ends, however it ends: a controller killed mid-apply
leaves no lock behind, and an agent that lost its controller ends itself
(remirror.agent.serve). The file says who holds it, for the busy message.

Names: `site` (apply, destroy, promote, failback, resolve, a reconcile pass)
and `cdp-MIRROR` (a point, a pruning, a rollback, a restore, the stack's
set-up: each reads the index, changes the pool and writes the index back).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from remirror.errors import RemirrorError

# /run/lock: gone at every boot, as a lock's holder is.
LOCK_DIR = Path(os.environ.get("REMIRROR_LOCK_DIR", "/run/lock/remirror"))
SITE_LOCK = "site"
POLL_SECONDS = 0.2
# A remote controller's hold of a lock is a lease (remirror.agent.serve): it lapses after this many
# seconds without a request from it (one running counts), and the agent ends, its locks with it.
# The controller keeps it alive between its requests (remirror.agent.client), so only a controller
# that stopped (suspended, hung, its link silent) loses it. The site's own operator may set it
# (REMIRROR_LOCK_LEASE in the forced command of authorized_keys). A client sets none of the
# agent's environment unless the site's sshd accepts it (AcceptEnv: Debian's takes LANG and LC_*
# alone; PermitUserEnvironment is off): docs/security.md says to keep it so.
LEASE_SECONDS = 120.0
# Held by a forced promotion at this site while it runs (remirror.agent.remote_holders): nobody
# else takes the site's lock meanwhile (take, below; a remote controller is refused it at once).
FORCED_LOCK = "forced"

_held: dict[str, int] = {}  # name -> fd, in this process
_guard = threading.Lock()  # the controller asks its local site from a thread pool


class Busy(RemirrorError):
    """Someone else holds the lock."""


def take(name: str, holder: str, wait: float = 0.0) -> bool:
    """Hold lock `name` for `holder` (who we are, for others' busy message), waiting up to `wait`
    seconds for it. True when taken now, False when this process already held it. Busy if not."""
    with _guard:
        if name in _held:
            return False
        LOCK_DIR.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(LOCK_DIR / f"{name}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait
    yielded = False  # to a forced promotion at this site, which goes first
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            yielded = name == SITE_LOCK and FORCED_LOCK not in _held and held_elsewhere(FORCED_LOCK)
            if yielded:
                fcntl.flock(fd, fcntl.LOCK_UN)
                raise BlockingIOError
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                other = "a forced promotion" if yielded else _read_holder(fd)
                os.close(fd)
                waited = f" (waited {wait:g} s)" if wait else ""
                raise Busy(
                    f"busy: {other or 'another remirror command'} holds its {name} lock{waited}:"
                    " try again once it is done"
                ) from None
            time.sleep(POLL_SECONDS)
    with _guard:
        if name in _held:  # another thread of this process took it meanwhile: one is enough
            os.close(fd)
            return False
        _held[name] = fd
        with contextlib.suppress(OSError):  # a full /run: the lock holds all the same, unnamed
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{holder} since {time.strftime('%H:%M:%S')}\n".encode(), 0)
    return True


def release(name: str) -> None:
    """Let go of lock `name` if this process holds it."""
    with _guard:
        fd = _held.pop(name, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock


def held() -> list[str]:
    """The locks this process holds."""
    with _guard:
        return sorted(_held)


@contextmanager
def holding(name: str, holder: str, wait: float) -> Iterator[None]:
    """Lock `name` for the block; a lock this process already holds stays held after it."""
    taken = take(name, holder, wait)
    try:
        yield
    finally:
        if taken:
            release(name)


def operator_wait(default: float) -> float:
    """How long a verb an operator runs waits for a lock: REMIRROR_LOCK_WAIT seconds if set."""
    text = os.environ.get("REMIRROR_LOCK_WAIT", "")
    try:
        return max(0.0, float(text)) if text else default
    except ValueError:
        return default


def holder(verb: str) -> str:
    """How a holder is described: `remirror apply (pid 1234 on site-a)`."""
    return f"remirror {verb} (pid {os.getpid()} on {os.uname().nodename})"


def lease_seconds() -> float:
    """How long a remote controller's hold lasts without a request: LEASE_SECONDS, or the site's
    REMIRROR_LOCK_LEASE (1 s to an hour)."""
    text = os.environ.get("REMIRROR_LOCK_LEASE", "")
    try:
        return min(3600.0, max(1.0, float(text))) if text else LEASE_SECONDS
    except ValueError:
        return LEASE_SECONDS


def held_elsewhere(name: str) -> bool:
    """Whether a process holds lock `name` now, read from the kernel's table (/proc/locks), so the
    look takes no lock of its own (looks by many could otherwise keep a taker out)."""
    try:
        seen = (LOCK_DIR / f"{name}.lock").stat()
        table = Path("/proc/locks").read_text()
    except FileNotFoundError:
        return False
    ours = f"{os.major(seen.st_dev):02x}:{os.minor(seen.st_dev):02x}:{seen.st_ino}"
    # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after its number.
    return any(
        len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == ours
        for fields in (line.split() for line in table.splitlines())
    )


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 512, 0).decode(errors="replace").strip()
    except OSError:
        return ""
