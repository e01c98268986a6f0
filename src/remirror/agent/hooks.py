"""Operators' commands run around a recovery point or a drill: `cdp.hooks` and `drill.hooks`.

A database or a mail server wants its files consistent in a point, not only
crash-consistent: a `before` hook flushes or freezes it, an `after` hook
thaws it. The after-hook runs whatever happened in between (the before-hook
failed or timed out, the point failed), since an application left frozen is
an outage. A point records whether its hooks ran clean (`cdp list`): only a
point taken after a before-hook that succeeded, followed by an after-hook
that succeeded, is.

Each hook is a shell command line of the profile of the site that runs it
(a request from another site never names one: remirror.agent.serve takes
the site's own), run as `sh -c` in a process group of its own, killed whole
at its time-out.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from remirror.facts.drill import OUTPUT_KEPT, CheckRun

WATCH_SECONDS = 1.0  # how often a running command's danger is asked
HOOK_TIMEOUT = 30.0  # a hook's time-out when the profile gives none

CLEAN, FAILED = "clean", "failed"  # what a point records of its hooks ("": it had none)


def run_line(
    command: str, env: dict[str, str], timeout: float, danger: Callable[[], str] = lambda: ""
) -> CheckRun:
    """`sh -c COMMAND`, in a process group of its own: killed whole at its time, or as soon as
    `danger()` (asked every WATCH_SECONDS) says why it must stop."""
    started = time.monotonic()
    process = subprocess.Popen(
        ["sh", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        text=True,
        errors="replace",
        env={**os.environ, **env},
        start_new_session=True,
    )
    while True:
        try:
            output, _ = process.communicate(timeout=WATCH_SECONDS)  # retried: no output is lost
            code = process.returncode
            break
        except subprocess.TimeoutExpired:
            why = danger() or (f"killed after {timeout:g}s" if time.monotonic() - started > timeout else "")
            if why:
                os.killpg(process.pid, signal.SIGKILL)
                output, _ = process.communicate()
                output, code = f"{output}\n({why})", -1
                break
    return CheckRun(command, code, round(time.monotonic() - started, 3), output[-OUTPUT_KEPT:])


@dataclass(frozen=True)
class Hooks:
    """A point's or a drill's hooks, as the profile gives them."""

    before: str | None = None
    after: str | None = None
    timeout: float = HOOK_TIMEOUT

    def as_json(self) -> dict[str, Any]:
        return {"before": self.before, "after": self.after, "timeout": self.timeout}

    @classmethod
    def from_json(cls, value: Any) -> Hooks | None:
        """Hooks from a request (None: none); ValueError for anything else."""
        if value is None:
            return None
        if not isinstance(value, dict) or set(value) != {"before", "after", "timeout"}:
            raise ValueError("hooks are {before, after, timeout}")
        before, after, timeout = value["before"], value["after"], value["timeout"]
        if not all(line is None or (isinstance(line, str) and line.strip()) for line in (before, after)):
            raise ValueError("a hook is a command line")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 86400:
            raise ValueError("a hook's time-out is seconds, at most a day")
        return cls(before, after, float(timeout))


@dataclass
class HooksRun:
    """What hooks did: each run, and why the point or drill is not clean (empty: it is)."""

    before: CheckRun | None = None
    after: CheckRun | None = None
    failures: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        return CLEAN if not self.failures else FAILED


@contextmanager
def around(hooks: Hooks | None, env: dict[str, str]) -> Iterator[HooksRun]:
    """The before-hook, then the body, then the after-hook whatever the body did (an error in it
    is raised after the after-hook ran). A before-hook that fails does not stop the body: a
    crash-consistent point is still a point, recorded as not clean."""
    done = HooksRun()
    if hooks is None:
        yield done
        return
    try:
        if hooks.before is not None:
            _run(done, "before", hooks.before, env, hooks.timeout)
        yield done
    finally:
        if hooks.after is not None:
            _run(done, "after", hooks.after, env, hooks.timeout)


def _run(done: HooksRun, which: str, command: str, env: dict[str, str], timeout: float) -> None:
    ran = run_line(command, env, timeout)
    setattr(done, which, ran)
    if not ran.passed:
        last = ran.output.strip().splitlines()[-1:] or [""]
        done.failures.append(f"{which} hook exited {ran.exit_code}: {last[0][:200]}")
