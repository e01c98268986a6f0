"""Where the lab tests' time goes: a pytest plugin that times every verb, command, agent request
and sleep of the tests it runs, and a summary of what it recorded (docs/lab.md, Cost).

    remirror lab run --out /tmp/spent -- sh -c \\
        'PYTHONPATH=bench pytest -p lab_time_spent tests/lab/test_reconcile.py'
    python bench/lab_time_spent.py /tmp/spent/time-spent.json

It wraps the product's own entry points for the run (`Runner.run`, the CLI's `run`,
`AgentClient.request`, `time.sleep`) and changes nothing they do. A request to a remote
site that starts its agent is counted apart (`first`): that is the SSH connection and the
agent's start. Sleeps are those of the tests' own thread: polls, and the outages they make.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any, SupportsIndex

import pytest

_records: list[dict[str, Any]] = []
_test = {"id": "?"}


def _record(kind: str, what: str, seconds: float) -> None:
    _records.append(
        {
            "test": _test["id"],
            "kind": kind,
            "what": what,
            "seconds": round(seconds, 3),
            "tests_thread": threading.current_thread() is threading.main_thread(),
        }
    )


def _timed(kind: str, name: Callable[..., str], function: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        what = name(*args)  # before the call: a first request is known as such only before it
        started = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            _record(kind, what, time.monotonic() - started)

    return wrapper


def _command(_runner: object, argv: list[str], *_: object) -> str:
    words = [Path(str(word)).name for word in argv[:2]]
    return ":".join(words) if words[0] in ("site-b", "nsenter", "ip") else words[0]


def _request(client: Any, request: dict[str, Any], *_: object) -> str:
    first = client._runner is not None and client._stream is None  # an agent starts for it
    return f"{client.name} {request.get('op')}{' (first)' if first else ''}"


def pytest_configure(config: pytest.Config) -> None:
    from remirror.agent import client
    from remirror.cli import app
    from remirror.runner import base

    base.Runner.run = _timed("command", _command, base.Runner.run)  # type: ignore[method-assign]
    app.run = _timed("verb", lambda args: args[0] if args else "", app.run)
    client.AgentClient.request = _timed("request", _request, client.AgentClient.request)  # type: ignore[method-assign]
    sleep = time.sleep

    def tests_sleep(seconds: float | SupportsIndex) -> None:
        if threading.current_thread() is threading.main_thread():
            _record("sleep", "", float(seconds))
        sleep(seconds)

    time.sleep = tests_sleep


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, None, None]:
    _test["id"] = item.nodeid
    started = time.monotonic()
    yield
    _record("test", item.nodeid, time.monotonic() - started)


def pytest_unconfigure(config: pytest.Config) -> None:
    (Path(os.environ.get("LAB_OUT", ".")) / "time-spent.json").write_text(json.dumps(_records))


def summary(records: list[dict[str, Any]]) -> list[str]:
    """The tests' time, then each kind of thing they waited for, the costliest first (pure)."""
    tests = sum(r["seconds"] for r in records if r["kind"] == "test")
    lines = [f"{tests:8.1f} s in {sum(r['kind'] == 'test' for r in records)} tests"]
    totals: dict[tuple[str, str, bool], list[float]] = defaultdict(list)
    for r in records:
        if r["kind"] != "test":
            what = (
                r["what"] if r["kind"] != "sleep" else ("1 s or more" if r["seconds"] >= 1 else "under 1 s")
            )
            totals[(r["kind"], what, r["tests_thread"])].append(r["seconds"])
    for (kind, what, own), seconds in sorted(totals.items(), key=lambda item: -sum(item[1])):
        where = "" if own else "  (beside the test, in a thread)"
        lines.append(f"{sum(seconds):8.1f} s {len(seconds):5d} x {kind} {what}{where}")
    return lines


if __name__ == "__main__":
    sys.stdout.write("\n".join(summary(json.loads(Path(sys.argv[1]).read_text()))[:40]) + "\n")
