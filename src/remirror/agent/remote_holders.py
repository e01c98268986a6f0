"""A forced promotion goes first: the agents of other hosts' controllers that hold or wait for this
site's lock are found and ended (docs/security.md, "What the DR site decides alone").

Such a holder may be a controller cut off with its link (its agent holds the lock until its lease
lapses, remirror.agent.lock.LEASE_SECONDS) or one holding it on purpose, keepalives and all. The
site's own verbs are never ended here: only an agent that sshd started (SSH_CONNECTION in its
environment) for `remirror agent`, with the lock file among its open descriptors.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from remirror.agent import lock


def remote_holders(name: str) -> list[int]:
    """The pids of the agents of other hosts' controllers that hold or wait for lock `name`."""
    lock_file = _lock_file(name)
    return [] if lock_file is None else _holders(lock_file)


def end_remote_holders(name: str) -> list[str]:
    """End each of `remote_holders(name)` with SIGTERM (it ends as when its controller goes, a leg
    move finishing first: remirror.agent.serve), each confirmed again once a pidfd pins it, so a
    pid reused meanwhile is never signalled. Each ended one, as the operator is told of it (its
    controller's address read before the signal: the process may be gone right after)."""
    lock_file = _lock_file(name)
    if lock_file is None:
        return []
    ended = []
    for pid in _holders(lock_file):
        try:
            pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            continue  # gone meanwhile
        try:
            if _remote_agent_with_open(pid, lock_file):
                said = f"pid {pid} ({_peer(pid) or 'another host'})"
                signal.pidfd_send_signal(pidfd, signal.SIGTERM)
                ended.append(said)
        except ProcessLookupError:
            continue
        finally:
            os.close(pidfd)
    return ended


def _lock_file(name: str) -> os.stat_result | None:
    try:
        return (lock.LOCK_DIR / f"{name}.lock").stat()
    except FileNotFoundError:
        return None  # never taken since boot: nobody holds it


def _holders(lock_file: os.stat_result) -> list[int]:
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    return [pid for pid in pids if pid != os.getpid() and _remote_agent_with_open(pid, lock_file)]


def _remote_agent_with_open(pid: int, lock_file: os.stat_result) -> bool:
    """Whether process `pid` has the lock file open (looked at first: few processes do) and is
    `remirror agent` started by sshd for another host's controller."""
    base = Path(f"/proc/{pid}")
    try:
        if not any(_is_file(fd, lock_file) for fd in base.joinpath("fd").iterdir()):
            return False
        words = base.joinpath("cmdline").read_bytes().split(b"\0")
        environment = base.joinpath("environ").read_bytes().split(b"\0")
    except OSError:  # gone meanwhile, or not ours to read
        return False
    return _is_agent(words) and any(v.startswith(b"SSH_CONNECTION=") for v in environment)


def _is_file(fd: Path, lock_file: os.stat_result) -> bool:
    try:
        seen = fd.stat()  # what the descriptor is open on
    except OSError:  # closed as it was read
        return False
    return (seen.st_dev, seen.st_ino) == (lock_file.st_dev, lock_file.st_ino)


def _is_agent(words: list[bytes]) -> bool:
    """`.../remirror agent ...` or `python -m remirror agent ...` (its interpreter before it): the
    word after remirror's own is `agent`, not merely a word anywhere (a profile named so)."""
    for at, word in enumerate(words[:4]):
        if word.rsplit(b"/", 1)[-1] == b"remirror" and words[at + 1 : at + 2] == [b"agent"]:
            return True
    return False


def _peer(pid: int) -> str:
    """The address of the controller an agent serves (SSH_CLIENT), for the operator."""
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return ""
    for value in environment:
        if value.startswith(b"SSH_CLIENT="):
            return "a controller at " + value.removeprefix(b"SSH_CLIENT=").split(b" ")[0].decode(
                errors="replace"
            )
    return ""
