"""Operators' commands run around a recovery point or a drill: `cdp.hooks` and `drill.hooks`.

A database or a mail server wants its files consistent in a point, not only
crash-consistent: a `before` hook flushes or freezes it, an `after` hook
thaws it. The after-hook runs whatever happened in between (the before-hook
failed or timed out, the point failed), since an application left frozen is
an outage; and should the process running them die in between (a kill, the
watchdog), the after-hook it owed runs first thing next time: a marker in
/run says so. A point records whether its hooks ran clean (`cdp list`):
only a point taken after a before-hook that succeeded, followed by an
after-hook that succeeded, is; until the after-hook has run it is recorded
as not clean.

Each hook is a shell command line of the profile of the host that runs it,
run only for its own operator's verbs and its own `cdp run` (a request from
another site runs none: remirror.agent.serve), as `sh -c` in a process group
of its own, killed whole at its time-out. Its output goes to a file, not a
pipe: a daemon it starts (`pg_ctl start`) may keep the output open, and the
hook is done when its shell is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from remirror.facts.cdp_index import CLEAN, FAILED
from remirror.facts.drill import OUTPUT_KEPT, CheckRun
from remirror.files import make_dirs
from remirror.systemd import notify

WATCH_SECONDS = 1.0  # how often a running command's danger is asked (and systemd's watchdog pinged)
HOOK_TIMEOUT = 30.0  # a hook's time-out when the profile gives none
OWED_DIR = Path("/run/remirror/hooks")  # the after-hooks owed by a run that died: tmpfs, as a freeze is


def run_line(
    command: str, env: dict[str, str], timeout: float, danger: Callable[[], str] = lambda: ""
) -> CheckRun:
    """`sh -c COMMAND`, in a process group of its own: killed whole at its time, or as soon as
    `danger()` (asked every WATCH_SECONDS) says why it must stop. Under systemd the watchdog is
    pinged meanwhile: a long hook is not a hung daemon."""
    started = time.monotonic()
    with tempfile.TemporaryFile("w+", errors="replace") as output:
        process = subprocess.Popen(
            ["sh", "-c", command],
            stdout=output,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **env},
            start_new_session=True,
        )
        why = ""
        while True:
            try:
                code = process.wait(timeout=WATCH_SECONDS)
                break
            except subprocess.TimeoutExpired:
                notify("WATCHDOG=1")
                why = danger() or (
                    f"killed after {timeout:g}s" if time.monotonic() - started > timeout else ""
                )
                if why:
                    with suppress(ProcessLookupError):
                        os.killpg(process.pid, signal.SIGKILL)
                    process.wait()
                    code = -1
                    break
        output.seek(0)
        said = output.read()
    said = f"{said}\n({why})" if why else said
    return CheckRun(command, code, round(time.monotonic() - started, 3), said[-OUTPUT_KEPT:])


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
    finished: bool = False  # every hook has run, the after-hook last

    @property
    def outcome(self) -> str:
        """CLEAN only once every hook has run and passed."""
        return CLEAN if self.finished and not self.failures else FAILED


@contextmanager
def around(
    hooks: Hooks | None, env: dict[str, str], owed: str, danger: Callable[[], str] = lambda: ""
) -> Iterator[HooksRun]:
    """The before-hook, then the body, then the after-hook whatever the body did (an error in it
    is raised after the after-hook ran). A before-hook that fails does not stop the body: a
    crash-consistent point is still a point, recorded as not clean. `owed` names the marker
    (one per mirror or drill) that says an after-hook is owed while the body runs: the caller
    runs what an earlier run owed first (run_owed)."""
    done = HooksRun()
    if hooks is None:
        done.finished = True
        yield done
        return
    marker = OWED_DIR / owed
    try:
        if hooks.after is not None:
            make_dirs(OWED_DIR, 0o700)
            marker.write_text(f"{hooks.timeout:g}\n{hooks.after}")
        if hooks.before is not None:
            done.before = _run(done, "before", hooks.before, env, hooks.timeout, danger)
        yield done
    finally:
        if hooks.after is not None:
            done.after = _run(done, "after", hooks.after, env, hooks.timeout, danger)
            marker.unlink(missing_ok=True)
        done.finished = True


def run_owed(owed: str, env: dict[str, str]) -> CheckRun | None:
    """The after-hook a run that died owed (its marker), run now; None if none was owed."""
    marker = OWED_DIR / owed
    try:
        timeout, command = marker.read_text().split("\n", 1)
    except (OSError, ValueError):
        return None
    ran = run_line(command, env, float(timeout))
    marker.unlink(missing_ok=True)
    return ran


def forget_owed(owed: str) -> None:
    """No after-hook is owed any more (what it would have stopped is gone)."""
    (OWED_DIR / owed).unlink(missing_ok=True)


def _run(
    done: HooksRun,
    which: str,
    command: str,
    env: dict[str, str],
    timeout: float,
    danger: Callable[[], str],
) -> CheckRun:
    ran = run_line(command, env, timeout, danger)
    if not ran.passed:
        last = ran.output.strip().splitlines()[-1:] or [""]
        done.failures.append(f"{which} hook exited {ran.exit_code}: {last[0][:200]}")
    return ran
