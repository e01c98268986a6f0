"""`remirror metrics`: the reports in Prometheus' text exposition format. Pure.

Names carry the `remirror_` prefix and base units (bytes, seconds, ratios),
as Prometheus' naming guide asks. Every series carries the profile's name
(`profile`): two profiles on one host export distinct series, into their
own textfiles. A value that cannot be known now (the RPO
of a leg never seen in sync, the round trip to an unreachable portal) is left
out rather than given as 0: a missing series alerts as `absent()`, a false 0
would not alert at all.
"""

from __future__ import annotations

from collections.abc import Iterator

from remirror.health.drill import DrillReport
from remirror.health.report import MirrorReport
from remirror.health.state import IN_SYNC, State
from remirror.health.verify import RESULT_CODES

# name -> (type, help)
METRICS = {
    "remirror_mirror_state": ("gauge", "1 for the state each mirror is in, 0 for the others."),
    "remirror_leg_in_sync": ("gauge", "1 if the leg holds all of the mirror's data."),
    "remirror_leg_out_of_sync_bytes": ("gauge", "Bytes the leg misses (whole bitmap chunks)."),
    "remirror_session_up": ("gauge", "1 if the replica leg's iSCSI session is logged in."),
    "remirror_site_up": ("gauge", "1 if the site's agent answered."),
    "remirror_rpo_seconds": ("gauge", "Age of the replica's copy: 0 in sync, else time since last in sync."),
    "remirror_link_rtt_seconds": ("gauge", "TCP handshake time to the replica's portal."),
    "remirror_leg_writes_in_flight": (
        "gauge",
        "Writes sent to the replica leg and not completed (async: acknowledged writes it may lack).",
    ),
    "remirror_leg_bad_blocks_bytes": (
        "gauge",
        "Bytes the leg failed to write and md went on without (its bad block log): it lacks them.",
    ),
    "remirror_leg_failed_readds": ("gauge", "Re-adds of the replica leg since it was last in sync."),
    "remirror_leg_held": (
        "gauge",
        "1 if the reconciler leaves the replica leg out (it failed again after repeated re-adds).",
    ),
    "remirror_writes_held": ("gauge", "1 if md holds every write to the mirror (an unfinished leg move)."),
    "remirror_resync_progress_ratio": ("gauge", "How far md's resync or recovery is, 0-1."),
    "remirror_resync_speed_bytes_per_second": ("gauge", "md's resync speed."),
    "remirror_resync_eta_seconds": ("gauge", "Estimated seconds until the resync ends."),
    "remirror_write_behind_limit": ("gauge", "md's write-behind limit (writes), async mode."),
    "remirror_write_behind_high_water": ("gauge", "The most writes md has held behind at once."),
    "remirror_cache_dirty_bytes": (
        "gauge",
        "Data in the leg's cache not yet on its disk (legs with a cache).",
    ),
    "remirror_cache_writeback_bytes": ("gauge", "Data the leg's cache is writing back now."),
    "remirror_cache_error": ("gauge", "The leg's cache error indicator (an errno; 0 when fine)."),
    "remirror_cdp_points": ("gauge", "Recovery points kept (mirrors with cdp)."),
    "remirror_cdp_newest_point_age_seconds": ("gauge", "Age of the newest recovery point."),
    "remirror_cdp_window_seconds": ("gauge", "Age of the oldest recovery point: the window actually kept."),
    "remirror_cdp_interval_seconds": ("gauge", "The profile's `every`: a point is due this often."),
    "remirror_cdp_pool_used_bytes": ("gauge", "Data in the CDP thin pool (the volume and its points)."),
    "remirror_cdp_pool_size_bytes": ("gauge", "The CDP thin pool's data size."),
    "remirror_points_pool_used_bytes": ("gauge", "Data in the thin pool under a replica's own points."),
    "remirror_points_pool_size_bytes": ("gauge", "The size of the thin pool under a replica's own points."),
    "remirror_points_pool_critical_ratio": (
        "gauge",
        "The share of that pool in use at which check is CRITICAL (points.pool_critical).",
    ),
    "remirror_drill_last_passed": ("gauge", "1 if the replica's last DR drill passed, 0 if it failed."),
    "remirror_drill_last_timestamp_seconds": ("gauge", "When the replica's last DR drill started."),
    "remirror_drill_last_pass_timestamp_seconds": ("gauge", "When its last passing DR drill started."),
    "remirror_drill_rpo_seconds": ("gauge", "The last passing drill's point age when it began (its RPO)."),
    "remirror_drill_rto_seconds": ("gauge", "The last passing drill's time until its checks passed (RTO)."),
    "remirror_verify_last_result": (
        "gauge",
        "The last verify from this host: 0 the legs matched, 1 they differed, 2 it could not tell.",
    ),
    "remirror_verify_last_timestamp_seconds": ("gauge", "When the last verify from this host finished."),
    "remirror_verify_last_mismatched_bytes": ("gauge", "Bytes the last verify found different between legs."),
    "remirror_verify_last_duration_seconds": ("gauge", "How long the last verify took."),
    "remirror_check_timestamp_seconds": ("gauge", "When these metrics were gathered (unix time)."),
    "remirror_build_info": ("gauge", "Always 1: the version of remirror that wrote these metrics."),
}


