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
    from remirror.health.report import MirrorReport
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
    from remirror.cli.status_view import status_json, status_text
    from remirror.controller import Controller
    from remirror.health import State
    from remirror.here import load_profile_here
    from remirror.monitor import snapshot

    profile = load_profile_here(_profile_path(profile_path))
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
        from remirror.here import load_profile_here

        try:
            profile = load_profile_here(_profile_path(profile_path))
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
    from remirror.here import load_profile_here

    profile = load_profile_here(_profile_path(profile_path))
    text = render(_reports(profile), time.time(), profile.name, __version__)
    if directory is None:
        click.echo(text, nl=False)
    else:
        # node_exporter reads every *.prom file: the temporary file is hidden and renamed in.
        write_atomically(Path(directory) / f"remirror_{profile.name}.prom", text, 0o644)
    return 0


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="[MIRROR]", required=False)
@click.option("--range", "span", default=None, metavar="OFFSET:LENGTH",
              help="Only this part of the mirror device, e.g. 100MiB:1MiB (default: all of it).")  # fmt: skip
@click.option("--chunk", default="1MiB", show_default=True, metavar="SIZE",
              help="Chunk size (a multiple of 4KiB): how precise a mismatch is.")  # fmt: skip
@click.option("--rate", default=None, metavar="RATE", envvar="REMIRROR_VERIFY_RATE",
              help="Read each leg no faster than this, on average (`50MB/s`, `400Mbit`): the"
              " disks' time left to the applications. Default: $REMIRROR_VERIFY_RATE, else as fast"
              " as they go.")  # fmt: skip
@output_option
def verify(
    profile_path: str, mirror_name: str | None, span: str | None, chunk: str, rate: str | None, output: str
) -> int:
    """Compare a mirror's legs online: each site hashes its own leg, only digests cross the link.

    Without MIRROR, each of the mirrors whose primary is this host, in turn (the timer's way). On a terminal a
    progress bar shows how far it is (none in cron or with -o json). What a verify of the whole
    mirror found is kept on this host for `check`, `status` and `metrics`.

    Exit as cmp(1) does: 0 the legs match; 1 they differ (the ranges are
    printed); 2 it could not tell (a leg not in sync, chunks written during
    the check, a site that failed); 3 bad input.
    """
    from remirror.controller import Controller
    from remirror.errors import UsageError
    from remirror.health.verify import Span
    from remirror.here import load_profile_here
    from remirror.units import parse_rate, parse_size

    try:
        wanted = Span.parse(span) if span else None
        chunk_bytes = parse_size(chunk)
        per_second = parse_rate(rate) if rate else None
    except ValueError as error:
        raise UsageError(f"verify: {error}") from None
    if mirror_name is None and output == "json":
        raise UsageError("verify -o json: name the mirror (one document, one mirror)")
    if mirror_name is None and wanted is not None:
        raise UsageError("verify --range: name the mirror it is a range of")
    profile = load_profile_here(profile_path)
    # Without MIRROR, the mirrors whose primary is this host (the timer's): a profile whose
    # mirrors have primaries at several sites has each verified once, by its own primary.
    here = [m.name for m in profile.mirrors if profile.sites[m.primary.site].is_local]
    names = [mirror_name] if mirror_name is not None else here
    code, alone = 0, mirror_name is not None
    for name in names:
        controller = Controller(profile)
        try:
            found = _verify_one(profile, controller, name, wanted, chunk_bytes, per_second, output, alone)
        finally:
            controller.close()
        # A difference found is the answer, whatever another mirror could not tell.
        code = VERIFY_DIFFER if VERIFY_DIFFER in (code, found) else max(code, found)
    return code


def _verify_one(
    profile: Any,
    controller: Any,
    name: str,
    wanted: Any,
    chunk: int,
    rate: float | None,
    output: str,
    alone: bool,
) -> int:
    """One mirror's verify, said, and kept when it compared the whole mirror
    (monitor.record_verify: a range that matched must not clear a difference found elsewhere);
    its exit code. Several in a row (`alone` false): one that cannot be compared (not MIRRORED)
    is said and kept as such, and the next one is compared."""
    from remirror.cli.output import progress_bar
    from remirror.health.verify import RESULT_CODES, VerifyRecord
    from remirror.monitor import record_verify
    from remirror.monitor import verify as run_verify
    from remirror.units import format_size

    started = time.monotonic()
    try:
        with progress_bar(f"verify {name}", shown=output == "text") as advance:
            found = run_verify(controller, name, wanted, chunk, rate=rate, progress=advance)
    except RemirrorError as error:
        if alone:
            raise
        click.echo(f"{name}: not compared: {error.one_line()}")
        record_verify(profile, VerifyRecord(name, time.time(), 0.0, "cannot_tell", 0, 0, rate))
        return VERIFY_CANNOT_TELL
    code = VERIFY_DIFFER if found.mismatched else VERIFY_CANNOT_TELL if found.busy else 0
    result = next(word for word, value in RESULT_CODES.items() if value == code)
    mismatched = sum(s.length for s in found.mismatched)
    seconds = round(time.monotonic() - started, 1)
    if wanted is None:  # the whole mirror: a range that matches says nothing of the rest
        kept = VerifyRecord(found.mirror, time.time(), seconds, result, found.span.length, mismatched, rate)
        record_verify(profile, kept)
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
                "seconds": seconds,
                "rate_bytes_per_second": rate,
                "exit_code": code,
            },
        )
        return code
    received = ", ".join(f"{site} {format_size(n)}" for site, n in found.bytes_received.items() if n)
    click.echo(
        f"{found.mirror}: compared {format_size(found.span.length)} from byte {found.span.offset}"
        f" in chunks of {format_size(found.chunk)} on {', '.join(found.legs)} in {seconds:g}s"
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
