"""A DR drill's record: what `remirror drill` proved, when, with which point. Pure.

A drill (docs/drill.md) starts the operator's checks on a throwaway writable
view of a replica's own recovery point, at the DR site, while the mirror
runs on. Its record is the dated evidence an auditor asks for: the point
used and its age when the drill began (the RPO it proves), the time from the
start until every check had passed (the RTO it proves), each check's output,
pass or fail. remirror.agent.drill_records keeps them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

OUTPUT_KEPT = 4096  # the tail of a check's output kept in the record


@dataclass(frozen=True)
class CheckRun:
    """One of the drill's checks: an operator's command, or the file system's own check."""

    command: str
    exit_code: int  # -1: it did not end within its time (killed)
    seconds: float
    output: str  # its last OUTPUT_KEPT characters, stdout and stderr together

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True)
class DrillRecord:
    """One drill, from the view's creation to its removal."""

    mirror: str
    site: str  # the DR site it ran on
    started: float  # unix time
    finished: float
    point: int  # the recovery point it started from
    point_time: float
    point_taken_by_drill: bool  # "as of now": the drill took the point as it began
    checks: tuple[CheckRun, ...]
    error: str = ""  # why it could not run its checks (the view, the mount), or cleaning up failed
    checks_passed_at: float | None = None  # when the last check had passed (None: they did not)
    cleaned_up: bool = True  # the view and its devices were removed again

    @property
    def passed(self) -> bool:
        """Every check passed, and nothing went wrong around them."""
        return not self.error and self.checks_passed_at is not None and all(c.passed for c in self.checks)

    @property
    def rpo(self) -> float:
        """How old the copy the drill started was when it began: the data loss it proves bounded."""
        return max(0.0, self.started - self.point_time)

    @property
    def rto(self) -> float | None:
        """Seconds from the drill's start until its checks had passed: the time to take over it
        proves (None: it proved none)."""
        if not self.passed or self.checks_passed_at is None:
            return None
        return self.checks_passed_at - self.started

    @property
    def stamp(self) -> str:
        """Its start as a file name: 20261126T230512Z."""
        return datetime.fromtimestamp(self.started, UTC).strftime("%Y%m%dT%H%M%SZ")

    def as_json(self) -> dict[str, Any]:
        """The record's file (and `remirror drill -o json`)."""
        return {
            "kind": "remirror-drill",  # not a promotion: nothing here ran the mirror at this site
            **asdict(self),
            "checks": [asdict(c) for c in self.checks],
            "passed": self.passed,
            "rpo_seconds": round(self.rpo, 3),
            "rto_seconds": None if self.rto is None else round(self.rto, 3),
        }

    def summary(self) -> str:
        """For people: the drill's verdict, its RPO and RTO, each check."""

        def when(t: float) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

        verdict = "PASSED" if self.passed else "FAILED"
        lines = [
            f"DR drill of {self.mirror} at {self.site}: {verdict}"
            " (a throwaway copy: the mirror was not promoted, the replica not written)",
            f"  started  {when(self.started)}, ended {when(self.finished)}",
            f"  point    #{self.point} of {when(self.point_time)}"
            + (" (taken by the drill)" if self.point_taken_by_drill else ""),
            f"  RPO      {self.rpo:.0f}s (the point's age when the drill began)",
            "  RTO      "
            + ("none" if self.rto is None else f"{self.rto:.1f}s (from the start until the checks passed)"),
        ]
        if self.error:
            lines.append(f"  error    {self.error}")
        if not self.cleaned_up:
            lines.append("  LEFT OVER: the view could not be removed (the next drill removes it)")
        for check in self.checks:
            result = "ok" if check.passed else f"FAILED (exit {check.exit_code})"
            lines.append(f"  check    {check.command}: {result} in {check.seconds:.1f}s")
            lines.extend(f"    | {line}" for line in check.output.splitlines()[-10:])
        return "\n".join(lines) + "\n"


def record_from_json(data: dict[str, Any]) -> DrillRecord:
    """A record's file read back (ValueError, KeyError, TypeError when it is not one)."""
    if data.get("kind") != "remirror-drill":
        raise ValueError("not a remirror drill record")
    checks = tuple(
        CheckRun(str(c["command"]), int(c["exit_code"]), float(c["seconds"]), str(c["output"]))
        for c in data["checks"]
    )
    passed_at = data.get("checks_passed_at")
    return DrillRecord(
        mirror=str(data["mirror"]),
        site=str(data["site"]),
        started=float(data["started"]),
        finished=float(data["finished"]),
        point=int(data["point"]),
        point_time=float(data["point_time"]),
        point_taken_by_drill=bool(data["point_taken_by_drill"]),
        checks=checks,
        error=str(data.get("error", "")),
        checks_passed_at=None if passed_at is None else float(passed_at),
        cleaned_up=bool(data.get("cleaned_up", True)),
    )


@dataclass(frozen=True)
class Drills:
    """What a site holds of one leg's drills: the last, and the last that passed."""

    last: DrillRecord | None
    last_pass: DrillRecord | None
