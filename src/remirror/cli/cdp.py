"""`remirror cdp ...`: recovery points of a mirror with `cdp` (docs/cdp.md).

These verbs run on the host where the mirror is assembled (the primary
site): points are taken every few seconds and must not cross a WAN to be
taken. `apply` builds the stack; `cdp run` (a systemd service) takes and
prunes points; the others read or restore them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import click

from remirror.cli.health import _profile_path
from remirror.errors import UsageError
from remirror.units import format_duration, format_size

if TYPE_CHECKING:
    from remirror.facts.cdp import CdpIndex, RecoveryPoint
    from remirror.profile.model import Mirror

profile_option = click.option(
    "--profile", "-p", "profile_path", default=None, metavar="PROFILE",
    help="The profile (default: $REMIRROR_PROFILE or /etc/remirror/remirror.yaml).",
)  # fmt: skip
mirror_argument = click.argument("mirror_name", metavar="MIRROR")
at_option = click.option(
    "--at", "at", required=True, metavar="TIME|POINT",
    help="A point id (`7` or `#7`), or a time (ISO 8601, or `-10m`): the newest point at or before it.",
)  # fmt: skip


def _mirror(profile_path: str | None, name: str) -> Mirror:
    from remirror.profile import load_profile

    profile = load_profile(_profile_path(profile_path))
    mirror = next((m for m in profile.mirrors if m.name == name), None)
    if mirror is None:
        names = ", ".join(m.name for m in profile.mirrors)
        raise UsageError(f"cdp: no mirror {name!r} in the profile ({names})")
    if mirror.cdp is None:
        raise UsageError(f"cdp: mirror {name} has no `cdp` in the profile")
    return mirror


def _index(mirror: Mirror) -> CdpIndex:
    from pathlib import Path

    from remirror.agent import cdp

    if not Path(mirror.md_device).exists():
        raise UsageError(f"cdp: {mirror.md_device} is not assembled on this host (run cdp on the primary)")
    index = cdp.read_index(mirror.md_device)
    if index is None or index.mirror != mirror.name:
        raise UsageError(f"cdp: {mirror.md_device} carries no CDP stack of {mirror.name} (apply builds it)")
    return index


@contextmanager
def _index_locked(mirror: Mirror, verb: str) -> Iterator[None]:
    """Hold the mirror's CDP index lock (remirror.agent.lock): the index is read, then written."""
    from remirror.agent import lock
    from remirror.agent.cdp import INDEX_LOCK_WAIT, index_locked
    from remirror.errors import RemirrorError

    try:
        with index_locked(mirror.name, f"cdp {verb}", lock.operator_wait(INDEX_LOCK_WAIT)):
            yield
    except lock.Busy as busy:
        raise RemirrorError(f"cdp {verb}: {mirror.name}: {busy}") from None


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


def _point(index: CdpIndex, at: str) -> RecoveryPoint:
    point = index.point(at) if at.lstrip("#").isdigit() else index.at_or_before(parse_when(at, time.time()))
    if point is None:
        raise UsageError(f"cdp: --at {at}: no such point (see `remirror cdp list`)")
    return point


def _when(point: RecoveryPoint) -> str:
    return datetime.fromtimestamp(point.time, UTC).astimezone().isoformat(timespec="seconds")


@click.group()
def cdp() -> None:
    """Recovery points of a mirror with `cdp` (run on its primary host)."""


@cdp.command("list")
@profile_option
@mirror_argument
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def list_points(profile_path: str | None, mirror_name: str, output: str) -> int:
    """The recovery points: id, time, era; and the pool's use."""
    from remirror.agent import cdp as local

    mirror = _mirror(profile_path, mirror_name)
    index = _index(mirror)
    pool = local.pool_status(mirror.name)
    chunk = index.layout.chunk
    if output == "json":
        click.echo(json.dumps({
            "mirror": mirror.name,
            "points": [{"id": p.id, "time": p.time, "era": p.era} for p in index.points],
            "pool": {"data_used_bytes": pool.data_used * chunk, "data_total_bytes": pool.data_total * chunk,
                     "metadata_used_blocks": pool.metadata_used, "metadata_total_blocks": pool.metadata_total,
                     "mode": pool.mode},
        }))  # fmt: skip
        return 0
    for point in index.points:
        click.echo(f"#{point.id:<6} {_when(point)}  era {point.era}")
    now = time.time()
    newest = f", newest {format_duration(now - index.points[-1].time)} ago" if index.points else ""
    click.echo(
        f"{len(index.points)} point(s){newest}; pool {format_size(pool.data_used * chunk)}"
        f" of {format_size(pool.data_total * chunk)} used ({pool.mode})"
    )
    return 0


