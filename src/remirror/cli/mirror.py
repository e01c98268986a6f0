"""`plan`, `apply` and `agent`: turning a profile into running mirrors."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from remirror.cli.output import emit_json, output_option, profile_argument
from remirror.errors import EXIT_FAILURE, Declined, DestructivePlan, UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from remirror.controller import Controller, Outcome
    from remirror.plan import Plan

EXIT_CHANGES = 2  # plan --detailed-exitcode: there is something to do


def controller_for(profile_path: str, lock: str = "") -> tuple[Controller, dict[str, str], str]:
    """The profile's controller, secrets and text; `lock`: the verb, for one that changes the
    sites (it holds each site's lock from the first look until it ends: docs/safety.md). plan,
    which changes nothing, plans without the CHAP secrets remirror generates if they are not
    there."""
    from remirror.controller import Controller, read_secrets
    from remirror.here import profile_here
    from remirror.profile.loader import read_profile_text

    text = read_profile_text(profile_path)
    profile = profile_here(text, profile_path)
    secrets = read_secrets(profile, "make" if lock else "stand-in")
    return Controller(profile, lock=lock), secrets, text


@click.command()
@profile_argument
@click.option("--detailed-exitcode", is_flag=True,
              help="Exit 0: no changes, 2: changes; 1: a failure on a site, 3: bad input.")  # fmt: skip
@output_option
def plan(profile_path: str, detailed_exitcode: bool, output: str) -> int:
    """Show what apply would change, without changing anything."""
    from remirror.cli.commands import show_warnings
    from remirror.profile import cautions

    controller, secrets, _text = controller_for(profile_path)
    try:
        result = controller.plan(secrets)
    finally:
        controller.close()
    if output != "json":
        show_warnings(cautions(controller.profile))
    _show(result, output)
    return EXIT_CHANGES if detailed_exitcode and not result.is_empty else 0


def _show(result: Plan, output: str) -> None:
    """A plan as `plan` shows it: a line per action and a summary, or a `plan` JSON document."""
    if output == "json":
        emit_json(
            "plan",
            {
                "changes": not result.is_empty,
                "actions": [a.as_json() for a in result.actions],
                "pending": result.pending or None,
                "notes": list(result.notes),
            },
        )
    else:
        for action in result.actions:
            click.echo(action.line())
        click.echo(result.summary())
        for note in result.notes:
            click.echo(f"Note: {note}")


# remirror.plan.cache.DRAIN_TIMEOUT and MAX_DRAIN_TIMEOUT (not imported here: --help stays fast).
drain_timeout_option = click.option(
    "--drain-timeout",
    type=click.IntRange(1, 540),
    default=300,
    show_default=True,
    help="Seconds to wait for a cache being removed to write back; after that the cache stays,"
    " in cleaner mode, and a later apply finishes the drain.",
)


@click.command()
@profile_argument
@click.option("--yes", is_flag=True, help="Do not ask before applying.")
@click.option("--allow-destructive", is_flag=True, help="Allow writing over disks that hold data.")
@drain_timeout_option
@click.option("--wait", is_flag=True,
              help="Then wait until every mirror is MIRRORED (the initial sync done), showing its"
              " progress on a terminal.")  # fmt: skip
@click.option("--wait-timeout", default=None, metavar="DURATION",
              help="With --wait: give up after this long (exit 1), e.g. `2h` (default: none).")  # fmt: skip
@output_option
def apply(
    profile_path: str,
    yes: bool,
    allow_destructive: bool,
    drain_timeout: int,
    wait: bool,
    wait_timeout: str | None,
    output: str,
) -> int:
    """Make the sites match the profile: show the plan, run it, report what changed."""
    from remirror.here import record_applied
    from remirror.units import parse_duration

    try:
        limit = parse_duration(wait_timeout) if wait_timeout is not None else None
    except ValueError as error:
        raise UsageError(f"apply: --wait-timeout {wait_timeout!r}: {error}") from None
    if limit is not None and not wait:
        raise UsageError("apply: --wait-timeout goes with --wait")
    controller, secrets, text = controller_for(profile_path, lock="apply")
    try:
        code = _carry_out(
            "apply",
            lambda: _with_drain_timeout(controller.plan(secrets), drain_timeout),
            controller,
            yes,
            allow_destructive,
            output,
            # Once the operator said yes, before the first change, under the locks: the watch's
            # next pass, which takes them, runs on this text, never on the one it started
            # with, even if an action fails half-way (remirror.here.RunningProfile).
            before_changes=lambda: record_applied(controller.profile, text, profile_path),
        )
    finally:
        controller.close()  # the sites' locks let go: the reconciler repairs while apply waits
    if code != 0 or not wait:
        return code
    from remirror.controller import Controller

    watching = Controller(controller.profile)  # no lock: it only looks, as `status` does
    try:
        return wait_until_mirrored(watching, limit, shown=output == "text")
    finally:
        watching.close()


WAIT_POLL = 5.0  # seconds between looks while apply --wait waits
# States no mirror leaves by itself: waiting for MIRRORED from them is waiting forever.
STUCK = ("SPLIT_BRAIN", "DEFUNCT", "LOCAL_DEFUNCT", "ABSENT")


def wait_until_mirrored(controller: Controller, limit: float | None, shown: bool) -> int:
    """`apply --wait`: look at the sites until every mirror is MIRRORED (0), or `limit` seconds
    have passed, or a mirror is in a state it does not leave by itself (1, saying where each
    one is); a resync's progress on a terminal meanwhile."""
    from remirror.cli.output import progress_bar
    from remirror.health import State
    from remirror.monitor import snapshot

    deadline = None if limit is None else time.monotonic() + limit
    with progress_bar("initial sync", shown=shown) as advance:
        while True:
            reports, _facts = snapshot(controller)
            behind = [r for r in reports if r.state is not State.MIRRORED]
            if not behind:
                break
            syncing = [r.resync for r in behind if r.resync is not None and r.resync.total_bytes]
            if syncing:
                advance(sum(s.done_bytes for s in syncing), sum(s.total_bytes for s in syncing))
            stuck = any(r.state.value in STUCK for r in behind)
            if stuck or (deadline is not None and time.monotonic() > deadline):
                where = "; ".join(f"{r.mirror} {r.state}: {r.reason}" for r in behind)
                click.echo(f"apply --wait: not every mirror is MIRRORED: {where}", err=True)
                return EXIT_FAILURE
            time.sleep(WAIT_POLL)
    if shown:
        click.echo("every mirror is MIRRORED")
    return 0


@click.command()
@profile_argument
@output_option
def start(profile_path: str, output: str) -> int:
    """Start the mirrors that were running, as apply would assemble them, and nothing else.

    For boot (the unit remirror-start@): after a power cut nothing else starts
    an array whose partner is at another site. A mirror whose plan holds more
    than starting it, or that its plan refuses (a split brain), is held for
    `apply` and named while the others start (exit 4, not retried by the
    unit); an unreachable site exits 1 (the unit tries again).
    """
    from remirror.plan.start import EXIT_HELD, HELD

    controller, secrets, _text = controller_for(profile_path, lock="start")
    held: list[str] = []

    def make() -> Plan:
        plan = controller.start(secrets)
        held[:] = [note for note in plan.notes if note.startswith(HELD)]
        return plan

    try:
        code = _carry_out("start", make, controller, True, False, output)
    finally:
        controller.close()
    return EXIT_HELD if held else code


@click.command()
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option("--yes", is_flag=True, help="Do not ask before destroying.")
@click.option(
    "--dry-run", is_flag=True, help="Show what it would take apart (as `plan` shows), change nothing."
)
@drain_timeout_option
@output_option
def destroy(
    profile_path: str, mirror_name: str, yes: bool, dry_run: bool, drain_timeout: int, output: str
) -> int:
    """Take MIRROR apart (array, sessions, targets), leaving the data on its disks.

    Refuses while the mirror device is mounted, open, or has initiators
    logged into its export. A later `apply` adopts the disks again.
    """
    from remirror.controller import Controller  # no secrets: destroy sets none
    from remirror.here import load_profile_here

    profile = load_profile_here(profile_path)
    try:
        mirror = profile.mirror(mirror_name)
    except KeyError:
        names = ", ".join(m.name for m in profile.mirrors)
        raise UsageError(f"destroy: {profile_path} has no mirror {mirror_name!r} (it has: {names})") from None
    if dry_run:
        controller = Controller(profile)
        try:
            _show(controller.teardown(mirror), output)
        finally:
            controller.close()
        return 0
    controller = Controller(profile, lock="destroy")
    try:
        code = _carry_out(
            "destroy",
            lambda: _with_drain_timeout(controller.teardown(mirror), drain_timeout),
            controller,
            yes,
            False,
            output,
        )
    finally:
        controller.close()
    if code == 0:
        from remirror.monitor import forget_verify

        forget_verify(profile, mirror.name)  # a mirror built again under its name starts afresh
    return code


def confirm(command: str, question: str) -> None:
    """Ask the operator (`--yes` skips the question): a no, or nobody to ask, changes nothing.

    Declining is exit 1 (as terraform's and apt's), not bad input: the command was right.
    """
    if not sys.stdin.isatty():
        raise UsageError(f"{command}: not a terminal, so nobody can confirm: pass --yes")
    if not click.confirm(question, default=False):
        raise Declined(command)


def _with_drain_timeout(plan: Plan, seconds: int) -> Plan:
    from remirror.plan.cache import with_drain_timeout

    return with_drain_timeout(plan, seconds)


def _carry_out(
    command: str,
    make: Callable[[], Plan],
    controller: Controller,
    yes: bool,
    allow_destructive: bool,
    output: str,
    before_changes: Callable[[], None] = lambda: None,
) -> int:
    """Plan, show, guard, confirm, run, plan again and report: apply and destroy alike.
    `before_changes`: called once, after the operator's yes, before the first action runs.

    A plan with a `pending` part (what waits for keys its actions make) is followed by the plan
    made once they have run: shown, guarded and confirmed as the first was.
    """
    from remirror.plan.actions import Verb

    say = (lambda _line: None) if output == "json" else click.echo
    result = make()
    outcomes: list[Outcome] = []
    while True:
        for action in result.actions:
            say(action.line())
        say(result.summary())
        if result.destructive and not allow_destructive:
            raise DestructivePlan([a.destructive for a in result.destructive])
        if not result.is_empty and not yes:
            confirm(command, f"{command.capitalize()}: carry out these changes?")
        if not result.is_empty and not outcomes:
            before_changes()
        ran = controller.apply(result, say) if not result.is_empty else []
        outcomes += ran
        after = make() if ran else result
        if not (result.pending and ran and after.actions):
            break
        say("Next, what waited for them:")
        result = after
    if output == "json":
        emit_json(
            command,
            {
                "changed": bool(outcomes),
                "actions": [{**o.action.as_json(), "outcome": "ok" if o.ok else "failed"} for o in outcomes],
                "remaining": [a.as_json() for a in after.actions],
                "notes": list(after.notes),
            },
        )
    rewritten = sorted({o.action.site for o in outcomes if o.action.verb == Verb.WRITE_MDADM_CONF})
    if rewritten:
        # Early boot reads the initramfs's copy of mdadm.conf (docs/safety.md, "Boot").
        say(
            f"mdadm.conf changed on {', '.join(rewritten)}:"
            " `update-initramfs -u` there gives early boot the same"
        )
    if output != "json" and outcomes:
        say(f"Done: {len(outcomes)} action(s). " + after.summary())
    for note in after.notes:
        say(f"Note: {note}")
    return 0 if after.is_empty else 1
