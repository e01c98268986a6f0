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
* A leg that lacks writes md acknowledged (its disk failed them: md's bad
  block log) is CRITICAL, the primary's too: a replica then holds the only
  good copy of those blocks.
* A replica's own points filling their pool past `pool_critical` are
  CRITICAL before the pool is full: then the replica's writes fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum

from remirror.health.report import CdpReport, LegReport, MirrorReport
from remirror.health.state import State
from remirror.units import format_duration, format_size, parse_duration, parse_size


class Status(IntEnum):
    """Plugin exit codes."""

    OK = 0
    WARNING = 1
    CRITICAL = 2
    UNKNOWN = 3


@dataclass(frozen=True)
class Range:
    """A threshold in the monitoring-plugins range syntax, `[@]START:END` with units: a value
    alerts when it lies outside START..END, or inside it with `@`. `N` means `0:N`, `N:` has no
    end, `~:N` no start (the development guidelines' "Threshold and ranges")."""

    start: float
    end: float = math.inf
    inside: bool = False

    @classmethod
    def parse(cls, text: str, number: Callable[[str], float]) -> Range:
        """`text` with each bound read by `number` (parse_size, parse_duration). Raises ValueError."""
        body = text.strip()
        inside = body.startswith("@")
        body = body.removeprefix("@")
        if not body:
            raise ValueError(f"{text!r}: an empty range")
        start_text, _, end_text = body.rpartition(":") if ":" in body else ("0", ":", body)
        start = -math.inf if start_text == "~" else number(start_text) if start_text else 0.0
        end = number(end_text) if end_text else math.inf
        if start > end:
            raise ValueError(f"{text!r}: the range starts after it ends")
        return cls(float(start), float(end), inside)

    def alerts(self, value: float) -> bool:
        outside = value < self.start or value > self.end
        return not outside if self.inside else outside

    @property
    def simple(self) -> bool:
        """`0:N`, the common case: alert above N."""
        return self.start == 0 and not self.inside and self.end != math.inf

    def words(self, show: Callable[[float], str]) -> str:
        """What crossing it means, with values shown by `show`: `> 256MiB`, `outside 1MiB:2GiB`."""
        if self.simple:
            return f"> {show(self.end)}"
        return f"{'inside' if self.inside else 'outside'} {self._bounds(show)}"

    def perfdata(self) -> str:
        """The range in base units, for perfdata's warn and crit fields."""

        def plain(value: float) -> str:
            return f"{value:.0f}" if float(value).is_integer() else f"{value:g}"

        if self.simple:
            return plain(self.end)
        return f"{'@' if self.inside else ''}{self._bounds(plain)}"

    def _bounds(self, show: Callable[[float], str]) -> str:
        """`START:END` as the syntax writes them: `~` for no start, nothing for no end."""
        start = "~" if self.start == -math.inf else show(self.start)
        end = "" if self.end == math.inf else show(self.end)
        return f"{start}:{end}"


@dataclass(frozen=True)
class Limit:
    """One threshold: on out-of-sync bytes and, optionally, on RPO seconds."""

    bytes: Range
    rpo_seconds: Range | None = None

    @classmethod
    def parse(cls, text: str) -> Limit:
        """`BYTES[,AGE]`, each a range: `256MiB`, `1GiB,1h`, `@1MiB:2MiB`. Raises ValueError."""
        size, _, age = text.partition(",")
        return cls(
            Range.parse(size, parse_size),
            Range.parse(age, parse_duration) if age.strip() else None,
        )

    def crossed_by(self, report: MirrorReport) -> str:
        """What in the report crosses this limit, in words; "" if nothing."""
        words = []
        oos, rpo = report.out_of_sync_bytes, report.rpo_seconds
        if oos is not None and self.bytes.alerts(oos):
            words.append(f"{format_size(oos)} out of sync {self.bytes.words(lambda v: format_size(int(v)))}")
        if self.rpo_seconds is not None and rpo is not None and self.rpo_seconds.alerts(rpo):
            words.append(f"RPO {format_duration(rpo)} {self.rpo_seconds.words(format_duration)}")
        return ", ".join(words)


