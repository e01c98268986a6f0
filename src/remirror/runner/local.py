"""Run commands on this machine."""

from __future__ import annotations

import subprocess

from remirror.runner.base import BASE_ENV, Runner

# Exit status a shell gives for a command it cannot find; used for the same case.
NOT_FOUND = 127


class LocalRunner(Runner):
    """Runs commands on the machine remirror itself runs on."""

    def __init__(self, site: str = "local") -> None:
        super().__init__(site)

    def _execute(
        self, argv: list[str], stdin: str | None, timeout: float, shown: tuple[str, ...]
    ) -> tuple[int, str, str]:
        try:
            proc = subprocess.run(
                argv,
                # Without input, give the child an empty stdin: nothing a
                # command does may wait on the operator's terminal.
                **({"input": stdin} if stdin is not None else {"stdin": subprocess.DEVNULL}),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=BASE_ENV,
                check=False,
            )
        except subprocess.TimeoutExpired as expired:
            stderr = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) else ""
            raise self._timed_out(shown, timeout, stderr) from None
        except FileNotFoundError:
            return NOT_FOUND, "", f"{argv[0]}: command not found"
        except PermissionError:
            return NOT_FOUND - 1, "", f"{argv[0]}: permission denied"
        return proc.returncode, proc.stdout, proc.stderr
