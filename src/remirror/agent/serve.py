"""`remirror agent [--serve]`: the site's end of the controller's channel.

Without --serve: one request, the whole of stdin. With --serve: one request
per line and one answer per line, until stdin closes, so that a controller
command starts one agent per remote site instead of one per request; if
stdin closes while a request runs, the agent ends, with the commands it
started (a controller that gave up leaves nothing running on the site). Every
controller command starts it on every remote site, so it imports only what
observing and running steps need: no click, no profile models, no planner
(tests/unit/test_layers.py holds it to that).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import threading
from typing import Any, NoReturn

from remirror.errors import EXIT_BAD_INPUT
from remirror.logs import setup_logging

USAGE = "usage: remirror agent [--serve]  (run by the controller over SSH; requests are JSON on stdin)"


def main(args: list[str]) -> int:
    """Answer the requests on stdin; the exit code."""
    if args not in ([], ["--serve"]):
        sys.stderr.write(f"{USAGE}\n" if args in (["-h"], ["--help"]) else f"remirror: {USAGE}\n")
        return 0 if args in (["-h"], ["--help"]) else EXIT_BAD_INPUT
    setup_logging(0, False)
    from remirror.agent import handle

    if not args:
        try:
            request = json.load(sys.stdin)
        except json.JSONDecodeError as error:
            sys.stderr.write(f"remirror: agent: the request is not JSON: {error}\n")
            return EXIT_BAD_INPUT
        sys.stdout.write(json.dumps(handle(request)) + "\n")
        return 0
    _own_process_group()
    requests = _Requests(sys.stdin.fileno())
    while (line := requests.next()) is not None:
        try:
            answer = _answer_unless_abandoned(json.loads(line), requests)
        except json.JSONDecodeError as error:
            answer = {"error": f"the request is not JSON: {error}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


class _Requests:
    """The request lines on stdin, read past Python's buffering so that `select` tells the truth."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def next(self) -> str | None:
        """The next line; None once stdin is closed."""
        while b"\n" not in self.buffer:
            if not self.fill():
                return None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()

    def fill(self) -> bool:
        """Read what is there (blocking); False at the end of stdin."""
        chunk = os.read(self.fd, 1 << 16)
        if not chunk:
            self.closed = True
            return False
        self.buffer += chunk
        return True


def _answer_unless_abandoned(request: dict[str, Any], requests: _Requests) -> dict[str, Any]:
    """`handle(request)`, ending the agent and what it runs if the controller goes meanwhile.

    The controller sends nothing while it waits for an answer, so stdin can
    only become readable by closing: the controller timed out, was killed or
    lost the link. Whatever the agent is doing was asked by nobody now, and
    it holds the site's lock (remirror.agent.lock) for as long as it runs.
    """
    from remirror.agent import handle

    box: dict[str, dict[str, Any]] = {}
    worker = threading.Thread(target=lambda: box.update(answer=handle(request)), daemon=True)
    worker.start()
    while worker.is_alive():
        if requests.closed:  # it sent more requests, then closed: it waits for their answers
            worker.join()
            break
        readable, _, _ = select.select([requests.fd], [], [], 0.5)
        if readable and worker.is_alive() and not requests.fill() and b"\n" not in requests.buffer:
            _end_abandoned()
    return box.get("answer", {"error": "the agent failed to answer"})


def _own_process_group() -> None:
    """Lead a process group of our own, so that ending it ends our commands and nothing else."""
    if os.getpgrp() != os.getpid():
        with contextlib.suppress(OSError):  # a session leader already leads its group
            os.setpgid(0, 0)


def _end_abandoned() -> NoReturn:
    from remirror.agent.critical import wait_for_sections

    sys.stderr.write("remirror: agent: the controller went away mid-request: ending what it asked for\n")
    wait_for_sections()  # a step that must not stop half-way (a leg move) finishes first
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGTERM)  # the commands this agent started
    os._exit(1)  # the kernel lets go of the locks with the process
