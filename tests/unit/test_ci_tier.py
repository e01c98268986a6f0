"""CI's guard on a tier's time (.ci/tier.py): the decision, and the stop at the budget."""

from __future__ import annotations

import importlib.util
import sys
import time
from types import ModuleType

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
