"""The error types every layer raises.

Two families, as in tox and kopf: a `RemirrorError` is an *expected* failure
(bad input, a site that cannot be reached, a command that failed) and is
shown to the operator as one line, with an exit code that says which kind it
was. Anything else escaping to the CLI is a bug and gets a traceback under
`--debug`. With `-o json` the CLI also prints the error as a JSON document
(`"kind": "error"`) whose `reason` names the kind: a program (the Ansible
module) reads that, never the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

# Exit codes shared by every verb. `plan --detailed-exitcode` and `check`
# (monitoring-plugins) define their own on top of these where they must.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 3
# `verify` exits as cmp(1) does: 1 the legs differ; 2 it could not tell, a failure on a site
# included (remirror.cli.app maps EXIT_FAILURE to it).
VERIFY_DIFFER = 1
VERIFY_CANNOT_TELL = 2


class RemirrorError(Exception):
    """An expected failure, reported to the operator as one line."""

    exit_code = EXIT_FAILURE
    reason = "failed"  # what kind of failure, in `-o json`

    def one_line(self) -> str:
        """The message as the CLI prints it."""
        return " ".join(str(self).split())

    def details(self) -> dict[str, Any]:
        """What `-o json` carries besides the reason and the message."""
        return {}


class UsageError(RemirrorError):
    """The command line itself is wrong."""

    exit_code = EXIT_BAD_INPUT
    reason = "usage"


class Refusal(RemirrorError):
    """remirror will not go on until a person decides: a plan that writes over data, a split brain."""

    reason = "refused"


class Declined(RemirrorError):
    """The operator answered no when asked to confirm: nothing was changed."""

    reason = "declined"

    def __init__(self, command: str) -> None:
        super().__init__(f"{command}: not confirmed: nothing changed")


class DestructivePlan(Refusal):
    """The plan writes over data and the operator did not allow it (`--allow-destructive`)."""

    reason = "destructive"

    def __init__(self, destroys: Sequence[str]) -> None:
        self.destroys = tuple(destroys)
        super().__init__(
            "refusing to write over data without --allow-destructive: " + "; ".join(self.destroys)
        )

    def details(self) -> dict[str, Any]:
        return {"destroys": list(self.destroys)}


class ProfileError(RemirrorError):
    """A profile that cannot be loaded or breaks a rule; carries every problem found."""

    exit_code = EXIT_BAD_INPUT
    reason = "bad_profile"

    def __init__(self, problems: Sequence[ProfileProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def one_line(self) -> str:
        # One line per problem: an editor can jump to each file:line:col.
        return str(self)

    def details(self) -> dict[str, Any]:
        return {"problems": [str(p) for p in self.problems]}


class ProfileProblem:
    """One problem in a profile: where it is and what is wrong."""

    def __init__(self, source: str, line: int, column: int, path: str, message: str) -> None:
        self.source = source
        self.line = line
        self.column = column
        self.path = path
        self.message = message

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}:{self.column}"
        return f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"

    def __repr__(self) -> str:
        return f"ProfileProblem({self!s})"


class SiteError(RemirrorError):
    """Something went wrong on, or on the way to, one site."""

    reason = "site_failed"

    def __init__(self, site: str, message: str) -> None:
        self.site = site
        super().__init__(f"site {site}: {message}")

    def details(self) -> dict[str, Any]:
        return {"site": self.site}


class SiteUnreachable(SiteError):
    """The site could not be connected to or refused our credentials."""

    reason = "unreachable"


class SiteBusy(SiteError):
    """Another remirror command holds the site's lock (remirror.agent.lock)."""

    reason = "busy"


class CommandError(SiteError):
    """A command on a site failed; carries what ran (redacted) and how it ended."""

    reason = "command_failed"

    def __init__(
        self,
        site: str,
        argv: Sequence[str],
        returncode: int | None,
        stderr_tail: str,
        reason: str = "",
    ) -> None:
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        shown = " ".join(self.argv)
        how = reason or f"exit code {returncode}"
        detail = f": {stderr_tail}" if stderr_tail else ""
        super().__init__(site, f"`{shown}` failed ({how}){detail}")


class CommandTimeout(CommandError):
    """A command on a site ran past its timeout and was stopped."""
