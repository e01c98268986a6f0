"""The `remirror` command line.

Thin by design: each verb loads the profile, calls the layer that does the
work, and renders the result. Exit codes: 0 success, 1 a failure on a site,
3 bad input (profile or usage), 70 a bug (traceback with --debug); verbs that
follow another convention (plan --detailed-exitcode, check) say so.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Sequence
from typing import NoReturn

import click

from remirror import __version__
from remirror.cli import commands
from remirror.cli.output import setup_logging
from remirror.errors import EXIT_BAD_INPUT, EXIT_FAILURE, ProfileError, RemirrorError

EXIT_BUG = 70  # EX_SOFTWARE from sysexits.h


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="remirror")
@click.option("-v", "--verbose", count=True, help="Log what is being done (to stderr).")
@click.option("--debug", is_flag=True, help="Log every command run; show tracebacks of bugs.")
def cli(verbose: int, debug: bool) -> None:
    """Mirror disks to a second site with stock Linux parts."""
    setup_logging(verbose, debug)


for command in commands.ALL:
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="remirror", standalone_mode=False)
    except click.exceptions.Exit as done:  # --help, --version
        sys.exit(done.exit_code)
    except click.ClickException as error:  # usage errors: bad flag, missing argument
        error.show()
        sys.exit(EXIT_BAD_INPUT)
    except click.Abort:
        click.echo("remirror: interrupted", err=True)
        sys.exit(EXIT_FAILURE)
    except ProfileError as error:
        click.echo(error.one_line(), err=True)
        sys.exit(error.exit_code)
    except RemirrorError as error:
        click.echo(f"remirror: {error.one_line()}", err=True)
        sys.exit(error.exit_code)
    except Exception as error:  # noqa: BLE001 - the last line of defence against bugs
        if "--debug" in args:
            traceback.print_exc()
        click.echo(
            f"remirror: internal error: {type(error).__name__}: {error}"
            " (a bug: run with --debug for the traceback and report it)",
            err=True,
        )
        sys.exit(EXIT_BUG)
    sys.exit(result if isinstance(result, int) else 0)
