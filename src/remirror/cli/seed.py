"""`remirror seed export|import`: a mirror's first copy carried by hand (docs/seeding.md).

At the primary, `seed export PROFILE MIRROR --to FILE` writes a seed of the
mirror's primary disk (it may be mounted and in use: what changes meanwhile is
caught up later); at each DR site, `seed import PROFILE MIRROR --from FILE`
writes it onto the site's replica disk, each chunk checked. Then `apply` with
`initial_sync: seeded` sends only the chunks that differ. `-` is a pipe: over
SSH on a LAN, `remirror seed export P M --to - | ssh dr remirror seed import
P M --from -`. Both run on the site whose disk they read or write, by its own
profile: no other site asks for them (remirror.agent.policy).
"""

from __future__ import annotations

from typing import Any

import click

from remirror.cli.output import emit_json, profile_argument
from remirror.errors import RemirrorError, UsageError


@click.group("seed")
def seed() -> None:
    """A mirror's first copy carried to the DR site: export at the primary, import at the DR site
    (initial_sync: seeded)."""


@seed.command("export")
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option("--to", "to", required=True, metavar="FILE|-", help="A new file (mode 0600), or - for stdout.")
@click.option("--json", "as_json", is_flag=True, help="What was written, as JSON.")
def export(profile_path: str, mirror_name: str, to: str, as_json: bool) -> None:
    """Write a seed of MIRROR's primary disk, at the primary: the disk but its last MiB, a chunk
    of zeros in a byte, each chunk with its digest."""
    if as_json and to == "-":
        raise UsageError("seed export: --json with --to -: the seed itself is on stdout")
    done = _ask(profile_path, mirror_name, "export", to=to)
    _said(done, f"seed {done['seed'][:8]} of {mirror_name}", "written", as_json)


@seed.command("import")
@profile_argument
@click.argument("mirror_name", metavar="MIRROR")
@click.option("--from", "source", required=True, metavar="FILE|-", help="The seed file, or - for stdin.")
@click.option(
    "--allow-destructive", is_flag=True, help="Write over a disk that holds something but this seed."
)
@click.option("--json", "as_json", is_flag=True, help="What was written, as JSON.")
def import_(profile_path: str, mirror_name: str, source: str, allow_destructive: bool, as_json: bool) -> None:
    """Write a seed onto this DR site's disk of MIRROR, checking each chunk; the site keeps a
    record of it once the whole seed checked, which apply looks for."""
    done = _ask(profile_path, mirror_name, "import", allow_destructive=allow_destructive, **{"from": source})
    _said(done, f"seed {done['seed'][:8]} of {mirror_name}", "imported", as_json)


def _ask(profile_path: str, name: str, do: str, **request: Any) -> dict[str, Any]:
    """The request to this host's agent, for the disk this host has in MIRROR by its profile."""
    from remirror.controller import Controller
    from remirror.here import load_profile_here

    profile = load_profile_here(profile_path)
    mirror = next((m for m in profile.mirrors if m.name == name), None)
    if mirror is None:
        names = ", ".join(m.name for m in profile.mirrors)
        raise UsageError(f"seed: no mirror {name!r} in the profile ({names})")
    if mirror.replication.initial_sync != "seeded":
        raise UsageError(f"seed: mirror {name} is not `initial_sync: seeded` in the profile")
    legs = [mirror.primary] if do == "export" else list(mirror.replicas)
    leg = next((leg for leg in legs if profile.sites[leg.site].is_local), None)
    if leg is None:
        where = "its primary" if do == "export" else "one of its replica sites"
        raise UsageError(f"seed {do}: this host is not {where} in the profile: run it there")
    fields = {"profile": profile.name, "mirror": name, "site": leg.site, "disk": leg.disk}
    if leg.cache is not None:  # an import looks under the leg's cache too (remirror.agent.seed)
        fields["cache_disk"] = leg.cache.disk
    controller = Controller(profile)
    try:
        answer = controller.clients[leg.site].request({"op": "seed", "do": do, **fields, **request})
    finally:
        controller.close()
    if not answer["ok"]:
        raise (UsageError if answer["usage"] else RemirrorError)(f"seed {do}: {answer['message']}")
    return answer


def _said(done: dict[str, Any], what: str, how: str, as_json: bool) -> None:
    if as_json:
        emit_json("seed", {k: v for k, v in done.items() if k not in ("ok", "protocol", "commands")})
        return
    zero = done["zero_chunks"]
    click.echo(
        f"{what} {how}: {done['size'] >> 20} MiB of its {done['file_system']} ({zero} of"
        f" {done['chunks']} chunks all zeros), seed id {done['seed']}",
        err=True,
    )
