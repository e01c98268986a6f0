"""`promote`, `failback` and `resolve`: moving a mirror between sites, and ending a split brain
(docs/failover.md). The work is remirror.failover's; these are its questions and answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from remirror.cli.mirror import confirm, controller_for
from remirror.cli.output import emit_json, output_option, profile_argument
from remirror.errors import Declined, RemirrorError, UsageError

if TYPE_CHECKING:
    from remirror.controller import Outcome


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option("--site", "site", required=True, help="The site to run MIRROR from now on.")
@click.option(
    "--force",
    is_flag=True,
    help="Promote without the current primary (gone, or cut off): fence it from this site's leg first."
    " Writes it acknowledged after the link was lost stay on its own leg (a split brain to resolve).",
)
@click.option("--yes", is_flag=True, help="Do not ask before promoting.")
@output_option
def promote(profile_path: str, mirror_name: str, site: str, force: bool, yes: bool, output: str) -> int:
    """Make SITE run MIRROR (failover; docs/failover.md).

    Planned (without --force): the current primary must be reachable and
    every leg in sync; it stops serving, the new generation is written on
    every leg, and the array is assembled on SITE from all of them.
    """
    return _promote("promote", profile_path, mirror_name, site, force, yes, output)


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option("--yes", is_flag=True, help="Do not ask before handing back.")
@output_option
def failback(profile_path: str, mirror_name: str, yes: bool, output: str) -> int:
    """Hand MIRROR back to its home primary (the profile's `primary`): a planned promotion,
    refused unless every leg is in sync."""
    return _promote("failback", profile_path, mirror_name, None, False, yes, output)


def _promote(
    command: str, profile_path: str, mirror_name: str, site: str | None, force: bool, yes: bool, output: str
) -> int:
    from remirror.failover import carry_out, plan_promotion
    from remirror.here import record_applied

    controller, secrets, text = controller_for(profile_path, lock=command)
    try:
        mirrors = {m.name: m for m in controller.profile.mirrors}
        if mirror_name not in mirrors:
            raise UsageError(
                f"{command}: {profile_path} has no mirror {mirror_name!r} (it has: {', '.join(mirrors)})"
            )
        site = site or mirrors[mirror_name].primary.site
        if site not in mirrors[mirror_name].sites:
            raise UsageError(
                f"{command}: {mirror_name} has no leg on site {site!r}"
                f" (its legs: {', '.join(mirrors[mirror_name].sites)})"
            )
        say = (lambda _line: None) if output == "json" else click.echo
        if force and controller.profile.sites[site].is_local:
            holds = controller.remote_holds()
            if holds and not yes:
                confirm(
                    command,
                    f"Another host's controller holds this site's lock (its agent: pid"
                    f" {', '.join(map(str, holds))}): end it, so the forced promotion goes first?",
                )
            for ended in controller.seize_site_lock():
                say(f"Ended another host's controller's hold of this site's lock: {ended}")
        handover = plan_promotion(controller, mirror_name, site, secrets, force)
        first: list[Outcome] = []
        if handover.pending:  # the site's own points activated first: its leg lies in their volume
            for action in handover.actions:
                say(action.line())
            say(handover.summary())
            if not yes:
                confirm(command, f"Activate {site}'s own points first (as `cdp up --leg` there would)?")
            first = controller.apply(handover, say)
        try:
            if first:
                handover = plan_promotion(controller, mirror_name, site, secrets, force)
                if handover.pending:
                    raise RemirrorError(f"site {site}: its points still not active after their activation")
            for action in handover.actions:
                say(action.line())
            if not yes:
                confirm(command, f"Hand {mirror_name} to {site}?")
            # The handover applies the whole profile the other way round: as `apply` does, the
            # text is kept first for this host's daemons (remirror.here.RunningProfile).
            record_applied(controller.profile, text, profile_path)
            done = carry_out(controller, handover, secrets, say)
        except RemirrorError as error:
            if not first:
                raise
            # Not "nothing changed": the points are up (their own `cdp run` would have done it).
            said = "not confirmed" if isinstance(error, Declined) else error.one_line()
            done_first = f"{site}'s points activated, the promotion not done"
            raise RemirrorError(f"{command}: {done_first}: {said}") from error
    finally:
        controller.close()
    if output == "json":
        emit_json(
            command,
            {
                "mirror": mirror_name,
                "site": site,
                "forced": force,
                "actions": [o.action.as_json() for o in [*first, *done.outcomes]],
                "pending": done.pending,
            },
        )
    else:
        say(f"Done: {site} runs {mirror_name} ({len(first) + len(done.outcomes)} action(s)).")
        if done.pending:
            say(f"Pending: {done.pending}")
    return 0


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option(
    "--keep", "keep", required=True, help="The site whose data wins; the others' since the split go."
)
@click.option(
    "--save",
    metavar="NAME",
    help="First copy what each discarded leg wrote on its own (its bitmap's dirty ranges) into"
    " /var/lib/remirror/saved/NAME on its site.",
)
@click.option("--yes", is_flag=True, help="Do not ask (the discarded writes are lost, but for --save).")
def resolve(profile_path: str, mirror_name: str, keep: str, save: str | None, yes: bool) -> int:
    """End MIRROR's split brain: keep SITE's data, rebuild the other legs from it (docs/failover.md)."""
    from remirror.facts.generations import SAVE_NAME
    from remirror.failover import carry_out_resolution, plan_resolution
    from remirror.here import record_applied

    if save is not None and not SAVE_NAME.fullmatch(save):
        # A name, not a path: each site keeps saved writes in one directory of remirror's.
        raise UsageError(f"resolve --save {save!r}: a name (letters, digits, '.', '_', '-'), not a path")

    controller, secrets, text = controller_for(profile_path, lock="resolve")
    try:
        if mirror_name not in [m.name for m in controller.profile.mirrors]:
            raise UsageError(f"resolve: {profile_path} has no mirror {mirror_name!r}")
        first = plan_resolution(controller, mirror_name, keep, save)
        for action in first.actions:
            click.echo(action.line())
        for action in first.destructive:
            click.echo(f"  discards: {action.destructive}")
        if not yes:
            confirm("resolve", f"Keep {keep}'s data and discard the others'?")
        record_applied(controller.profile, text, profile_path)  # as promote's (it applies the profile too)
        outcomes = carry_out_resolution(controller, mirror_name, first, secrets, click.echo)
    finally:
        controller.close()
    click.echo(f"Done: {keep}'s data kept ({len(outcomes)} action(s)); the other legs resync in full.")
    return 0
