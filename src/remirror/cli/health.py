"""`status`, `check`, `metrics`, `verify`: the mirrors as they are, for people, plugins and Prometheus."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from remirror.cli.output import emit_json, output_option, profile_argument
from remirror.errors import EXIT_FAILURE, VERIFY_CANNOT_TELL, VERIFY_DIFFER, RemirrorError

if TYPE_CHECKING:
    from remirror.health.drill import DrillReport
    from remirror.health.report import CdpReport, LegReport, MirrorReport
    from remirror.profile import Profile

DEFAULT_PROFILE = "/etc/remirror/remirror.yaml"

# Cron and timers run these verbs with no argument: the profile comes from
# $REMIRROR_PROFILE or the one place a package would install it.
optional_profile = click.argument("profile_path", metavar="[PROFILE]", required=False)


def _profile_path(given: str | None) -> str:
    return given or os.environ.get("REMIRROR_PROFILE") or DEFAULT_PROFILE


def _reports(profile: Profile) -> list[MirrorReport]:
    from remirror.controller import Controller
    from remirror.monitor import snapshot

    controller = Controller(profile)
    try:
        return snapshot(controller)[0]
    finally:
        controller.close()


@click.command()
@optional_profile
@output_option
@click.option("--watch", "every", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="Refresh every SECONDS until interrupted.")  # fmt: skip
def status(profile_path: str | None, output: str, every: float | None) -> int:
    """Show each mirror's state and, per leg, what it misses, how old its copy is, and the link.

    Exit 0 when every site answered and every mirror is built, whatever its
    state (`check` judges health); 1 when a site could not be reached or a
    mirror of the profile was never built (ABSENT): what it shows is not all
    there is.
    """
    from remirror.controller import Controller
    from remirror.health import State
    from remirror.monitor import snapshot
    from remirror.profile import load_profile

    profile = load_profile(_profile_path(profile_path))
    # One controller for every refresh: its remote agents stay up between them.
    controller = Controller(profile)
    try:
        while True:
            reports = snapshot(controller)[0]
            unreachable = dict(controller.unreachable)
            if output == "json":
                emit_json(
                    "status",
                    {
                        "profile": profile.name,
                        "mirrors": [status_json(r) for r in reports],
                        "unreachable": unreachable,
                    },
                )
            else:
                if every is not None and sys.stdout.isatty():
                    click.echo("\033[H\033[2J", nl=False)  # refresh in place: cursor home, clear screen
                click.echo(status_text(reports, time.time(), unreachable))
            if every is None:
                absent = any(r.state == State.ABSENT for r in reports)
                return EXIT_FAILURE if unreachable or absent else 0
            time.sleep(every)
    finally:
        controller.close()


@click.command()
@optional_profile
@click.option("-w", "--warning", default="256MiB,15m", show_default=True, metavar="RANGE[,RANGE]",
              help="WARNING when out-of-sync bytes (or the RPO) leave this range (monitoring-plugins"
              " syntax: 256MiB is 0:256MiB; @ alerts inside).")  # fmt: skip
@click.option("-c", "--critical", default="1GiB,1h", show_default=True, metavar="RANGE[,RANGE]",
              help="CRITICAL when out-of-sync bytes (or the RPO) leave this range.")  # fmt: skip
@click.option("-t", "--timeout", type=click.FloatRange(min=1), default=60, show_default=True,
              help="Seconds before giving up (CRITICAL, as monitoring-plugins do).")  # fmt: skip
def check(profile_path: str | None, warning: str, critical: str, timeout: float) -> int:
    """Monitoring-plugins check: exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; perfdata after `|`."""
    from remirror.health.check import Limit, Status, judge, unknown

    try:
        limits = Limit.parse(warning), Limit.parse(critical)
    except ValueError as error:
        return _verdict(unknown(f"bad threshold: {error}"))

    def run() -> Any:
        from remirror.profile import load_profile

        try:
            profile = load_profile(_profile_path(profile_path))
            return judge(_reports(profile), *limits)
        except RemirrorError as error:  # a bad profile, an agent that answers nonsense
            return unknown(error.one_line())

    verdict = _within(timeout, run)
    if verdict is None:
        click.echo(f"REMIRROR CRITICAL - no answer from the sites within {timeout:g}s")
        sys.stdout.flush()
        os._exit(Status.CRITICAL)  # threads may still wait on a site: do not wait for them
    return _verdict(verdict)


@click.command()
@optional_profile
@click.option("--textfile", "directory", type=click.Path(file_okay=False), default=None,
              help="Write remirror_PROFILE.prom here (atomically) for node_exporter.")  # fmt: skip
def metrics(profile_path: str | None, directory: str | None) -> int:
    """Prometheus text format, on stdout or into node_exporter's textfile directory."""
    from remirror import __version__
    from remirror.files import write_atomically
    from remirror.health.metrics import render
    from remirror.profile import load_profile

    profile = load_profile(_profile_path(profile_path))
    text = render(_reports(profile), time.time(), profile.name, __version__)
    if directory is None:
        click.echo(text, nl=False)
    else:
        # node_exporter reads every *.prom file: the temporary file is hidden and renamed in.
        write_atomically(Path(directory) / f"remirror_{profile.name}.prom", text, 0o644)
    return 0


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option("--range", "span", default=None, metavar="OFFSET:LENGTH",
              help="Only this part of the mirror device, e.g. 100MiB:1MiB (default: all of it).")  # fmt: skip
