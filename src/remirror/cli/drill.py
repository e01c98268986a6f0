"""`remirror drill`: a DR drill at the DR site, on a throwaway copy of the replica (docs/drill.md)."""

from __future__ import annotations

import json

import click

from remirror.cli.output import output_option, profile_argument
from remirror.errors import EXIT_FAILURE, UsageError
from remirror.units import parse_duration


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="[MIRROR]", required=False)
@click.option("--at", "at", default=None, metavar="TIME|POINT",
              help="Start from this point of the leg's own (an id, or the newest at or before a time:"
              " ISO 8601 or -10m); default: one taken as the drill begins.")  # fmt: skip
@click.option("--run", "commands", multiple=True, metavar="CMD",
              help="A check, run with sh -c at this site on the drill's copy (repeatable; default: the"
              " profile's drill.run, else the file system's own read-only check).")  # fmt: skip
@click.option("--keep-for", "keep_for", default="0s", show_default=True, metavar="DURATION",
              help="Keep the copy mounted this long after the checks passed, to look at it.")  # fmt: skip
@click.option("--check-timeout", "check_timeout", default="1h", show_default=True, metavar="DURATION",
              help="A check still running after this is killed, and fails.")  # fmt: skip
@output_option
def drill(
    profile_path: str,
    mirror_name: str | None,
    at: str | None,
    commands: tuple[str, ...],
    keep_for: str,
    check_timeout: str,
    output: str,
) -> int:
    """Prove the DR site can take over: checks on a throwaway copy of the replica, at the DR site.

    The copy is a thin snapshot of one of the replica's own points; the mirror runs on meanwhile,
    and nothing is promoted, resynced or exported (docs/drill.md). Without MIRROR, each mirror
    whose replica here has `drill:` in the profile, one after another (the timer's way).

    Exit 0 when every check passed, 1 when one failed or the copy could not be made (the record
    says why), 3 when the drill was refused (this site promoted, a split brain, no points here).
    """
    from remirror import drill as drills
    from remirror.cli.cdp import at_request
    from remirror.controller import Controller
    from remirror.here import load_profile_here
    from remirror.profile.names import points_key

    try:
        keep, limit = parse_duration(keep_for), parse_duration(check_timeout)
    except ValueError as error:
        raise UsageError(f"drill: {error}") from None
    profile = load_profile_here(profile_path)
    mirrors = [m for m in profile.mirrors if mirror_name in (None, m.name)]
    if mirror_name is None:
        mirrors = [m for m in mirrors if any(r.drill and profile.sites[r.site].is_local for r in m.replicas)]
    if not mirrors:
        wanted = repr(mirror_name) if mirror_name else "with a drill at this site (replicas[].drill)"
        raise UsageError(f"drill: no mirror {wanted} in the profile")
    legs = [(mirror, drills.drilled_leg(profile, mirror)) for mirror in mirrors]  # refused before any runs
    say = (lambda _line: None) if output == "json" else click.echo
    code = 0
    for mirror, leg in legs:
        controller = Controller(profile)
        try:
            drills.refuse_unless_a_dr_copy(profile, mirror, leg, controller.observe_site(leg.site))
        finally:
            controller.close()
        drills.refuse_unless_room(points_key(mirror, leg.site))
        request = drills.DrillRequest(
            mirror,
            leg,
            None if at is None else drills.point_picker(at_request(at)),
            commands or tuple(leg.drill.run if leg.drill else ()),
            keep,
            limit,
            leg.drill.hooks if leg.drill else None,
        )
        record = drills.drill(request, say)
        shown = json.dumps(record.as_json()) if output == "json" else record.summary()
        click.echo(shown, nl=output == "json")
        code = code if record.passed else EXIT_FAILURE
    return code
