"""A pytest hook the real-kernel tiers share (tests/lab, tests/hosts_lab): each conftest imports it."""

from __future__ import annotations

import sys

import pytest


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A failure's report, and each test's duration, on the terminal at once, past pytest's capture.

    pytest prints failures and durations at the end of the session; a lab cut
    off by its time limit never gets there, and CI's log would show only an
    `F`, and not which tests took the time.
    """
    if report.when == "call" or report.duration >= 10:
        print(f"\n[{report.duration:7.1f}s] {report.nodeid} ({report.when})", file=sys.__stderr__, flush=True)
    if report.failed:
        print(
            f"\n{report.nodeid} ({report.when}) FAILED:\n{report.longreprtext}",
            file=sys.__stderr__,
            flush=True,
        )
