"""How `remirror status` shows the mirrors' reports: a `drbdadm status`-like text, and the
`-o json` document (docs/status.md)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from remirror.health.drill import DrillReport
from remirror.health.report import CdpReport, LegReport, MirrorReport
from remirror.profile.schedule import ResyncLimit


def status_text(reports: list[MirrorReport], now: float, unreachable: dict[str, str] | None = None) -> str:
    """`drbdadm status`-like text: a line per mirror, then one per leg; then why each site that
    could not be reached was not (`unreachable`: site -> reason)."""
    from remirror.units import format_duration, format_size

    lines = []
    for r in reports:
        lines.append(f"{r.mirror} {r.device} {r.mode}: {r.state}: {r.reason}")
        if r.writes_held:
            lines.append(f"  WRITES HELD: md holds every write to {r.device} (reconcile or apply ends it)")
        if r.syncs_held:
            lines.append(f"  RESYNCS HELD: md holds every resync of {r.device} (reconcile or apply ends it)")
        if r.resync is not None:
            speed = f" at {format_size(r.resync.speed)}/s" if r.resync.speed else ""
            speed += f" (limit {format_size(r.resync_max)}/s)" if r.resync_max is not None else ""
            eta = f", about {format_duration(r.resync.eta_seconds)} left" if r.resync.eta_seconds else ""
            lines.append(f"  {r.resync.action} {r.resync.percent:.1f}%{speed}{eta}")
        if r.schedule is not None:
            lines.append("  " + _schedule_text(r.schedule))
        if r.verify is not None:
            said = _VERIFIED[r.verify.result].format(size=format_size(r.verify.mismatched_bytes))
            lines.append(f"  last verify {format_duration(max(0.0, now - r.verify.finished))} ago: {said}")
        if r.write_behind is not None:
            lines.append(f"  write-behind {r.write_behind} (most held: {r.write_behind_high_water})")
        if r.cdp is not None:
            lines.append("  " + _cdp_text(r.cdp, format_size, format_duration))
        for leg in r.legs:
            lines.append("  " + _leg_text(leg, format_size, format_duration))
        lines += [f"  note: {note}" for note in r.notes]
    lines += [f"site {site} unreachable: {why}" for site, why in sorted((unreachable or {}).items())]
    return "\n".join(lines)


def _leg_text(leg: LegReport, size: Callable[[int], str], duration: Callable[[float], str]) -> str:
    words = [f"{leg.role:<7} {leg.site}:{leg.disk}", leg.status]
    if not leg.site_reachable:
        words.append("site unreachable")
    if leg.write_mostly:
        words.append("write-mostly")
    if leg.role == "replica":
        words.append(f"session {leg.session or 'none'}")
        if leg.rtt_seconds is not None:
            words.append(f"rtt {leg.rtt_seconds * 1000:.1f}ms")
        if leg.writes_in_flight is not None:
            words.append(f"in flight {leg.writes_in_flight} write(s)")
    if leg.out_of_sync_bytes is not None:
        words.append(f"out-of-sync {size(leg.out_of_sync_bytes)}")
    if leg.missed:
        ranges = ", ".join(f"{size(length)} at {size(at)}" for at, length in leg.missed)
        words.append(f"LACKS {ranges} (writes its disk failed: md's bad block log)")
    if leg.failed_readds:
        words.append(f"{leg.failed_readds} re-add(s) since in sync")
    if leg.held_until is not None:
        until = time.strftime("%H:%M", time.localtime(leg.held_until))
        words.append(f"LEFT OUT until {until} (`reconcile --retry`)")
    if leg.role == "replica":
        words.append(f"rpo {duration(leg.rpo_seconds)}" if leg.rpo_seconds is not None else "rpo unknown")
    if leg.cache_dirty_blocks is not None:
        words.append(f"cache dirty {leg.cache_dirty_blocks}")
        if leg.cache_writeback_blocks:
            words.append(f"writing back {leg.cache_writeback_blocks}")
        if leg.cache_error:
            words.append(f"CACHE ERROR {leg.cache_error}")
    if leg.points is not None:
        words.append("own " + _cdp_text(leg.points, size, duration).removeprefix("cdp "))
    if leg.drills is not None:
        words.append(leg.drills.words())
    return "  ".join(words)


def _cdp_text(cdp: CdpReport, size: Callable[[int], str], duration: Callable[[float], str]) -> str:
    newest = (
        "no point yet" if cdp.newest_age_seconds is None else f"newest {duration(cdp.newest_age_seconds)} ago"
    )
    words = [
        f"cdp {cdp.points} point(s)",
        newest,
        f"window {duration(cdp.window_seconds)} of {duration(cdp.keep_seconds)}",
    ]
    if cdp.tiers is not None:
        words.append("by tier " + ", ".join(f"{tier} {count}" for tier, count in cdp.tiers.items()))
    if cdp.overdue:
        words.append(f"OVERDUE (every {duration(cdp.every_seconds)})")
    if cdp.pool_used_bytes is not None and cdp.pool_total_bytes:
        words.append(f"pool {size(cdp.pool_used_bytes)} of {size(cdp.pool_total_bytes)} ({cdp.pool_mode})")
        if cdp.pool_filling:
            words.append(f"POOL FILLING (critical at {cdp.pool_critical:.0%})")
    else:
        words.append("stack not active")
    return "  ".join(words)


def _cdp_json(cdp: CdpReport | None) -> dict[str, Any] | None:
    """Points kept (a mirror's `cdp`, a leg's own `points`), as `status -o json` shows them."""
    if cdp is None:
        return None
    return {
        "points": cdp.points,
        "newest_age_seconds": cdp.newest_age_seconds,
        "window_seconds": cdp.window_seconds,
        "every_seconds": cdp.every_seconds,
        "keep_seconds": cdp.keep_seconds,
        "tiers": cdp.tiers,
        "overdue": cdp.overdue,
        "pool_used_bytes": cdp.pool_used_bytes,
        "pool_total_bytes": cdp.pool_total_bytes,
        "pool_mode": cdp.pool_mode or None,
        "pool_critical_ratio": cdp.pool_critical,
    }


def _drill_json(drills: DrillReport | None) -> dict[str, Any] | None:
    """A replica's DR drills (remirror.drill), as `status -o json` shows them."""
    if drills is None:
        return None
    last = drills.last
    return {
        "last_passed": None if last is None else last.passed,
        "last_age_seconds": drills.last_age_seconds,
        "last_pass_age_seconds": drills.last_pass_age_seconds,
        "rpo_seconds": None if last is None else last.rpo,
        "rto_seconds": None if last is None else last.rto,
        "every_seconds": drills.every_seconds,
        "critical_after_seconds": drills.critical_seconds,
    }


