"""The records of the seeds a site made or took (remirror.agent.seed), in SEED_DIR.

One file per profile, mirror and role (`PROFILE.MIRROR.export.json`, `...import.json`), written
whole or not at all once the seed is whole, and removed, durably, before an import changes the
disk: a record means a whole seed, checked. `observe` reports them; remirror.facts.seed checks
what it reads, and the planner (remirror.plan.seed) decides with them.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from remirror.errors import RemirrorError
from remirror.facts.seed import MAX_RECORDS, SEED_DIR, Role, SeedRecord

MAX_RECORD_BYTES = 64 * 1024


def read_records() -> list[Any]:
    """The records of the seeds made or taken here, as stored (remirror.facts.seed checks them)."""
    found: list[Any] = []
    directory = Path(SEED_DIR)
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.json"))[:MAX_RECORDS]:
        with contextlib.suppress(OSError, ValueError):
            if path.is_file() and path.stat().st_size <= MAX_RECORD_BYTES:
                found.append(json.loads(path.read_bytes()))
    return found


def keep_record(record: SeedRecord, whole: str) -> None:
    """Written whole or not at all (a new file renamed over the last), once the seed is."""
    directory = Path(SEED_DIR)
    final = directory / record.file_name()
    part = final.with_suffix(".part")
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        part.write_text(json.dumps(record.as_json(), sort_keys=True) + "\n")
        with part.open("rb") as written:
            os.fsync(written.fileno())
        part.chmod(0o644)
        part.replace(final)
        _sync_directory(directory)
    except OSError as error:
        part.unlink(missing_ok=True)
        raise RemirrorError(
            f"{whole}, but its record could not be written in {directory} ({error.strerror}): make room"
            " and run it again"
        ) from None


def forget_record(profile: str, mirror: str, role: Role) -> None:
    """Gone for good before the disk changes: a power cut must not bring it back."""
    try:
        (Path(SEED_DIR) / f"{profile}.{mirror}.{role}.json").unlink()
    except FileNotFoundError:
        return
    _sync_directory(Path(SEED_DIR))


def _sync_directory(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