def render(reports: list[MirrorReport], now: float, profile: str, version: str) -> str:
    """The exposition text of `profile`'s reports, every family with HELP and TYPE, ending in a
    newline; `version` is remirror's, for remirror_build_info."""
    samples: dict[str, list[str]] = {name: [] for name in METRICS}
    for name, labels, value in _samples(reports, now, version):
        if value is None:  # unknown now: left out, see the module's docstring
            continue
        samples[name].append(f"{name}{_labels({'profile': profile, **labels})} {_value(value)}")
    lines = []
    for name, (kind, words) in METRICS.items():
        if not samples[name]:
            continue
        lines += [f"# HELP {name} {words}", f"# TYPE {name} {kind}", *samples[name]]
    return "\n".join(lines) + "\n"


def _samples(
    reports: list[MirrorReport], now: float, version: str
) -> Iterator[tuple[str, dict[str, str], float | None]]:
    sites: dict[str, bool] = {}
    for r in reports:
        mirror = {"mirror": r.mirror}
        for state in State:
            yield "remirror_mirror_state", {**mirror, "state": state.value}, float(r.state is state)
        for leg in r.legs:
            sites[leg.site] = sites.get(leg.site, True) and leg.site_reachable
            labels = {**mirror, "leg": leg.site, "role": leg.role}
            yield "remirror_leg_in_sync", labels, float(leg.status == IN_SYNC)
            yield "remirror_leg_out_of_sync_bytes", labels, leg.out_of_sync_bytes
            yield "remirror_leg_bad_blocks_bytes", labels, float(sum(length for _, length in leg.missed))
            if leg.role == "replica":
                yield "remirror_leg_failed_readds", labels, leg.failed_readds
                yield "remirror_leg_held", labels, float(leg.held_until is not None)
                yield "remirror_session_up", labels, float(leg.session == "LOGGED_IN")
                yield "remirror_rpo_seconds", labels, leg.rpo_seconds
                yield "remirror_link_rtt_seconds", labels, leg.rtt_seconds
                yield "remirror_leg_writes_in_flight", labels, leg.writes_in_flight
            if leg.cache_dirty_blocks is not None:
                block = leg.cache_block_bytes
                yield "remirror_cache_dirty_bytes", labels, _times(leg.cache_dirty_blocks, block)
                yield "remirror_cache_writeback_bytes", labels, _times(leg.cache_writeback_blocks, block)
                yield "remirror_cache_error", labels, leg.cache_error
            if leg.points is not None:
                yield "remirror_points_pool_used_bytes", labels, leg.points.pool_used_bytes
                yield "remirror_points_pool_size_bytes", labels, leg.points.pool_total_bytes
                yield "remirror_points_pool_critical_ratio", labels, leg.points.pool_critical
            if leg.drills is not None:
                yield from _drill_samples(labels, leg.drills)
        if r.resync is not None:
            yield "remirror_resync_progress_ratio", mirror, r.resync.percent / 100
            yield "remirror_resync_speed_bytes_per_second", mirror, r.resync.speed
            yield "remirror_resync_eta_seconds", mirror, r.resync.eta_seconds
        yield "remirror_writes_held", mirror, float(r.writes_held)
        yield "remirror_write_behind_limit", mirror, r.write_behind
        yield "remirror_write_behind_high_water", mirror, r.write_behind_high_water
        if r.verify is not None:
            yield "remirror_verify_last_result", mirror, float(RESULT_CODES[r.verify.result])
            yield "remirror_verify_last_timestamp_seconds", mirror, r.verify.finished
            yield "remirror_verify_last_mismatched_bytes", mirror, float(r.verify.mismatched_bytes)
            yield "remirror_verify_last_duration_seconds", mirror, r.verify.seconds
        if r.cdp is not None:
            yield "remirror_cdp_points", mirror, r.cdp.points
            yield "remirror_cdp_newest_point_age_seconds", mirror, r.cdp.newest_age_seconds
            yield "remirror_cdp_window_seconds", mirror, r.cdp.window_seconds
            yield "remirror_cdp_interval_seconds", mirror, r.cdp.every_seconds
            yield "remirror_cdp_pool_used_bytes", mirror, r.cdp.pool_used_bytes
            yield "remirror_cdp_pool_size_bytes", mirror, r.cdp.pool_total_bytes
    for site, up in sorted(sites.items()):
        yield "remirror_site_up", {"site": site}, float(up)
    yield "remirror_check_timestamp_seconds", {}, now
    yield "remirror_build_info", {"version": version}, 1.0


def _drill_samples(
    labels: dict[str, str], drills: DrillReport
) -> Iterator[tuple[str, dict[str, str], float | None]]:
    last, passed = drills.last, drills.last_pass
    if last is not None:
        yield "remirror_drill_last_passed", labels, float(last.passed)
        yield "remirror_drill_last_timestamp_seconds", labels, last.started
    if passed is not None:
        yield "remirror_drill_last_pass_timestamp_seconds", labels, passed.started
        yield "remirror_drill_rpo_seconds", labels, passed.rpo
        yield "remirror_drill_rto_seconds", labels, passed.rto


def _times(blocks: int | None, block_bytes: int | None) -> float | None:
    """Blocks in bytes; unknown (left out) when either is."""
    return None if blocks is None or block_bytes is None else float(blocks * block_bytes)


def _labels(labels: dict[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{key}="{_escape(value)}"' for key, value in labels.items()) + "}"


def _escape(value: str) -> str:
    """A label value as the exposition format quotes it: backslash, double quote and newline escaped."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _value(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