DEFAULT_WARNING = Limit(Range(0, 256 * 1024**2), Range(0, 15 * 60))
DEFAULT_CRITICAL = Limit(Range(0, 1024**3), Range(0, 60 * 60))


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
    # What a replica's site shows of why its leg cannot take writes, said whatever else is wrong:
    # a DR site that cannot reach the primary still reports its own full pool.
    troubles = [words for leg in report.legs if (words := _leg_words(report, leg))]
    unreachable = [leg for leg in report.legs if not leg.site_reachable]
    if unreachable:
        legs = ", ".join(f"{leg.role} leg on {leg.site}" for leg in unreachable)
        return (
            Status.CRITICAL,
            f"{name} {report.state}: {'; '.join([f'site unreachable for {legs}', *troubles])}",
        )
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
    if report.syncs_held:
        return (
            Status.CRITICAL,
            f"{name} {report.state}: md holds every resync of {report.device} at a sector (an add of a"
            " leg that did not finish): `remirror reconcile` or `apply` lets them go",
        )
    if report.state not in (State.MIRRORED, State.SYNCING):
        return Status.CRITICAL, f"{name} {report.state}: {'; '.join([report.reason, *troubles])}"
    lacking = [leg for leg in report.legs if leg.missed]
    if lacking:  # the primary's own leg (a replica's makes the state MIRROR_DEFUNCT)
        return Status.CRITICAL, f"{name} {report.state}: {report.reason}"
    cdp = report.cdp
    if cdp is not None and cdp.pool_mode not in ("rw", ""):
        return (
            Status.CRITICAL,
            f"{name} {report.state}: CDP pool {cdp.pool_mode}: writes to the volume may fail",
        )
    if cdp is not None and cdp.pool_mode == "":
        return Status.CRITICAL, f"{name} {report.state}: CDP stack not active (apply activates it)"
    if troubles:
        return Status.CRITICAL, f"{name} {report.state}: {troubles[0]}"
    if crossed := critical.crossed_by(report):
        return Status.CRITICAL, f"{name} {report.state}: {crossed}"
    alerts = [leg.drills.alert for leg in report.legs if leg.drills is not None and leg.drills.alert]
    if crossed_drill := next((why for level, why in alerts if level == Status.CRITICAL), None):
        return Status.CRITICAL, f"{name} {report.state}: {crossed_drill}"
    if (verified := report.verify) is not None and verified.result == "differ":
        when = datetime.fromtimestamp(verified.finished, UTC).strftime("%Y-%m-%d %H:%M UTC")
        return (
            Status.CRITICAL,
            f"{name} {report.state}: the last verify ({when}) found {format_size(verified.mismatched_bytes)}"
            " that differ between the legs (`remirror verify` says where; docs/status.md)",
        )
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
    for leg in report.legs:
        if leg.points is not None and leg.points.overdue:
            age = (
                "no point yet"
                if leg.points.newest_age_seconds is None
                else f"newest point {format_duration(leg.points.newest_age_seconds)} old"
            )
            return (
                Status.WARNING,
                f"{name} {report.state}: {leg.site}'s own points: {age}, every"
                f" {format_duration(leg.points.every_seconds)} (is its `remirror cdp run` running?)",
            )
    if alerts:
        return Status.WARNING, f"{name} {report.state}: {alerts[0][1]}"
    if report.notes:
        return Status.WARNING, f"{name} {report.state}: {'; '.join(report.notes)}"
    return Status.OK, f"{name} MIRRORED"


def _perfdata(report: MirrorReport, warning: Limit, critical: Limit) -> str:
    """Per mirror: out-of-sync bytes, RPO, resync percent, cache dirty blocks, writes in flight to
    the replicas (in async mode, acknowledged writes a replica may still lack)."""

    def number(value: float | None, unit: str = "") -> str:
        # `U` (unknown) takes no unit: `'x'=UB` is not perfdata.
        if value is None:
            return "U"
        return (f"{value:.0f}" if float(value).is_integer() else f"{value:.1f}") + unit

    def limit(value: Range | None) -> str:
        return "" if value is None else value.perfdata()

    name = report.mirror
    dirty = [leg.cache_dirty_blocks for leg in report.legs if leg.cache_dirty_blocks is not None]
    flying = [leg.writes_in_flight for leg in report.legs if leg.writes_in_flight is not None]
    return " ".join(
        [
            f"'{name} out_of_sync'={number(report.out_of_sync_bytes, 'B')}"
            f";{warning.bytes.perfdata()};{critical.bytes.perfdata()};0",
            f"'{name} rpo'={number(report.rpo_seconds, 's')}"
            f";{limit(warning.rpo_seconds)};{limit(critical.rpo_seconds)};0",
            f"'{name} resync'={number(report.resync.percent if report.resync else 100.0, '%')};;;0;100",
            f"'{name} cache_dirty'={number(sum(dirty) if dirty else 0)};;;0",
            f"'{name} in_flight'={number(max(flying) if flying else None)};;;0",
        ]
    )


def pool_words(site: str, mirror: str, points: CdpReport) -> str:
    """What a replica's points filling their pool mean, and what to do, for people."""
    used = (points.pool_used_bytes or 0) / (points.pool_total_bytes or 1)
    critical = points.pool_critical or 0.0
    return (
        f"the points {site} keeps of its leg fill {used:.0%} of their pool (critical at {critical:.0%}):"
        f" when it is full the replica's writes fail and its leg leaves the mirror; at {site}, prune"
        f" them (`remirror cdp prune PROFILE {mirror} --leg --keep DURATION --yes`) or keep less"
        " (`points.keep`)"
    )


def _leg_words(report: MirrorReport, leg: LegReport) -> str:
    """What keeps a replica leg from taking writes, besides md's view: its points' pool, full or
    filling, and the reconciler leaving it out; "" when nothing does."""
    words = []
    points = leg.points
    if points is not None and points.pool_mode not in ("rw", ""):
        words.append(
            f"{leg.site}'s own points: pool {points.pool_mode} (its writes fail rather than drop a point:"
            f" prune them there, `remirror cdp prune PROFILE {report.mirror} --leg --keep DURATION --yes`)"
        )
    elif points is not None and points.pool_filling:
        words.append(pool_words(leg.site, report.mirror, points))
    if leg.held_until is not None:
        words.append(f"the leg on {leg.site} is left out after {leg.failed_readds} failed re-adds")
    return "; ".join(words)
