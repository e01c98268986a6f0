"""What `status`, `check` and `metrics` say of a replica's DR drills (remirror.drill). Pure.

A drill record lives on the site that ran it (the DR site): observing
carries its last drill and its last passing drill. With `drill:` in the
profile the leg is expected to pass one every so often: `check` is
CRITICAL when none has passed for `critical_after` (every + 1 day by
default: a weekly drill missed is a page), WARNING when the last one failed
or none ever ran.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from remirror.facts.drill import DrillRecord
from remirror.facts.site import SiteFacts
from remirror.profile.model import Mirror, ReplicaLeg
from remirror.profile.names import points_key
from remirror.units import format_duration


@dataclass(frozen=True)
class DrillReport:
    """A replica's drills as its site holds them, judged against what the profile expects."""

    last: DrillRecord | None
    last_pass: DrillRecord | None
    last_age_seconds: float | None
    last_pass_age_seconds: float | None
    every_seconds: float | None  # None: not scheduled (`drill:` absent), only drilled by hand
    critical_seconds: float | None
    alert: tuple[int, str] | None = None  # (1 WARNING | 2 CRITICAL, why) for `check`

    def words(self) -> str:
        """For `status`: the last drill, and the last that passed when that is another."""
        last = self.last
        if last is None or self.last_age_seconds is None:
            return "drill: never"
        age = format_duration(self.last_age_seconds)
        if last.passed:
            rto = format_duration(last.rto) if last.rto is not None else "?"
            return f"drill: passed {age} ago (RPO {format_duration(last.rpo)}, RTO {rto})"
        passed = self.last_pass_age_seconds
        since = f", last pass {format_duration(passed)} ago" if passed is not None else ", never passed"
        return f"drill: FAILED {age} ago{since}"


def leg_drills(mirror: Mirror, leg: ReplicaLeg, site: SiteFacts | None, now: float) -> DrillReport | None:
    """The leg's drills, if it is drilled or ever was; None otherwise."""
    kept = site.drills.get(points_key(mirror, leg.site)) if site is not None else None
    if leg.drill is None and kept is None:
        return None
    last = kept.last if kept else None
    last_pass = kept.last_pass if kept else None
    report = DrillReport(
        last=last,
        last_pass=last_pass,
        last_age_seconds=None if last is None else max(0.0, now - last.started),
        last_pass_age_seconds=None if last_pass is None else max(0.0, now - last_pass.started),
        every_seconds=leg.drill.every if leg.drill else None,
        critical_seconds=leg.drill.critical if leg.drill else None,
    )
    return replace(report, alert=_alert(leg.site, report))


def _alert(site: str, drills: DrillReport) -> tuple[int, str] | None:
    last_age = format_duration(drills.last_age_seconds or 0)
    failed = drills.last is not None and not drills.last.passed
    if drills.critical_seconds is None:  # drilled by hand only: a failure is worth a look
        return (1, f"the last drill at {site} FAILED {last_age} ago") if failed else None
    passed = drills.last_pass_age_seconds
    if passed is None:
        if drills.last is None:
            return 1, f"never drilled at {site} (run `remirror drill` there, or the role's timer)"
        return 2, f"no drill at {site} has passed (the last FAILED {last_age} ago)"
    if passed > drills.critical_seconds:
        return 2, f"no passing drill at {site} for {format_duration(passed)}"
    return (1, f"the last drill at {site} FAILED {last_age} ago") if failed else None
