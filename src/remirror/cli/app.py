"""The click application: the top-level group, which loads a verb's module only when that verb runs.

Under emulation (the lab) or on a small host, every module imported costs
time at every start: `remirror --help` imports click and this module, a
verb imports its own module and what it needs when it runs. The one-line
summaries `--help` shows are kept here, so that listing the verbs imports
none of them; a unit test holds them equal to the verbs' own docstrings.
"""

from __future__ import annotations

import importlib
import logging
import os
import traceback

import click

from remirror import __version__
from remirror.errors import EXIT_BAD_INPUT, EXIT_FAILURE, VERIFY_CANNOT_TELL, ProfileError, RemirrorError
from remirror.logs import journal_prefix, setup_logging

EXIT_BUG = 70  # EX_SOFTWARE from sysexits.h
CHECK_UNKNOWN = 3  # `check`'s every failure: monitoring-plugins UNKNOWN (remirror.health.check.Status)

# verb -> (module, attribute, the summary `remirror --help` shows)
VERBS: dict[str, tuple[str, str, str]] = {
    "validate": (
        "remirror.cli.commands",
        "validate",
        "Check a profile without touching any site, and say which of its sites this host is.",
    ),
    "schema": ("remirror.cli.commands", "schema", "Print the profile's JSON Schema."),
    "init": (
        "remirror.cli.init",
        "init",
        "Start a two-site mirror here, at the primary: write its profile and remirror's SSH key,"
        " look at the disk, and print what is left to do at the DR host.",
    ),
    "plan": ("remirror.cli.mirror", "plan", "Show what apply would change, without changing anything."),
    "apply": (
        "remirror.cli.mirror",
        "apply",
        "Make the sites match the profile: show the plan, run it, report what changed.",
    ),
    "start": (
        "remirror.cli.mirror",
        "start",
        "Start the mirrors that were running, as apply would assemble them, and nothing else.",
    ),
    "destroy": (
        "remirror.cli.mirror",
        "destroy",
        "Take MIRROR apart (array, sessions, targets), leaving the data on its disks.",
    ),
    "promote": ("remirror.cli.failover", "promote", "Make SITE run MIRROR (failover; docs/failover.md)."),
    "failback": (
        "remirror.cli.failover",
        "failback",
        "Hand MIRROR back to its home primary (the profile's `primary`): a planned promotion,"
        " refused unless every leg is in sync.",
    ),
    "resolve": (
        "remirror.cli.failover",
        "resolve",
        "End MIRROR's split brain: keep SITE's data, rebuild the other legs from it (docs/failover.md).",
    ),
    "reconcile": (
        "remirror.cli.reconcile",
        "reconcile",
        "Bring the mirrors back to what the profile wants, one safe step per pass.",
    ),
    "watch": (
        "remirror.cli.reconcile",
        "watch",
        "Reconcile continuously: on udev block and iSCSI events, and on a timer.",
    ),
    "destage": (
        "remirror.cli.reconcile",
        "destage",
        "Write caches back when their device is idle (legs with `destage: idle`).",
    ),
    "status": (
        "remirror.cli.health",
        "status",
        "Show each mirror's state and, per leg, what it misses, how old its copy is, and the link.",
    ),
    "check": (
        "remirror.cli.health",
        "check",
        "Monitoring-plugins check: exit 0 OK, 1 WARNING, 2 CRITICAL, 3 UNKNOWN; perfdata after `|`.",
    ),
    "metrics": (
        "remirror.cli.health",
        "metrics",
        "Prometheus text format, on stdout or into node_exporter's textfile directory.",
    ),
    "verify": (
        "remirror.cli.health",
        "verify",
        "Compare a mirror's legs online: each site hashes its own leg, only digests cross the link.",
    ),
    "estimate": (
        "remirror.cli.estimate",
        "estimate",
        "Predict the initial sync, a resync after an outage, async mode's backlog and whether sync"
        " mode fits the link, from the primary's own writes and the measured link.",
    ),
    "seed": (
        "remirror.cli.seed",
        "seed",
        "A mirror's first copy carried to the DR site: export at the primary, import at the DR site"
        " (initial_sync: seeded).",
    ),
    "drill": (
        "remirror.cli.drill",
        "drill",
        "Prove the DR site can take over: checks on a throwaway copy of the replica, at the DR site.",
    ),
    "cdp": ("remirror.cli.cdp", "cdp", "Recovery points of a mirror with `cdp` (run on its primary host)."),
    "lab": ("remirror.cli.lab", "lab", "A throwaway VM with two sites, for trying, rehearsing and testing."),
}


