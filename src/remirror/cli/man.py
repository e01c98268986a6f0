"""Manual pages and shell completion, made from the commands themselves (the Debian package
ships them: debian/rules).

    python -m remirror.cli.man DIRECTORY

writes remirror.8 (the verbs, one line each) and remirror-VERB.8 for each verb (its usage, its
help and its options, as `remirror VERB --help` says them) into DIRECTORY/man8, and bash's
and zsh's completion (click's own, which asks remirror for each completion) into
DIRECTORY/bash-completion/completions/remirror and DIRECTORY/zsh/vendor-completions/_remirror.
"""

from __future__ import annotations

import importlib
import inspect
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import click

from remirror import __version__
from remirror.cli.app import VERBS, cli

SECTION = "8"  # system administration: every verb runs as root


def _escape(text: str) -> str:
    """Text as roff reads it: backslashes doubled, a line's leading dot or quote guarded."""
    lines = text.replace("\\", "\\e").replace("-", "\\-").splitlines()
    return "\n".join(f"\\&{line}" if line.startswith((".", "'")) else line for line in lines)


def _paragraphs(text: str) -> str:
    """A docstring as roff paragraphs: its indentation gone, its blank lines paragraph breaks."""
    parts = [" ".join(part.split()) for part in inspect.cleandoc(text).split("\n\n") if part.strip()]
    return "\n.PP\n".join(_escape(part) for part in parts)


def _header(name: str, summary: str) -> str:
    date = datetime.fromtimestamp(int(os.environ.get("SOURCE_DATE_EPOCH", "0")) or 0, UTC)
    day = date.strftime("%Y-%m-%d") if date.year > 1970 else ""
    return (
        f'.TH "{name.upper()}" "{SECTION}" "{day}" "remirror {__version__}" "remirror"\n'
        f".SH NAME\n{_escape(name)} \\- {_escape(summary)}\n"
    )


def verb_page(verb: str) -> str:
    """remirror-VERB(8): its synopsis, description and options, from the click command."""
    module, attribute, summary = VERBS[verb]
    command: click.Command = getattr(importlib.import_module(module), attribute)
    context = click.Context(command, info_name=f"remirror {verb}")
    usage = " ".join(command.collect_usage_pieces(context))
    page = _header(f"remirror-{verb}", summary.rstrip("."))
    page += f".SH SYNOPSIS\n.B remirror {verb}\n{_escape(usage)}\n"
    page += f".SH DESCRIPTION\n{_paragraphs(command.help or summary)}\n"
    options = [p.get_help_record(context) for p in command.get_params(context) if isinstance(p, click.Option)]
    if any(options):
        page += ".SH OPTIONS\n"
        for record in options:
            if record is not None:
                page += f".TP\n.B {_escape(record[0])}\n{_escape(record[1])}\n"
    return page + f".SH SEE ALSO\n.BR remirror ({SECTION})\n"


def main_page() -> str:
    """remirror(8): the group's options and every verb, each with its summary and page."""
    context = click.Context(cli, info_name="remirror")
    page = _header("remirror", "mirror disks to a second site with stock Linux parts")
    page += ".SH SYNOPSIS\n.B remirror\n[\\fIOPTIONS\\fR] \\fIVERB\\fR [\\fIARGUMENTS\\fR]\n"
    page += f".SH DESCRIPTION\n{_paragraphs(cli.help or '')}\n"
    page += ".PP\nEach verb has its own page, remirror\\-VERB(8), and its own \\-\\-help.\n"
    page += ".SH OPTIONS\n"
    for param in cli.get_params(context):
        record = param.get_help_record(context)
        if record is not None:
            page += f".TP\n.B {_escape(record[0])}\n{_escape(record[1])}\n"
    page += ".SH VERBS\n"
    for verb in sorted(VERBS):
        page += f".TP\n.BR remirror\\-{verb} ({SECTION})\n{_escape(VERBS[verb][2])}\n"
    return (
        page + ".SH FILES\n.TP\n/etc/remirror/NAME.yaml\nA profile.\n.TP\n/etc/remirror/site\n"
        "The site this host is, where its host name is none of the profile's sites.\n"
    )


def write_all(directory: Path) -> list[Path]:
    """Every page and completion file under `directory`; the paths written."""
    man = directory / f"man{SECTION}"
    man.mkdir(parents=True, exist_ok=True)
    written = [man / f"remirror.{SECTION}"]
    written[0].write_text(main_page())
    for verb in VERBS:
        path = man / f"remirror-{verb}.{SECTION}"
        path.write_text(verb_page(verb))
        written.append(path)
    for shell, target in (
        ("bash", directory / "bash-completion" / "completions" / "remirror"),
        ("zsh", directory / "zsh" / "vendor-completions" / "_remirror"),
    ):
        target.parent.mkdir(parents=True, exist_ok=True)
        script = subprocess.run(  # this interpreter, remirror's own entry point
            [sys.executable, "-m", "remirror"],
            env={**os.environ, "_REMIRROR_COMPLETE": f"{shell}_source"},
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        target.write_text(script)
        written.append(target)
    return written


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1])):
        sys.stdout.write(f"{path}\n")
