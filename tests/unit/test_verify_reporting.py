"""`verify` that reports (issue 47): its pace (--rate), its progress, its last outcome kept on
the host for `check`, `status` and `metrics`, and `apply --wait` until the initial sync is done.
No storage: the sites are the recorded model's, the agents a fake that hashes nothing."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from remirror.cli.status_view import status_json, status_text
from remirror.errors import VERIFY_CANNOT_TELL, VERIFY_DIFFER
from remirror.facts.site import DiskFacts
from remirror.health import State
from remirror.health.check import DEFAULT_CRITICAL, DEFAULT_WARNING, Status, judge
from remirror.health.metrics import render
from remirror.health.report import Resync
from remirror.health.verify import BATCH, RESULT_CODES, VerifyRecord, batch_chunks, pause_for
from tests.unit.test_health_report import NOW, one
from tests.unit.test_health_state import SYNC, applied

MiB = 1 << 20
DIFFERED = VerifyRecord("m0", NOW - 3600, 42.0, "differ", 256 * MiB, 2 * MiB, 50e6)


def test_a_paced_verify_reads_about_a_second_at_a_time_and_waits_for_its_average() -> None:
    assert batch_chunks(MiB, None) == BATCH
    assert batch_chunks(MiB, 50e6) == 47  # ~a second's worth of 1 MiB chunks at 50 MB/s
    assert batch_chunks(MiB, 100e3) == 1  # never less than a chunk
    assert pause_for(None, 10 * MiB, 0.1) == 0.0
    assert pause_for(10 * MiB, 30 * MiB, 1.0) == pytest.approx(2.0)  # 3 s' worth read in 1 s
    assert pause_for(10 * MiB, 10 * MiB, 5.0) == 0.0  # behind: no wait


def test_verify_holds_its_rate_and_says_how_far_it_is(monkeypatch: pytest.MonkeyPatch) -> None:
    """monitor.verify against two sites whose agents answer at once: it asks in steps of a
    second's reading and sleeps so that each leg averages the rate; progress counts the slower."""
    from remirror import monitor

    slept: list[float] = []

    class Clock(threading.local):
        """Each leg's thread its own clock, moved only by its sleeps (agents answer at once)."""

        now = 0.0

        def monotonic(self) -> float:
            return self.now

        def sleep(self, seconds: float) -> None:
            slept.append(seconds)
            self.now += seconds

    monkeypatch.setattr(monitor, "time", Clock())
    seen: list[tuple[int, int]] = []
    asked: list[int] = []

    class Client:
        bytes_received = 0

        def digests(self, disk: str, spans: list[tuple[int, int]]) -> list[str]:
            asked.append(len(spans))
            return ["same"] * len(spans)

    facts = dict(applied(SYNC))
    primary = facts[SYNC.mirrors[0].primary.site]
    device = SYNC.mirrors[0].md_device
    disks = {**primary.disks, device: DiskFacts(device, exists=True, size=100 * MiB)}
    facts[primary.name] = dataclasses.replace(primary, disks=disks)
    controller = _Controller(facts, Client())
    found = monitor.verify(
        controller,  # type: ignore[arg-type]
        "m0",
        None,
        MiB,
        rate=8 * MiB,
        progress=lambda d, t: seen.append((d, t)),
    )
    size = found.span.length
    assert found.mismatched == ()
    assert set(asked) <= {8, size // MiB % 8}  # a second's reading at a time
    # Both legs' waits: what 8 MiB/s takes for the whole span, each leg on its own.
    assert sum(slept) == pytest.approx(2 * size / (8 * MiB), rel=0.05)
    assert seen[-1] == (size, size)
    assert all(done <= total for done, total in seen)


class _Controller:
    """Enough of remirror.controller.Controller for monitor.verify: the model's sites."""

    def __init__(self, facts: dict[str, Any], client: Any) -> None:
        self.profile = SYNC
        self._facts = facts
        self.clients = dict.fromkeys(facts, client)

    def observe(self) -> dict[str, Any]:
        return self._facts

    def running(self, facts: object) -> Any:
        return self.profile


def test_the_last_verify_is_kept_and_read_back_and_a_bad_file_is_none(tmp_path: Path) -> None:
    from remirror import monitor

    monitor.record_verify(SYNC, DIFFERED)
    assert monitor.last_verify(SYNC, "m0") == DIFFERED
    assert oct(monitor.verify_file(SYNC, "m0").stat().st_mode & 0o777) == "0o644"
    # A difference stays until a verify finds the legs match: one that could not tell (the
    # mirror resyncing when the timer came) repaired nothing.
    monitor.record_verify(SYNC, dataclasses.replace(DIFFERED, finished=NOW, result="cannot_tell"))
    assert monitor.last_verify(SYNC, "m0") == DIFFERED
    matched = dataclasses.replace(DIFFERED, finished=NOW, result="match", mismatched_bytes=0)
    monitor.record_verify(SYNC, matched)
    assert monitor.last_verify(SYNC, "m0") == matched
    monitor.forget_verify(SYNC, "m0")  # destroy: a mirror built again under the name starts afresh
    assert monitor.last_verify(SYNC, "m0") is None
    monitor.verify_file(SYNC, "m0").write_text('{"result": "fine"}')
    assert monitor.last_verify(SYNC, "m0") is None
    assert monitor.last_verify(SYNC, "nothing") is None
    assert VerifyRecord.from_json(DIFFERED.as_json()) == DIFFERED
    assert RESULT_CODES == {"match": 0, "differ": VERIFY_DIFFER, "cannot_tell": VERIFY_CANNOT_TELL}


def test_a_verify_that_found_a_difference_is_critical_in_check_and_in_metrics_and_status() -> None:
    report = dataclasses.replace(one(dict(applied(SYNC))), verify=DIFFERED)
    verdict = judge([report], DEFAULT_WARNING, DEFAULT_CRITICAL)
    assert verdict.status is Status.CRITICAL
    assert "the last verify (" in verdict.text
    assert "found 2MiB that differ between the legs" in verdict.text
    matched = dataclasses.replace(
        report, verify=dataclasses.replace(DIFFERED, result="match", mismatched_bytes=0)
    )
    assert judge([matched], DEFAULT_WARNING, DEFAULT_CRITICAL).status is Status.OK
    text = render([report], NOW, "lab", "0.1.0")
    assert 'remirror_verify_last_result{profile="lab",mirror="m0"} 1' in text
    assert f'remirror_verify_last_timestamp_seconds{{profile="lab",mirror="m0"}} {int(NOW - 3600)}' in text
    assert 'remirror_verify_last_mismatched_bytes{profile="lab",mirror="m0"} 2097152' in text
    assert 'remirror_verify_last_duration_seconds{profile="lab",mirror="m0"} 42' in text
    assert "  last verify 1h ago: 2MiB DIFFER between the legs" in status_text([report], NOW)
    assert status_json(report)["verify"] == DIFFERED.as_json()


def test_apply_wait_waits_for_mirrored_and_gives_up_at_its_time(monkeypatch: pytest.MonkeyPatch) -> None:
    from remirror import monitor
    from remirror.cli import mirror

    clock = iter([0.0, 5.0, 11.0, 20.0])

    class Time:
        """cli.mirror's clock: no sleeping, and a time-out's four looks."""

        @staticmethod
        def sleep(_: float) -> None:
            return None

        @staticmethod
        def monotonic() -> float:
            return next(clock)

    monkeypatch.setattr(mirror, "time", Time)
    mirrored = one(dict(applied(SYNC)))
    syncing = dataclasses.replace(
        mirrored, state=State.SYNCING, resync=Resync("recover", 64 * MiB, 256 * MiB, 8 * MiB, 24.0)
    )
    looks = [[syncing], [syncing], [mirrored]]
    monkeypatch.setattr(monitor, "snapshot", lambda controller: (looks.pop(0), {}))
    assert mirror.wait_until_mirrored(object(), None, shown=False) == 0  # type: ignore[arg-type]
    assert looks == []
    # A time-out: exit 1, saying where each mirror is.
    monkeypatch.setattr(monitor, "snapshot", lambda controller: ([syncing], {}))
    assert mirror.wait_until_mirrored(object(), 10.0, shown=False) == 1  # type: ignore[arg-type]
    # A state no mirror leaves by itself: said at once, no time-out needed.
    split = dataclasses.replace(mirrored, state=State.SPLIT_BRAIN, reason="both legs took writes")
    monkeypatch.setattr(monitor, "snapshot", lambda controller: ([split], {}))
    assert mirror.wait_until_mirrored(object(), None, shown=False) == 1  # type: ignore[arg-type]


def test_verify_without_a_mirror_compares_each_and_a_json_document_names_one(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from remirror.errors import RemirrorError
    from remirror.health.verify import Span
    from remirror.monitor import Verification, last_verify
    from tests.unit.test_cli import TWO_SITE, run

    class Controller:
        def __init__(self, _: object) -> None: ...

        def close(self) -> None: ...

    asked: list[tuple[str, object]] = []

    def verify(controller: object, name: str, *_: object, rate: object = None, **__: object) -> Verification:
        asked.append((name, rate))
        if name == "mail":
            raise RemirrorError("mail is SYNCING: md is running recover: verify compares legs in sync")
        return Verification(name, Span(0, MiB), MiB, ("hq", "dr"), differing, (), {})

    differing: tuple[Span, ...] = ()

    monkeypatch.setattr("remirror.controller.Controller", Controller)
    monkeypatch.setattr("remirror.monitor.verify", verify)
    monkeypatch.setenv("REMIRROR_VERIFY_RATE", "400Mbit")
    code, out, _ = run(capsys, "verify", TWO_SITE)
    assert code == VERIFY_CANNOT_TELL
    assert asked == [("finance", 50e6), ("mail", 50e6)]
    assert "finance: the legs match" in out
    assert "mail: not compared: mail is SYNCING" in out
    from remirror.profile import load_profile

    profile = load_profile(TWO_SITE)
    assert [last_verify(profile, m).result for m in ("finance", "mail")] == ["match", "cannot_tell"]  # type: ignore[union-attr]
    # A range that matches says nothing of the rest: the whole mirror's outcome stays.
    kept = last_verify(profile, "finance")
    assert run(capsys, "verify", TWO_SITE, "finance", "--range", "0:4KiB")[0] == 0
    assert last_verify(profile, "finance") == kept
    assert run(capsys, "verify", "-o", "json", TWO_SITE)[0] == 3
    # One mirror differs, the other could not tell: the difference is the answer.
    differing = (Span(0, 4096),)
    assert run(capsys, "verify", TWO_SITE)[0] == VERIFY_DIFFER
    code, out, _ = run(capsys, "verify", "-o", "json", TWO_SITE, "finance", "--rate", "6MB/s")
    assert json.loads(out)["rate_bytes_per_second"] == 6e6