class LazyGroup(click.Group):
    """A group whose verbs are imported when one is looked up, not when the group is built."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(VERBS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in VERBS:
            return None
        module, attribute, _ = VERBS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        width = formatter.width - 6 - max(len(name) for name in VERBS)
        rows = [(name, _shortened(VERBS[name][2], width)) for name in sorted(VERBS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _shortened(text: str, width: int) -> str:
    """`text` cut at a word to fit `width`, as click shortens a verb's help."""
    if len(text) <= width:
        return text
    return text[: max(width - 3, 1)].rsplit(" ", 1)[0] + "..."


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="remirror")
@click.option("-v", "--verbose", count=True, help="Log what is being done (to stderr).")
@click.option("--debug", is_flag=True, help="Log every command run; show tracebacks of bugs.")
@click.option("--site", metavar="NAME", default=None,
              help="The profile's site this host is (else /etc/remirror/site, a site written"
              " `host: local`, or the one whose name or ssh:// host is this host's name).")  # fmt: skip
def cli(verbose: int, debug: bool, site: str | None) -> None:
    """Mirror disks to a second site with stock Linux parts."""
    setup_logging(verbose, debug)
    if site is not None:
        # For the verb and every process it starts: remirror.here reads it where profiles load.
        os.environ[SITE_VARIABLE] = site


# remirror.here.SITE_VARIABLE (not imported: it would import the profile's models at every start)
SITE_VARIABLE = "REMIRROR_SITE"


def _wants_json(args: list[str]) -> bool:
    """Whether the command line asks for `-o json` (the verb did not get to say so itself)."""
    pairs = zip(args, [*args[1:], ""], strict=True)
    return any(a in ("-o", "--output") and b == "json" for a, b in pairs) or any(
        a in ("-ojson", "--output=json") for a in args
    )


def _verb_code(verb: str, code: int) -> int:
    """A failure's exit code as `verb` gives it: `verify` exits as cmp(1), where 1 is "they
    differ", so a failure there is 2, "could not tell"."""
    return VERIFY_CANNOT_TELL if verb == "verify" and code == EXIT_FAILURE else code


def _emit_error(error: RemirrorError, exit_code: int | None = None) -> None:
    """The error as a JSON document on stdout: its reason (a refusal: `destructive`, `busy`,
    `split_brain`), its message and what else it carries, for a program to read."""
    from remirror.cli.output import emit_json

    emit_json(
        "error",
        {
            "reason": error.reason,
            "message": error.one_line(),
            "exit_code": error.exit_code if exit_code is None else exit_code,
            **error.details(),
        },
    )


def run(args: list[str]) -> int:
    """Run the CLI on `args`; every outcome as an exit code."""
    # `check` is a monitoring plugin: whatever stops it (a bad flag, a bug) is UNKNOWN, exit 3,
    # with one line on stdout, the only output a monitoring system shows.
    verb = next(
        (a for i, a in enumerate(args) if not a.startswith("-") and args[i - 1 : i] != ["--site"]), ""
    )

    def failed(reason: str, code: int) -> int:
        if verb != "check":
            return _verb_code(verb, code)
        click.echo(f"REMIRROR UNKNOWN - {reason}")
        return CHECK_UNKNOWN

    try:
        result = cli.main(args=args, prog_name="remirror", standalone_mode=False)
    except click.exceptions.Exit as done:  # --help, --version
        return done.exit_code
    except click.ClickException as error:  # usage errors: bad flag, missing argument
        error.show()
        return failed(error.format_message(), EXIT_BAD_INPUT)
    except click.Abort:
        click.echo(f"{journal_prefix(logging.ERROR)}remirror: interrupted", err=True)
        return failed("interrupted", EXIT_FAILURE)
    except RemirrorError as error:
        if _wants_json(args):
            _emit_error(error, _verb_code(verb, error.exit_code))
        prefix = "" if isinstance(error, ProfileError) else "remirror: "
        click.echo(f"{journal_prefix(logging.ERROR)}{prefix}{error.one_line()}", err=True)
        return failed(error.one_line(), error.exit_code)
    except Exception as error:  # noqa: BLE001 - the last line of defence against bugs
        if "--debug" in args:
            traceback.print_exc()
        reason = f"internal error: {type(error).__name__}: {error}"
        click.echo(
            f"{journal_prefix(logging.CRITICAL)}remirror: {reason} (a bug: run with --debug for the traceback"
            " and report it)",
            err=True,
        )
        return failed(reason, EXIT_BUG)
    return result if isinstance(result, int) else 0
