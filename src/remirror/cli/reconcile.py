"""`reconcile`: one repair pass, for cron or a timer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from remirror.cli.output import emit_json, output_option, profile_argument

F = TypeVar("F", bound=Callable[..., Any])


@click.command()
@profile_argument
@output_option
@click.option(
    "--retry",
    is_flag=True,
    help="Re-add replica legs left out after repeated failed re-adds (once their disk is fixed).",
)
def reconcile(profile_path: str, output: str, retry: bool) -> int:
    """Bring the mirrors back to what the profile wants, one safe step per pass.

    Exit 0: every mirror is MIRRORED; 1: repairs are under way (a resync);
    2: a repair is needed that remirror cannot make now or will not make by
    itself (the reason is printed). A replica leg that failed again after
    three re-adds (its disk fails writes) is left out and tried once an hour;
    `--retry` tries it now.
    """
    from remirror.controller import Controller, read_secrets
    from remirror.here import load_profile_here
    from remirror.reconcile import reconcile_once

    profile = load_profile_here(profile_path)
    secrets = read_secrets(profile)
    controller = Controller(profile)
    say = (lambda _line: None) if output == "json" else click.echo
    try:
        passes = reconcile_once(controller, secrets, say, retry)
    finally:
        controller.close()
    code = max((p.exit_code for p in passes), default=0)
    if output == "json":
        emit_json(
            "reconcile",
            {
                "exit_code": code,
                "mirrors": [
                    {
                        "mirror": p.mirror,
                        "before": p.before.state.value,
                        "after": p.after.state.value,
                        "repaired": [a.as_json() for a in p.repaired],
                        "exit_code": p.exit_code,
                        "reason": p.why,
                    }
                    for p in passes
                ],
            },
        )
        return code
    for p in passes:
        change = (
            p.before.state.value
            if p.before.state is p.after.state
            else f"{p.before.state} -> {p.after.state}"
        )
        click.echo(f"{p.mirror}: {change}: {p.why}")
    return code


def _seconds(name: str, default: float, minimum: float, words: str) -> Callable[[F], F]:
    """A duration option in seconds."""
    option: Callable[[F], F] = click.option(
        name, type=click.FloatRange(min=minimum), default=default, show_default=True, help=words
    )
    return option


@click.command()
@profile_argument
@_seconds("--interval", 60, 1, "Seconds between passes while all is well.")
@_seconds("--busy", 10, 1, "Seconds between passes while repairs are under way.")
@_seconds("--debounce", 2, 0, "Quiet seconds after a udev event before a pass.")
@_seconds("--max-backoff", 600, 1, "Longest wait after passes that could not repair.")
def watch(profile_path: str, interval: float, busy: float, debounce: float, max_backoff: float) -> int:
    """Reconcile continuously: on udev block and iSCSI events, and on a timer.

    Prints one JSON line per mirror and pass (for the journal). Runs as a
    systemd Type=notify service with a watchdog (contrib/systemd); stops
    cleanly on SIGTERM or SIGINT. Runs the profile as it was at its start,
    then as each `apply` on this host applied it (an edit not yet applied is
    left for apply).
    """
    import signal
    import threading

    from remirror.here import RunningProfile
    from remirror.reconcile.watch import Timing
    from remirror.reconcile.watch import watch as run_watch

    source = RunningProfile(profile_path)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    run_watch(source, Timing(interval, busy, debounce, max_backoff), stop, click.echo)
    return 0


@click.command()
@profile_argument
def destage(profile_path: str) -> int:
    """Write caches back when their device is idle (legs with `destage: idle`).

    Runs on each site that has such a cache, as a systemd Type=notify service
    (contrib/systemd/remirror-destage@.service). Prints one JSON line per
    destage; stops cleanly on SIGTERM or SIGINT.
    """
    import signal
    import threading

    from remirror.daemons.destage import Watched, local_caches, run
    from remirror.errors import UsageError
    from remirror.here import RunningProfile
    from remirror.profile.model import Profile

    def caches_here(profile: Profile) -> list[Watched]:
        site = next(name for name, s in profile.sites.items() if s.is_local)
        caches = local_caches(profile, site)
        if not caches:
            raise UsageError(f"destage: site {site} has no cache with `destage: idle` in {profile_path}")
        return caches

    source = RunningProfile(profile_path)  # this host's site: `remirror --site NAME` where it is not found
    caches = caches_here(source.profile)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.is_set():  # until stopped; again on the profile loaded again when it changed
        run(caches, stop, click.echo, changed=source.changed)
        caches = source.follow(caches_here, caches, click.echo)
    return 0
