"""Drill records on the site that ran the drills (remirror.drill; the format: remirror.facts.drill).

Under the state directory, drills/KEY/ (KEY: the drilled leg's points, MIRROR.SITE) holds one
JSON record and one summary per drill, named by its start, and the last drill and the last that
passed, which observing carries to `status`, `check` and `metrics`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from remirror.files import state_dir, write_atomically

if TYPE_CHECKING:  # every agent start reads the records (observe); only a drill writes one
    from remirror.facts.drill import DrillRecord

DRILLS = "drills"
LAST = "last.json"
LAST_PASS = "last-pass.json"  # noqa: S105  (a file name)


def drill_dir(key: str) -> Path:
    return state_dir() / DRILLS / key


def write_record(key: str, record: DrillRecord) -> Path:
    """The record's JSON and summary, dated, and the last (and last passing) drill beside them."""
    directory = drill_dir(key)
    text = json.dumps(record.as_json(), indent=1) + "\n"
    path = directory / f"{record.stamp}.json"
    write_atomically(path, text, 0o644)
    write_atomically(directory / f"{record.stamp}.txt", record.summary(), 0o644)
    write_atomically(directory / LAST, text, 0o644)
    if record.passed:
        write_atomically(directory / LAST_PASS, text, 0o644)
    return path


def read_records() -> dict[str, dict[str, Any]]:
    """The last drill and the last that passed of each leg drilled here, as their files hold them."""
    found: dict[str, dict[str, Any]] = {}
    for directory in sorted((state_dir() / DRILLS).glob("*")):
        kept = {}
        for name, key in ((LAST, "last"), (LAST_PASS, "last_pass")):
            try:
                kept[key] = json.loads((directory / name).read_text())
            except (OSError, ValueError):
                continue  # none yet, or unreadable: health says so by its absence
        if kept:
            found[directory.name] = kept
    return found