@cdp.command()
@profile_option
@mirror_argument
@click.option("--now", "force", is_flag=True, help="Take one even if the last is younger than `every`.")
def point(profile_path: str | None, mirror_name: str, force: bool) -> int:
    """Take a recovery point if one is due (for a timer), then prune."""
    from remirror.agent import cdp as local
    from remirror.plan.cdp import point_due, pruning

    mirror = _mirror(profile_path, mirror_name)
    settings = mirror.cdp
    if settings is None:  # _mirror refused it; for the type checker
        return 1
    with _index_locked(mirror, "point"):
        index = _index(mirror)
        if force or point_due(index, time.time(), settings.every):
            index = local.take_point(mirror.name, mirror.md_device, index)
            click.echo(f"point #{index.points[-1].id} taken (era {index.points[-1].era})")
        doomed = pruning(index, time.time(), settings.keep, local.pool_status(mirror.name))
        local.delete_points(mirror.name, mirror.md_device, index, list(doomed.points))
    for p in doomed.expired:
        click.echo(f"point #{p.id} pruned: older than the window")
    for p in doomed.for_space:
        click.echo(f"point #{p.id} pruned early: the pool is short of space")
    return 0


@cdp.command()
@profile_option
@mirror_argument
@click.option("--since", "since", required=True, metavar="POINT", help="A point id or time (as --at).")
def changes(profile_path: str | None, mirror_name: str, since: str) -> int:
    """The byte ranges of the volume written since a point (era-block granularity)."""
    from remirror.agent import cdp as local

    mirror = _mirror(profile_path, mirror_name)
    index = _index(mirror)
    ranges = local.changed_since(mirror.name, _point(index, since), index.layout)
    for offset, length in ranges:
        click.echo(f"{offset}:{length}")
    return 0


@cdp.command()
@profile_option
@mirror_argument
@at_option
@click.option("--view", is_flag=True, help="Show the point as a read-only device.")
@click.option("--to", "target", metavar="DEVICE", help="Copy the point to this device.")
@click.option("--allow-destructive", is_flag=True, help="Let --to overwrite a device that carries data.")
def restore(
    profile_path: str | None,
    mirror_name: str,
    at: str,
    view: bool,
    target: str | None,
    allow_destructive: bool,
) -> int:
    """Materialise a point without touching the volume: a read-only device, or a copy on another device."""
    from remirror.agent import cdp as local

    if view == (target is not None):
        raise UsageError("cdp restore: give either --view or --to DEVICE")
    mirror = _mirror(profile_path, mirror_name)
    # Held while the copy runs: a pruning meanwhile would delete the point being copied.
    with _index_locked(mirror, "restore"):
        index = _index(mirror)
        chosen = _point(index, at)
        size = index.layout.volume_sectors * 512
        if target is not None:
            local.check_target(target, allow_destructive, size)
        path = local.view(mirror.name, index.layout, chosen)
        if target is None:
            click.echo(f"point #{chosen.id} ({_when(chosen)}) is {path} (read-only)")
            return 0
        copied = local.copy_ranges(path, target, [(0, size)])
        local.remove_view(mirror.name, chosen.id)
    click.echo(f"point #{chosen.id} ({_when(chosen)}) copied to {target}: {format_size(copied)}")
    return 0


@cdp.command()
@profile_option
@mirror_argument
@at_option
@click.option("--yes", is_flag=True, help="Do it: the volume's content is replaced (a point keeps it).")
def rollback(profile_path: str | None, mirror_name: str, at: str, yes: bool) -> int:
    """Make the volume equal to a point, copying back only the blocks written since (volume unmounted)."""
    from remirror.agent import cdp as local

    mirror = _mirror(profile_path, mirror_name)
    # Held from reading the index to writing it with the undo point: a point or a pruning
    # between would write an index without it (and could reuse its id).
    with _index_locked(mirror, "rollback"):
        index = _index(mirror)
        chosen = _point(index, at)
        if not yes:
            raise UsageError(
                f"cdp rollback: replaces {mirror.name}'s content by point #{chosen.id}: add --yes"
            )
        index, done = local.rollback(mirror.name, mirror.md_device, index, chosen)
    click.echo(
        f"{mirror.name} rolled back to point #{chosen.id} ({_when(chosen)}): {format_size(done.bytes_copied)}"
        f" ({done.bytes_copied} bytes) copied; the content before the rollback is point #{done.undo_point.id}"
    )
    return 0


@cdp.command()
@profile_option
@click.argument("mirror_names", metavar="[MIRROR]...", nargs=-1)
def run(profile_path: str | None, mirror_names: tuple[str, ...]) -> int:
    """Take and prune points on schedule (every mirror with `cdp`, or those named), as a systemd
    Type=notify service (contrib/systemd/remirror-cdp@.service).

    One JSON line per point or pruning; a point that fails is reported and
    retried at the next tick (status and check show a missed interval).
    """
    import signal
    import threading

    from remirror.daemons.cdp import run as run_points
    from remirror.profile import load_profile

    profile = load_profile(_profile_path(profile_path))
    names = mirror_names or tuple(m.name for m in profile.mirrors if m.cdp is not None)
    if not names:
        raise UsageError("cdp run: no mirror of the profile has `cdp`")
    mirrors = [_mirror(profile_path, name) for name in names]
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    run_points(mirrors, stop, click.echo)
    return 0