def status_json(r: MirrorReport) -> dict[str, Any]:
    """One mirror in `status -o json` (documented in docs/status.md; stable within a schema version)."""
    return {
        "mirror": r.mirror,
        "device": r.device,
        "primary": r.primary,
        "mode": r.mode,
        "state": r.state.value,
        "reason": r.reason,
        "notes": list(r.notes),
        "out_of_sync_bytes": r.out_of_sync_bytes,
        "rpo_seconds": r.rpo_seconds,
        "resync": None
        if r.resync is None
        else {
            "action": r.resync.action,
            "percent": round(r.resync.percent, 2),
            "done_bytes": r.resync.done_bytes,
            "total_bytes": r.resync.total_bytes,
            "speed_bytes_per_second": r.resync.speed,
            "eta_seconds": r.resync.eta_seconds,
        },
        "write_behind": r.write_behind,
        "write_behind_high_water": r.write_behind_high_water,
        "resync_max_bytes_per_second": r.resync_max,
        "verify": r.verify.as_json() if r.verify is not None else None,
        "resync_schedule": None
        if r.schedule is None
        else {
            "bytes_per_second": r.schedule.rate,
            "window": r.schedule.window,
            "until": r.schedule.until.isoformat() if r.schedule.until is not None else None,
        },
        "writes_held": r.writes_held,
        "syncs_held": r.syncs_held,
        "cdp": _cdp_json(r.cdp),
        "legs": [
            {
                "site": leg.site,
                "disk": leg.disk,
                "role": leg.role,
                "status": leg.status,
                "member": leg.member or None,
                "session": leg.session or None,
                "write_mostly": leg.write_mostly,
                "site_reachable": leg.site_reachable,
                "out_of_sync_bytes": leg.out_of_sync_bytes,
                "rpo_seconds": leg.rpo_seconds,
                "rtt_seconds": leg.rtt_seconds,
                "writes_in_flight": leg.writes_in_flight,
                "cache_dirty_blocks": leg.cache_dirty_blocks,
                "cache_writeback_blocks": leg.cache_writeback_blocks,
                "cache_error": leg.cache_error,
                "missed": [{"offset": at, "length": length} for at, length in leg.missed],
                "failed_readds": leg.failed_readds,
                "held_until": leg.held_until,
                "points": _cdp_json(leg.points),
                "drill": _drill_json(leg.drills),
            }
            for leg in r.legs
        ],
    }


_VERIFIED = {
    "match": "the legs matched",
    "differ": "{size} DIFFER between the legs (`remirror verify` says where)",
    "cannot_tell": "it could not tell (chunks written during it, or a leg not in sync)",
}


def _schedule_text(limit: ResyncLimit) -> str:
    """The schedule's limit now, in the link's units, the window that sets it, and its end."""
    from remirror.units import format_bits

    rate = "unlimited (md's system limit)" if limit.rate is None else format_bits(limit.rate)
    window = f"window {limit.window}" if limit.window is not None else "outside the schedule's windows"
    until = f", until {limit.until:%a %H:%M}" if limit.until is not None else ""
    return f"resync limit {rate} by the schedule: {window}{until}"
