"""`remirror check`: a monitoring-plugins verdict from the mirrors' reports. Pure.

The plugin contract (Nagios, Icinga, Naemon, Sensu): exit 0 OK, 1 WARNING,
2 CRITICAL, 3 UNKNOWN; one line `SERVICE STATE - summary`, then `|` and
perfdata `'label'=value[UOM];warn;crit;min;max`.

What each mirror state means to a person on call:

* MIRRORED is OK, unless a replica's out-of-sync bytes or RPO cross a threshold.
* SYNCING is WARNING: the replica is catching up, and not a full copy yet.
* Everything else is CRITICAL: a leg is down, I/O waits for a link, a split
  brain waits for a decision, or the array is not running.
* A site that cannot be reached is CRITICAL for its legs, whatever md says.
* A cache that reports an error is CRITICAL: writes it acknowledged may
  never reach the disk.
* Writes md holds (`suspend_hi`, left by a move of the legs that never
  finished) are CRITICAL: applications wait on every write.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from remirror.health.report import MirrorReport
from remirror.health.state import State
from remirror.units import format_duration, format_size, parse_duration, parse_size


class Status(IntEnum):
    """Plugin exit codes."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


@dataclass(frozen=True)
class Limit:
    """One threshold: out-of-sync bytes and, optionally, RPO seconds."""

    bytes: int
    rpo_seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> Limit:
        """`BYTES[,AGE]`: `256MiB`, `1GiB,1h`. Raises ValueError with the reason."""
        size, _, age = text.partition(",")
        return cls(parse_size(size.strip()), parse_duration(age.strip()) if age.strip() else None)

    def crossed_by(self, report: MirrorReport) -> str:
        """What in the report crosses this limit, in words; "" if nothing."""
        words = []
        oos, rpo = report.out_of_sync_bytes, report.rpo_seconds
        if oos is not None and oos > self.bytes:
            words.append(f"{format_size(oos)} out of sync > {format_size(self.bytes)}")
        if self.rpo_seconds is not None and rpo is not None and rpo > self.rpo_seconds:
            words.append(f"RPO {format_duration(rpo)} > {format_duration(self.rpo_seconds)}")
        return ", ".join(words)


DEFAULT_WARNING = Limit(256 * 1024**2, 15 * 60)
DEFAULT_CRITICAL = Limit(1024**3, 60 * 60)


@dataclass(frozen=True)
class Verdict:
    """The plugin's exit code and output."""

    status: Status
    text: str


def judge(reports: list[MirrorReport], warning: Limit, critical: Limit) -> Verdict:
    """One verdict for all the profile's mirrors: the worst of theirs."""
    if not reports:
        return Verdict(Status.UNKNOWN, "REMIRROR UNKNOWN - the profile has no mirrors")
    verdicts = [_mirror(r, warning, critical) for r in reports]
    worst = max(status for status, _ in verdicts)
    summary = "; ".join(words for _, words in verdicts)
    perfdata = " ".join(_perfdata(r, warning, critical) for r in reports)
    return Verdict(worst, f"REMIRROR {worst.name} - {summary} | {perfdata}")


def unknown(reason: str) -> Verdict:
    """The verdict when the check itself cannot run (a bad profile, a bad flag)."""
    return Verdict(Status.UNKNOWN, f"REMIRROR UNKNOWN - {reason}")


def _mirror(report: MirrorReport, warning: Limit, critical: Limit) -> tuple[Status, str]:
    name = report.mirror
    unreachable = [leg for leg in report.legs if not leg.site_reachable]
    if unreachable:
        legs = ", ".join(f"{leg.role} leg on {leg.site}" for leg in unreachable)
        return Status.CRITICAL, f"{name} {report.state}: site unreachable for {legs}"
    failing = [leg for leg in report.legs if leg.cache_error]
    if failing:
        legs = ", ".join(f"{leg.role} leg on {leg.site} (error {leg.cache_error})" for leg in failing)
        return Status.CRITICAL, f"{name} {report.state}: cache error on the {legs}"
    if report.writes_held:
        return (
            Status.CRITICAL,
            f"{name} {report.state}: md holds every write to {report.device} (a move of its legs that"
            " did not finish): `remirror reconcile` or `apply` lets them go",
        )
    if report.state not in (State.MIRRORED, State.SYNCING):
        return Status.CRITICAL, f"{name} {report.state}: {report.reason}"
    cdp = report.cdp
    if cdp is not None and cdp.pool_mode not in ("rw", ""):
        return (
            Status.CRITICAL,
            f"{name} {report.state}: CDP pool {cdp.pool_mode}: writes to the volume may fail",
        )
    if cdp is not None and cdp.pool_mode == "":
        return Status.CRITICAL, f"{name} {report.state}: CDP stack not active (apply activates it)"
    if crossed := critical.crossed_by(report):
        return Status.CRITICAL, f"{name} {report.state}: {crossed}"
    if report.state is State.SYNCING:
        progress = f"{report.resync.percent:.1f}% done" if report.resync else "progress unknown"
        if report.resync and report.resync.eta_seconds is not None:
            progress += f", about {format_duration(report.resync.eta_seconds)} left"
        return Status.WARNING, f"{name} SYNCING: {report.reason}, {progress}"
    if crossed := warning.crossed_by(report):
        return Status.WARNING, f"{name} {report.state}: {crossed}"
    if cdp is not None and cdp.overdue:
        age = (
            "no point yet"
            if cdp.newest_age_seconds is None
            else (f"newest point {format_duration(cdp.newest_age_seconds)} old")
        )
        return Status.WARNING, f"{name} {report.state}: CDP {age}, every {format_duration(cdp.every_seconds)}"
    if report.notes:
        return Status.WARNING, f"{name} {report.state}: {'; '.join(report.notes)}"
    return Status.OK, f"{name} MIRRORED"


def _perfdata(report: MirrorReport, warning: Limit, critical: Limit) -> str:
    """Per mirror: out-of-sync bytes, RPO, resync percent, cache dirty blocks, writes in flight to
    the replicas (in async mode, acknowledged writes a replica may still lack)."""

    def number(value: float | None) -> str:
        return "U" if value is None else (f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}")

    def limit(value: float | None) -> str:
        return "" if value is None else number(value)

    name = report.mirror
    dirty = [leg.cache_dirty_blocks for leg in report.legs if leg.cache_dirty_blocks is not None]
    flying = [leg.writes_in_flight for leg in report.legs if leg.writes_in_flight is not None]
    return " ".join(
        [
            f"'{name} out_of_sync'={number(report.out_of_sync_bytes)}B;{warning.bytes};{critical.bytes};0",
            f"'{name} rpo'={number(report.rpo_seconds)}s"
            f";{limit(warning.rpo_seconds)};{limit(critical.rpo_seconds)};0",
            f"'{name} resync'={number(report.resync.percent if report.resync else 100.0)}%;;;0;100",
            f"'{name} cache_dirty'={number(sum(dirty) if dirty else 0)};;;0",
            f"'{name} in_flight'={number(max(flying) if flying else None)};;;0",
        ]
    )
