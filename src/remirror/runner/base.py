"""What every runner implementation shares: the interface, results, redaction."""

from __future__ import annotations

import json
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from remirror.errors import CommandError, CommandTimeout

log = logging.getLogger("remirror.runner")

DEFAULT_TIMEOUT = 60.0
# How many commands each thread has started, on any runner: the agent reports the
# commands a request cost (control-plane cost, docs/performance.md). Per thread,
# because the controller asks the local agent and the remote ones at once.
_started = threading.local()
STDERR_TAIL_LINES = 5
REDACTED = "<redacted>"

# Where remirror may be installed on a site besides /usr/local/bin (README, "Install on your
# sites"): the Ansible role's venv, and pipx's for root. Last on PATH: the distribution's
# tools come first.
INSTALL_DIRS = ("/opt/remirror/venv/bin", "/root/.local/bin")
# The environment every command sees: the C locale, so that parsers read the
# same words and numbers on every site, and a PATH that has the sbin tools (and remirror,
# for the agent a remote site runs).
BASE_ENV = {
    "LC_ALL": "C",
    "LANG": "C",
    "PATH": ":".join(
        ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin", *INSTALL_DIRS)
    ),
}
# What the shell (and env) exit with for a command that is not there.
NOT_FOUND = 127


@dataclass(frozen=True)
class Completed:
    """How a command ended. `argv` is already redacted; output is not."""

    site: str
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    elapsed: float

    @property
    def ok(self) -> bool:
        """Whether the command exited 0."""
        return self.returncode == 0


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every secret replaced, longest first (one may contain another), as written and
    as an error's text may quote it: repr() of the string or of its bytes, or JSON (a password
    may hold a backslash or a quote, which those escape)."""
    forms = {form for s in secrets if s for form in _quoted_forms(s)}
    for form in sorted((f for f in forms if f), key=len, reverse=True):
        text = text.replace(form, REDACTED)
    return text


def _quoted_forms(secret: str) -> tuple[str, ...]:
    return (secret, repr(secret)[1:-1], repr(secret.encode())[2:-1], json.dumps(secret)[1:-1])


def stderr_tail(stderr: str, lines: int = STDERR_TAIL_LINES) -> str:
    """The last few non-empty lines of stderr, joined for a one-line error."""
    kept = [line.strip() for line in stderr.splitlines() if line.strip()]
    return " | ".join(kept[-lines:])


def commands_started() -> int:
    """How many commands this thread has started so far."""
    return int(getattr(_started, "count", 0))


class Runner(ABC):
    """Runs argv commands on one site."""

    def __init__(self, site: str) -> None:
        self.site = site

    def run(
        self,
        argv: Sequence[str],
        *,
        stdin: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        secrets: Iterable[str] = (),
        ok_codes: Iterable[int] = (0,),
    ) -> Completed:
        """Run `argv`; raise CommandError unless it exits with one of `ok_codes`.

        `secrets` are masked wherever the command or its output is logged or
        reported. Pass secrets through `stdin` where the tool allows it:
        an argv is visible to every local user in `ps`.
        """
        if not argv or isinstance(argv, str):
            raise TypeError("argv must be a non-empty sequence of strings, not a shell string")
        secret_list = list(secrets)
        shown = tuple(redact(arg, secret_list) for arg in argv)
        log.debug("site %s: run: %s", self.site, " ".join(shown))
        _started.count = commands_started() + 1
        started = time.monotonic()
        try:
            returncode, stdout, stderr = self._execute(list(argv), stdin, timeout, shown)
        except CommandTimeout as timed_out:  # what it said before it was stopped, redacted too
            said: str | None = redact(timed_out.stderr_tail, secret_list)
        else:
            said = None
        if said is not None:
            # Raised out here: inside the handler the unredacted error (and the process's, with
            # the raw argv) would stay attached to it as its context, for a traceback to print.
            raise self._timed_out(shown, timeout, said)
        elapsed = time.monotonic() - started
        completed = Completed(self.site, shown, returncode, stdout, stderr, elapsed)
        log.debug("site %s: exit %d after %.2fs: %s", self.site, returncode, elapsed, shown[0])
        if returncode not in set(ok_codes):
            raise CommandError(self.site, shown, returncode, redact(stderr_tail(stderr), secret_list))
        return completed

    def _timed_out(self, shown: tuple[str, ...], timeout: float, stderr: str) -> CommandTimeout:
        """The error of a command stopped at its timeout; `run` redacts it of the command's secrets."""
        return CommandTimeout(
            self.site, shown, None, stderr_tail(stderr), reason=f"timed out after {timeout:g}s"
        )

    @abstractmethod
    def _execute(
        self, argv: list[str], stdin: str | None, timeout: float, shown: tuple[str, ...]
    ) -> tuple[int, str, str]:
        """Run the command; return (exit code, stdout, stderr) or raise CommandTimeout."""

    def close(self) -> None:  # noqa: B027 - most runners hold nothing
        """Release any connection the runner holds."""
