"""Losing site A under a database: a sync mirror loses nothing, an async one keeps a copy that
comes up clean (remirror.lab.disaster; the repeated experiment: bench/async_disaster.py).

A mirror of its own (`lab4` on a3/b3), built, lost and taken apart by each test.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from remirror.lab.disaster import cleanup, profiles, rehearse
from remirror.lab.spec import Wan
from tests.lab.mirror import remirror


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_losing_site_a_under_a_database_leaves_site_b_a_copy_that_comes_up_clean(
    mode: str, tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    profile, site_b = profiles(tmp_path, mode)
    try:
        # A 40 ms round trip while the database runs 10 s (bench/async_disaster.py: 20 s, 5 times):
        # async writes go behind.
        found = rehearse(remirror, profile, site_b, wan=Wan(delay="20ms"), warm=10.0)
    finally:
        cleanup(remirror, profile)
    record_property("rehearsal", found.as_json())
    assert found.mode == mode
    assert found.acknowledged > 0, "pgbench committed nothing before the cut"
    assert found.fsck_clean, found.fsck_output
    assert found.sound, found.database
    if mode == "sync":
        assert found.missing == 0, f"{found.missing} transactions pgbench saw committed are not at site B"
