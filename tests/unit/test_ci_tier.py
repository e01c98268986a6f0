"""CI's guard on a tier's time (.ci/tier.py): the decision, and the stop at the budget."""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import REPO


def _tier() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ci_tier", REPO / ".ci" / "tier.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tier = _tier()


def test_a_tier_inside_its_budget_passes_with_its_time() -> None:
    assert tier.verdict("lab", 0, 31 * 60 + 4, 50 * 60) == (
        0,
        "tier lab: 31m04s of its budget 50m00s, exit 0",
    )


def test_a_failing_tier_keeps_its_exit_code() -> None:
    assert tier.verdict("lab", 1, 600, 50 * 60)[0] == 1
    assert tier.verdict("unit", 2, 30, None) == (2, "tier unit: 0m30s, exit 2")


def test_a_tier_stopped_at_its_budget_fails_with_one_line_saying_so() -> None:
    code, line = tier.verdict("lab", None, 50 * 60 + 12, 50 * 60)
    assert code == 1
    assert "\n" not in line
    assert line.startswith(
        "tier lab: 50m12s: FAILED: the lab tier passed its budget 50m00s (CI stops a run at 90m)"
    )


def test_a_tier_that_ends_past_its_budget_fails_even_if_it_passed() -> None:
    assert tier.verdict("lab", 0, 50 * 60 + 1, 50 * 60)[0] == 1


def test_the_guard_stops_a_tier_at_its_budget() -> None:
    started = time.monotonic()
    code = tier.main(
        ["slow", "--budget", str(1 / 60), "--", sys.executable, "-c", "import time; time.sleep(60)"]
    )
    assert code == 1
    assert time.monotonic() - started < 30


def test_a_tier_beside_another_prints_each_of_its_lines_behind_its_prefix(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Python's stdout through a pipe is buffered and its stderr is not: in order only because the
    # tier runs its command unbuffered (PYTHONUNBUFFERED), whatever this process's environment.
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    script = "import sys; print('one'); print('two', file=sys.stderr); print('three')"
    code = tier.main(["hosts", "--prefix", "hosts| ", "--", sys.executable, "-c", script])
    assert code == 0
    out, err = capfd.readouterr()
    assert out.splitlines() == ["hosts| one", "hosts| two", "hosts| three"]
    assert err == "hosts| ci: tier hosts: 0m00s, exit 0\n"


def test_a_tier_told_to_stop_stops_its_command_and_fails(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"
    started = time.monotonic()
    stopper = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGTERM))
    stopper.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            tier.main(["hosts", "--", sys.executable, "-c", script])
    finally:
        stopper.cancel()
    assert time.monotonic() - started < 30
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # this process's own handler, back
    child = int(pid_file.read_text())
    for _ in range(100):  # its command is gone too, not left running behind the stopped tier
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"the tier's command {child} still runs")
