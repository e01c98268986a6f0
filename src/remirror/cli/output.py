"""How the CLI talks: human text or JSON on stdout, logs on stderr.

Machine output (`-o json`) is one JSON document carrying `schema_version`;
its shape only changes with that number. Human output goes through rich,
which honours NO_COLOR and drops colour and cursor tricks when stdout is not
a terminal.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from rich.console import Console

# Bump when a JSON document's shape changes in a way a consumer could notice.
SCHEMA_VERSION = 1

OUTPUT_FORMATS = click.Choice(["text", "json"])

# Shared by the verbs that take a profile and can answer in JSON.
profile_argument = click.argument("profile_path", metavar="PROFILE", type=click.Path(dir_okay=False))
output_option = click.option("-o", "--output", type=OUTPUT_FORMATS, default="text", show_default=True)


def console() -> Console:
    """A console on stdout for human output."""
    from rich.console import Console  # imported on use: rich is slow to import

    return Console(highlight=False, soft_wrap=True)


def emit_json(kind: str, payload: dict[str, Any]) -> None:
    """Print one JSON document with the schema version and its kind."""
    document = {"schema_version": SCHEMA_VERSION, "kind": kind, **payload}
    click.echo(json.dumps(document, indent=2, sort_keys=False))


@contextmanager
def progress_bar(what: str, shown: bool = True) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on stderr while the body runs, when stderr is a terminal and `shown`
    (never in cron, a pipe or a log); what the body calls with (done, total) bytes."""
    if not shown or not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    columns = (BarColumn(), DownloadColumn(binary_units=True), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(f"[bold]{what}", *columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(what, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance
