"""`remirror cdp ...`: recovery points of a mirror with `cdp` (docs/cdp.md).

These verbs run on the host where the mirror is assembled (the primary
site): points are taken every few seconds and must not cross a WAN to be
taken. `apply` builds the stack; `cdp run` (a systemd service) takes and
prunes points; the others read or restore them.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click

from remirror.cli.output import profile_argument
from remirror.errors import UsageError
from remirror.units import format_duration, format_size

if TYPE_CHECKING:
    from remirror.controller import Controller
    from remirror.daemons.cdp import Protected

mirror_argument = click.argument("mirror_name", metavar="MIRROR")
leg_option = click.option(
    "--leg",
    is_flag=True,
    help="The points this host keeps of its own leg (a replica's `points`), not the mirror's cdp.",
)
at_option = click.option(
    "--at", "at", required=True, metavar="TIME|POINT",
    help="A point id (`7` or `#7`), or a time (ISO 8601, or `-10m`): the newest point at or before it.",
)  # fmt: skip


def _mirror(profile_path: str, name: str, leg: bool = False) -> tuple[Controller, Protected]:
    """The profile's controller, and what the verb acts on: the mirror's `cdp`, or with `leg`
    the points this host keeps of its own leg of the mirror (a replica's `points`)."""
    from remirror.controller import Controller
    from remirror.daemons.cdp import Protected
    from remirror.here import load_profile_here

    profile = load_profile_here(profile_path)
    mirror = next((m for m in profile.mirrors if m.name == name), None)
    if mirror is None:
        names = ", ".join(m.name for m in profile.mirrors)
        raise UsageError(f"cdp: no mirror {name!r} in the profile ({names})")
    if leg:
        found = Protected.own_leg(profile, mirror)
        if found is None:
            raise UsageError(f"cdp --leg: this host keeps no points of its own leg of {name} (see `points:`)")
        return Controller(profile), found
    if mirror.cdp is None:
        raise UsageError(f"cdp: mirror {name} has no `cdp` in the profile")
    return Controller(profile), Protected.of_mirror(profile, mirror)


def _ask(profile_path: str, name: str, do: str, leg: bool = False, **request: Any) -> dict[str, Any]:
    """One `cdp` request to this host's agent, through the controller (remirror.agent.cdp_requests)."""
    controller, protected = _mirror(profile_path, name, leg)
    settings = protected.settings.request()
    try:
        return controller.cdp(protected.site, {"do": do, **protected.request(), **settings, **request})
    finally:
        controller.close()


def parse_when(text: str, now: float) -> float:
    """`-10m`, `-2h` (before now) or an ISO 8601 time (local time when it has no zone)."""
    from remirror.units import parse_duration

    if text.startswith("-"):
        return now - parse_duration(text[1:])
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise UsageError(f"cdp: --at {text!r}: not a point id, a time (ISO 8601) or -DURATION") from None
    return when.timestamp() if when.tzinfo else when.astimezone().timestamp()


def at_request(text: str) -> dict[str, Any]:
    """A point as the request names it: an id (`7`, `#7`), or the newest at or before a time."""
    return {"at": text, "at_time": None if text.lstrip("#").isdigit() else parse_when(text, time.time())}


def _when(point: dict[str, Any]) -> str:
    return datetime.fromtimestamp(float(point["time"]), UTC).astimezone().isoformat(timespec="seconds")


@click.group()
def cdp() -> None:
    """Recovery points of a mirror with `cdp` (run on its primary host)."""


@cdp.command("list")
@profile_argument
@mirror_argument
@leg_option
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_points(profile_path: str, mirror_name: str, leg: bool, output: str) -> int:
    """The recovery points: id, time, era, and whether their hooks ran clean; and the pool's use."""
    found = _ask(profile_path, mirror_name, "list", leg)
    points, pool, chunk = found["points"], found["pool"], found["chunk"]
    if output == "json":
        usage = {
            "data_used_bytes": pool["data_used"] * chunk,
            "data_total_bytes": pool["data_total"] * chunk,
            "metadata_used_blocks": pool["metadata_used"],
            "metadata_total_blocks": pool["metadata_total"],
            "mode": pool["mode"],
        }
        click.echo(json.dumps({"mirror": mirror_name, "points": points, "pool": usage}))
        return 0
    for point in points:
        hooks = f"  hooks {point['hooks']}" if point.get("hooks") else ""
        click.echo(f"#{point['id']:<6} {_when(point)}  era {point['era']}{hooks}")
    now = time.time()
    newest = f", newest {format_duration(now - points[-1]['time'])} ago" if points else ""
    click.echo(
        f"{len(points)} point(s){newest}; pool {format_size(pool['data_used'] * chunk)}"
        f" of {format_size(pool['data_total'] * chunk)} used ({pool['mode']})"
    )
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@leg_option
@click.option("--now", "force", is_flag=True, help="Take one even if the last is younger than `every`.")
def point(profile_path: str, mirror_name: str, leg: bool, force: bool) -> int:
    """Take a recovery point if one is due (for a timer), then prune (as the `cdp run` daemon does)."""
    done = _ask(profile_path, mirror_name, "point", leg, force=force)
    if done["owed_after_hook"] is not None:
        click.echo(f"ran the after-hook an interrupted point owed (exit {done['owed_after_hook']})")
    taken = done["taken"]
    if taken is not None:
        hooks = f", hooks {taken['hooks']}" if taken["hooks"] else ""
        click.echo(f"point #{taken['id']} taken (era {taken['era']}{hooks})")
        for failure in taken["hook_failures"]:
            click.echo(f"point #{taken['id']} is not clean: {failure}", err=True)
    for point_id in done["expired"]:
        click.echo(f"point #{point_id} pruned: the retention (`keep`) keeps it no longer")
    for point_id in done["for_space"]:
        click.echo(f"point #{point_id} pruned early: the pool is short of space")
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@leg_option
def down(profile_path: str, mirror_name: str, leg: bool) -> int:
    """Take this host's own leg's points down (--leg): their views, a drill's copies, then the
    stack; the points and the leg's data stay on its disk, and neither `cdp run` nor another
    verb brings them back until `cdp up --leg`. Refused while LIO or md holds the leg."""
    if not leg:
        raise UsageError("cdp down: only a leg's own points (--leg); a mirror's CDP goes with destroy")
    done = _ask(profile_path, mirror_name, "down", leg)
    for name in done["removed"]:
        click.echo(f"removed {name}")
    click.echo(f"{mirror_name}: this host's points are down; `remirror cdp up --leg` brings them back")
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@leg_option
def up(profile_path: str, mirror_name: str, leg: bool) -> int:
    """Bring this host's own leg's points back as the index on its disk says (--leg), after
    `cdp down --leg`; `cdp run` and every `cdp` verb do it by themselves otherwise (a reboot)."""
    if not leg:
        raise UsageError("cdp up: only a leg's own points (--leg); a mirror's CDP is built by apply")
    done = _ask(profile_path, mirror_name, "up", leg)
    said = {
        "activated": "brought back",
        "active": "already up",
        "no_stack": "not on its disk (apply lays them)",
    }
    click.echo(f"{mirror_name}: this host's points {said.get(done['state'], done['state'])}")
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@leg_option
@click.option("--keep", "older_than", metavar="DURATION",
              help="Keep only the points younger than this (`1d`, `12h`), not the profile's `keep`;"
              " the newest always stays.")  # fmt: skip
@click.option(
    "--dry-run", is_flag=True, help="Only show which points would go, and why (the default without --yes)."
)
@click.option("--yes", is_flag=True, help="Delete them.")
def prune(
    profile_path: str, mirror_name: str, leg: bool, older_than: str | None, dry_run: bool, yes: bool
) -> int:
    """Delete the points the profile's `keep` (an age or a grid) no longer keeps, or those older
    than --keep: at once, rather than at the next point (room in a pool they fill; a retention
    made shorter). Each with why; without --yes nothing is deleted."""
    from remirror.units import parse_duration

    if dry_run and yes:
        raise UsageError("cdp prune: --dry-run and --yes ask for opposite things: give one")
    asked: dict[str, Any] = {}
    if older_than is not None:
        try:
            asked["older_than"] = parse_duration(older_than)
        except ValueError as error:
            raise UsageError(f"cdp prune: --keep {older_than!r}: {error}") from None
    done = _ask(profile_path, mirror_name, "prune", leg, yes=yes, **asked)
    verb = "pruned" if done["deleted"] else "would be pruned"
    for point in done["pruned"]:
        click.echo(f"point #{point['id']} ({_when(point)}) {verb}: {point['why']}")
    if not done["pruned"]:
        click.echo("no point to prune: the retention keeps every one")
    elif not done["deleted"]:
        click.echo("nothing deleted: add --yes to prune them")
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@click.option("--since", "since", required=True, metavar="POINT", help="A point id or time (as --at).")
def changes(profile_path: str, mirror_name: str, since: str) -> int:
    """The byte ranges of the volume written since a point (era-block granularity)."""
    for offset, length in _ask(profile_path, mirror_name, "changes", **at_request(since))["ranges"]:
        click.echo(f"{offset}:{length}")
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@leg_option
@at_option
@click.option("--view", is_flag=True, help="Show the point as a read-only device.")
@click.option("--to", "target", metavar="DEVICE", help="Copy the point to this device.")
@click.option("--allow-destructive", is_flag=True, help="Let --to overwrite a device that carries data.")
def restore(
    profile_path: str,
    mirror_name: str,
    leg: bool,
    at: str,
    view: bool,
    target: str | None,
    allow_destructive: bool,
) -> int:
    """Materialise a point without touching the volume: a read-only device, or a copy on another device."""
    if view == (target is not None):
        raise UsageError("cdp restore: give either --view or --to DEVICE")
    done = _ask(
        profile_path,
        mirror_name,
        "restore",
        leg,
        target=target,
        allow_destructive=allow_destructive,
        **at_request(at),
    )
    chosen = done["point"]
    if target is None:
        click.echo(f"point #{chosen['id']} ({_when(chosen)}) is {done['view']} (read-only)")
    else:
        click.echo(
            f"point #{chosen['id']} ({_when(chosen)}) copied to {target}: {format_size(done['copied'])}"
        )
    return 0


@cdp.command()
@profile_argument
@mirror_argument
@at_option
@click.option("--yes", is_flag=True, help="Do it: the volume's content is replaced (a point keeps it).")
def rollback(profile_path: str, mirror_name: str, at: str, yes: bool) -> int:
    """Make the volume equal to a point, copying back only the blocks written since (volume unmounted)."""
    done = _ask(profile_path, mirror_name, "rollback", yes=yes, **at_request(at))
    chosen, copied = done["point"], done["copied"]
    click.echo(
        f"{mirror_name} rolled back to point #{chosen['id']} ({_when(chosen)}): {format_size(copied)}"
        f" ({copied} bytes) copied; the content before the rollback is point #{done['undo']['id']}"
    )
    return 0


@cdp.command()
@profile_argument
@click.argument("mirror_names", metavar="[MIRROR]...", nargs=-1)
def run(profile_path: str, mirror_names: tuple[str, ...]) -> int:
    """Take and prune points on schedule (every mirror with `cdp`, and this host's own leg's
    `points`; or those of the mirrors named), as a systemd Type=notify service
    (contrib/systemd/remirror-cdp@.service).

    One JSON line per point or pruning; a point that fails is reported and
    retried at the next tick (status and check show a missed interval).
    """
    import signal
    import threading

    from remirror.daemons.cdp import Protected
    from remirror.daemons.cdp import run as run_points
    from remirror.here import RunningProfile
    from remirror.profile.model import Profile

    def protected_here(profile: Profile) -> list[Protected]:
        unknown = sorted(set(mirror_names) - {m.name for m in profile.mirrors})
        if unknown:
            raise UsageError(f"cdp run: no mirror {unknown[0]!r} in the profile")
        chosen = [m for m in profile.mirrors if not mirror_names or m.name in mirror_names]
        protected = [Protected.of_mirror(profile, m) for m in chosen if m.cdp is not None]
        protected += [p for m in chosen if (p := Protected.own_leg(profile, m)) is not None]
        if not protected:
            raise UsageError("cdp run: no mirror of the profile has `cdp`, nor points of this host's own leg")
        return protected

    source = RunningProfile(profile_path)
    protected = protected_here(source.profile)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.is_set():  # until stopped; again on the profile loaded again when it changed
        run_points(protected, stop, click.echo, changed=source.changed)
        protected = source.follow(protected_here, protected, click.echo)
    return 0
