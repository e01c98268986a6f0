"""Writing a file so that readers see the old content or the new, never a part."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

# What remirror keeps between runs on a site: when replicas were in sync, drill records.
STATE_DIR = "/var/lib/remirror"


def state_dir() -> Path:
    """$REMIRROR_STATE_DIR, or /var/lib/remirror."""
    return Path(os.environ.get("REMIRROR_STATE_DIR", STATE_DIR))


def only_ours(seen: os.stat_result) -> bool:
    """Whether a file or directory is this process's user's (root's) and writable by no one else:
    what remirror reads its own state from, or writes into."""
    return seen.st_uid == os.geteuid() and not seen.st_mode & 0o022


def make_dirs(path: Path, mode: int) -> None:
    """`path` with `mode`, and each missing directory above it 0755, whatever the umask: what
    remirror keeps in /run is root's to write (mkdir's `parents` makes the ones above in the
    umask's mode, 0775 under 002). A drill's mounts are 0755 there (an application the
    drill's hooks start, a database as its own user, reaches its data through them); the
    after-hooks owed are root's alone (0700)."""
    missing = []
    while not path.exists():
        missing.append(path)
        path = path.parent
    for directory in reversed(missing):
        directory.mkdir(mode=0o700, exist_ok=True)  # no one else's, even for a moment
        directory.chmod(mode if directory == missing[0] else 0o755)


def write_atomically(path: str | Path, content: str, mode: int = 0o644) -> None:
    """Write to a temporary file in the same directory, fsync, chmod, rename over `path`, fsync
    the directory.

    The same directory keeps the rename atomic (one filesystem); a reader
    (node_exporter, iscsid, a boot script) never sees a half-written file.
    The directory's fsync makes the rename itself durable: without it a
    power cut right after can leave the old file (mdadm.conf without the
    new `<ignore>` line) for the next boot to act on.
    """
    import tempfile  # here: every agent start imports this module (state_dir), few write

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        Path(temp).chmod(mode)
        Path(temp).replace(path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def write_private_once(path: str | Path, make: Callable[[], str]) -> None:
    """`make()`'s text in `path`, for root only (0600, in a 0700 directory), unless `path` is
    there already: a secret or a key, which what already uses it must keep."""
    path = Path(path)
    if path.exists():
        return
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    write_atomically(path, make(), mode=0o600)


def fsync_directory(directory: str | Path) -> None:
    """Make the entries of `directory` (a rename, a new file) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
