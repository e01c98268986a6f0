"""The `remirror` command line.

Thin by design: each verb loads the profile, calls the layer that does the
work, and renders the result. Exit codes: 0 success, 1 a failure on a site,
3 bad input (profile or usage), 70 a bug (traceback with --debug); verbs that
follow another convention (plan --detailed-exitcode, check) say so.

`remirror agent` is not a verb for people: the controller starts it on every
remote site for every command, so it goes straight to the agent without
click and without the verbs (remirror.agent.serve).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Entry point: run the CLI and turn every outcome into an exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["agent"]:
        from remirror.agent.serve import main as agent

        sys.exit(agent(args[1:]))
    from remirror.cli.app import run

    sys.exit(run(args))
