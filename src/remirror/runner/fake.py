"""A scripted runner for unit tests: records every call, replays canned results.

Lives in the package (not in tests/) so that every layer's tests, and later
plugins, share one fake rather than patching internals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from remirror.errors import CommandTimeout
from remirror.runner.base import Runner


@dataclass(frozen=True)
class Reply:
    """What a scripted command returns (or `timeout=True`: it hangs)."""

    returncode: int = 0
    stdout: str = ""
    stderr: str = ""
    timeout: bool = False


@dataclass(frozen=True)
class Call:
    """One recorded call, as the runner received it (not redacted)."""

    argv: tuple[str, ...]
    stdin: str | None
    timeout: float


class FakeRunner(Runner):
    """Answers each argv from a script of (argv prefix, reply); fails on anything unscripted."""

    def __init__(self, site: str = "fake", script: Sequence[tuple[Sequence[str], Reply]] = ()) -> None:
        super().__init__(site)
        self.script: list[tuple[tuple[str, ...], Reply]] = [(tuple(a), r) for a, r in script]
        self.calls: list[Call] = []

    def expect(self, argv_prefix: Sequence[str], reply: Reply | None = None) -> None:
        """Add a scripted answer for commands starting with `argv_prefix`."""
        self.script.append((tuple(argv_prefix), reply or Reply()))

    def _execute(
        self, argv: list[str], stdin: str | None, timeout: float, shown: tuple[str, ...]
    ) -> tuple[int, str, str]:
        self.calls.append(Call(tuple(argv), stdin, timeout))
        for prefix, reply in self.script:
            if tuple(argv[: len(prefix)]) == prefix:
                if reply.timeout:
                    raise CommandTimeout(self.site, shown, None, "", reason=f"timed out after {timeout:g}s")
                return reply.returncode, reply.stdout, reply.stderr
        raise AssertionError(f"FakeRunner({self.site}): unscripted command {argv!r}")