@click.option("--chunk", default="1MiB", show_default=True, metavar="SIZE",
              help="Chunk size (a multiple of 4KiB): how precise a mismatch is.")  # fmt: skip
@output_option
def verify(profile_path: str, mirror_name: str, span: str | None, chunk: str, output: str) -> int:
    """Compare a mirror's legs online: each site hashes its own leg, only digests cross the link.

    Exit as cmp(1) does: 0 the legs match; 1 they differ (the ranges are
    printed); 2 it could not tell (a leg not in sync, chunks written during
    the check, a site that failed); 3 bad input.
    """
    from remirror.controller import Controller
    from remirror.errors import UsageError
    from remirror.health.verify import Span
    from remirror.monitor import verify as run_verify
    from remirror.profile import load_profile
    from remirror.units import parse_size

    try:
        wanted = Span.parse(span) if span else None
        chunk_bytes = parse_size(chunk)
    except ValueError as error:
        raise UsageError(f"verify: {error}") from None
    profile = load_profile(profile_path)
    controller = Controller(profile)
    try:
        found = run_verify(controller, mirror_name, wanted, chunk_bytes)
    finally:
        controller.close()
    code = VERIFY_DIFFER if found.mismatched else VERIFY_CANNOT_TELL if found.busy else 0
    if output == "json":
        emit_json(
            "verify",
            {
                "mirror": found.mirror,
                "range": {"offset": found.span.offset, "length": found.span.length},
                "chunk": found.chunk,
                "legs": list(found.legs),
                "mismatched": [{"offset": s.offset, "length": s.length} for s in found.mismatched],
                "busy": [{"offset": s.offset, "length": s.length} for s in found.busy],
                "bytes_received": found.bytes_received,
                "exit_code": code,
            },
        )
        return code
    from remirror.units import format_size

    received = ", ".join(f"{site} {format_size(n)}" for site, n in found.bytes_received.items() if n)
    click.echo(
        f"{found.mirror}: compared {format_size(found.span.length)} from byte {found.span.offset}"
        f" in chunks of {format_size(found.chunk)} on {', '.join(found.legs)}"
        + (f"; answers over the link: {received}" if received else "")
    )
    for s in found.mismatched:
        click.echo(f"{found.mirror}: MISMATCH at byte {s.offset}, {s.length} bytes ({format_size(s.length)})")
    for s in found.busy:
        click.echo(
            f"{found.mirror}: not verified (written during the check) at byte {s.offset}, {s.length} bytes"
        )
    if code == 0:
        click.echo(f"{found.mirror}: the legs match")
    return code


def _verdict(verdict: Any) -> int:
    click.echo(verdict.text)
    return int(verdict.status)


def _within(seconds: float, work: Callable[[], Any]) -> Any:
    """`work()`'s result (or its exception, raised here), or None when it takes longer than `seconds`."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = work()
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


def status_text(reports: list[MirrorReport], now: float, unreachable: dict[str, str] | None = None) -> str:
    """`drbdadm status`-like text: a line per mirror, then one per leg; then why each site that
    could not be reached was not (`unreachable`: site -> reason)."""
    from remirror.units import format_duration, format_size

    lines = []
    for r in reports:
        lines.append(f"{r.mirror} {r.device} {r.mode}: {r.state}: {r.reason}")
        if r.writes_held:
            lines.append(f"  WRITES HELD: md holds every write to {r.device} (reconcile or apply ends it)")
        if r.resync is not None:
            speed = f" at {format_size(r.resync.speed)}/s" if r.resync.speed else ""
            speed += f" (limit {format_size(r.resync_max)}/s)" if r.resync_max is not None else ""
            eta = f", about {format_duration(r.resync.eta_seconds)} left" if r.resync.eta_seconds else ""
            lines.append(f"  {r.resync.action} {r.resync.percent:.1f}%{speed}{eta}")
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
    if cdp.overdue:
        words.append(f"OVERDUE (every {duration(cdp.every_seconds)})")
    if cdp.pool_used_bytes is not None and cdp.pool_total_bytes:
        words.append(f"pool {size(cdp.pool_used_bytes)} of {size(cdp.pool_total_bytes)} ({cdp.pool_mode})")
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
        "overdue": cdp.overdue,
        "pool_used_bytes": cdp.pool_used_bytes,
        "pool_total_bytes": cdp.pool_total_bytes,
        "pool_mode": cdp.pool_mode or None,
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
        "writes_held": r.writes_held,
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
                "points": _cdp_json(leg.points),
                "drill": _drill_json(leg.drills),
            }
            for leg in r.legs
        ],
    }
