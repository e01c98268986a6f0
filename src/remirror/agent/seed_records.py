"""The records of the seeds a site made or took (remirror.agent.seed), in SEED_DIR.

One file per profile, mirror and role (`PROFILE.MIRROR.export.json`, `...import.json`), written
whole or not at all once the seed is whole, and removed, durably, before an import changes the
disk: a record means a whole seed, checked. `observe` reports them; remirror.facts.seed checks
what it reads, and the planner (remirror.plan.seed) decides with them.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from remirror.errors import RemirrorError
from remirror.facts.seed import MAX_RECORDS, SEED_DIR, Role, SeedRecord, record_file_name
from remirror.files import fsync_directory, write_atomically

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
    """Written whole or not at all (remirror.files.write_atomically), once the seed is."""
    directory = Path(SEED_DIR)
    try:
        write_atomically(directory / record.file_name(), json.dumps(record.as_json(), sort_keys=True) + "\n")
    except OSError as error:
        raise RemirrorError(
            f"{whole}, but its record could not be written in {directory} ({error.strerror}): make room"
            " and run it again"
        ) from None


def forget_record(profile: str, mirror: str, role: Role) -> None:
    """Gone for good before the disk changes: a power cut must not bring it back."""
    try:
        (Path(SEED_DIR) / record_file_name(profile, mirror, role)).unlink()
    except FileNotFoundError:
        return
    fsync_directory(SEED_DIR)
