"""The verbs. Each returns its exit code; errors are raised, not printed."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

import click

from remirror.cli.output import console, emit_json, output_option
from remirror.errors import EXIT_BAD_INPUT, ProfileError, ProfileProblem
from remirror.logs import journal_prefix
from remirror.units import format_duration, format_size

if TYPE_CHECKING:
    from remirror.profile import Profile

# Verbs import the heavy layers (pydantic models, rich) when they run, not
# when the CLI starts: `remirror check` runs from cron every few minutes and
# `remirror lab link` inside an emulated VM.


@click.command()
@click.argument(
    "profile_paths", metavar="PROFILE...", nargs=-1, required=True, type=click.Path(dir_okay=False)
)
@output_option
def validate(profile_paths: tuple[str, ...], output: str) -> int:
    """Check a profile without touching any site, and say which of its sites this host is.

    Several files are checked in turn, each reported; exit 0 only when all are valid. With
    `-o json`, one file gives its document, several a document with one per file (`files`).
    """
    results = [_validated(path, show=output != "json") for path in profile_paths]
    valid = all(result["valid"] for result in results)
    if output == "json":
        emit_json("validate", results[0] if len(results) == 1 else {"valid": valid, "files": results})
    return 0 if valid else EXIT_BAD_INPUT


def _validated(path: str, *, show: bool) -> dict[str, Any]:
    """One file checked: its JSON result; `show`: its description or problems printed too."""
    from remirror.profile import cautions, load_profile

    try:
        profile = load_profile(path)
        site, how = _site_here(profile)
    except ProfileError as error:
        if show:  # one line per problem, as every verb reports a bad profile
            click.echo(f"{journal_prefix(logging.ERROR)}{error.one_line()}", err=True)
        return {"file": path, "valid": False, "problems": [_problem_json(p) for p in error.problems]}
    warnings = cautions(profile)
    if show:
        _describe(path, profile, f"site {site} ({how})" if site else how)
        show_warnings(warnings)
    return {
        "file": path,
        "valid": True,
        "profile": profile.model_dump(mode="json"),
        "site": site,
        "site_found_by": how if site else None,
        "warnings": [_problem_json(w) for w in warnings],
    }


def _site_here(profile: Profile) -> tuple[str | None, str]:
    """The site this host is in `profile` and how that was found; else None and why not, where
    it was told no name (a profile checked on a laptop, or in CI). Told a name (--site,
    REMIRROR_SITE, the site file), a profile that cannot mean it is refused: the Ansible role
    checks each site's copy so."""
    from remirror.here import this_host
    from remirror.profile.identity import find_site

    here = this_host()
    try:
        return find_site(profile, here)
    except ProfileError as error:
        if here.named is not None or here.site_file is not None:
            raise
        return None, error.problems[0].message


def show_warnings(warnings: list[ProfileProblem]) -> None:
    """A profile's warnings on stderr, `file:line:col: warning: ...` as compilers write them."""
    for w in warnings:
        path = f"{w.path}: " if w.path else ""
        click.echo(f"{w.source}:{w.line}:{w.column}: warning: {path}{w.message}", err=True)


def _problem_json(p: ProfileProblem) -> dict[str, object]:
    return {"file": p.source, "line": p.line, "column": p.column, "path": p.path, "message": p.message}


def _describe(source: str, profile: Profile, here: str) -> None:
    out = console()
    out.print(f"{source}: valid profile {profile.name!r}", markup=False)
    sites = ", ".join(f"{name} ({site.host})" for name, site in profile.sites.items())
    out.print(f"  sites:   {sites}", markup=False)
    out.print(f"  this host: {here}", markup=False)
    for mirror in profile.mirrors:
        r = mirror.replication
        mode = f"async, write-behind {r.effective_write_behind}" if r.mode == "async" else "sync"
        timeouts = mirror.iscsi.timeouts if isinstance(mirror.iscsi.timeouts, str) else "custom"
        out.print(
            f"  mirror {mirror.name}: {mirror.md_device}, {mode}, bitmap chunk {format_size(r.bitmap_chunk)},"
            f" on link loss {r.on_link_loss}, iSCSI timeouts {timeouts}",
            markup=False,
        )
        primary = mirror.primary
        cache = f" (+{primary.cache.type} {primary.cache.disk})" if primary.cache else ""
        out.print(f"    primary  {primary.site}:{primary.disk}{cache}", markup=False)
        for replica in mirror.replicas:
            cache = f" (+{replica.cache.type} {replica.cache.disk})" if replica.cache else ""
            out.print(
                f"    replica  {replica.site}:{replica.disk}{cache} via {replica.portal}"
                f" as {profile.replica_iqn(mirror, replica)}",
                markup=False,
            )
        if mirror.cdp:
            out.print(
                f"    cdp      a point every {format_duration(mirror.cdp.every)},"
                f" kept {mirror.cdp.retention.shown()}",
                markup=False,
            )
        if mirror.export:
            out.print(f"    export   {mirror.export.iqn} on {mirror.export.portal}", markup=False)


@click.command()
def schema() -> int:
    """Print the profile's JSON Schema."""
    from remirror.profile import Profile

    click.echo(json.dumps(Profile.model_json_schema(), indent=2))
    return 0
