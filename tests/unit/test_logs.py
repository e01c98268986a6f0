"""Log lines under systemd carry journald's priority prefix; elsewhere they do not."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import pytest

from remirror.cli.app import run
from remirror.logs import setup_logging


def _stderr_to(path: Path, monkeypatch: pytest.MonkeyPatch, journal: str | None) -> None:
    stream = path.open("w")
    monkeypatch.setattr(sys, "stderr", stream)
    seen = os.fstat(stream.fileno())
    stream_id = f"{seen.st_dev}:{seen.st_ino}" if journal == "this file" else journal
    if stream_id is None:
        monkeypatch.delenv("JOURNAL_STREAM", raising=False)
    else:
        monkeypatch.setenv("JOURNAL_STREAM", stream_id)


@pytest.mark.parametrize(
    ("journal", "first"),
    [
        ("this file", "<4>remirror: WARNING: link down"),
        (None, "remirror: WARNING: link down"),
        ("1:2", "remirror"),
    ],
)
def test_a_warning_is_a_warning_to_journald_and_plain_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, journal: str | None, first: str
) -> None:
    _stderr_to(tmp_path / "err", monkeypatch, journal)
    setup_logging(1, False)
    logging.getLogger("remirror.test").warning("link down")
    logging.getLogger("remirror.test").info("pass done")
    sys.stderr.flush()
    lines = (tmp_path / "err").read_text().splitlines()
    assert lines[0].startswith(first)
    assert lines[1].startswith("<6>" if journal == "this file" else "remirror: INFO")


def test_an_error_ending_a_verb_is_an_error_to_journald(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _stderr_to(tmp_path / "err", monkeypatch, "this file")
    assert run(["validate", str(tmp_path / "missing.yaml")]) == 3
    sys.stderr.flush()
    assert (tmp_path / "err").read_text().startswith("<3>")
