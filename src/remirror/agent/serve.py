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
import shlex
import signal
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from remirror.agent import lock
from remirror.errors import EXIT_BAD_INPUT
from remirror.logs import setup_logging
from remirror.runner.base import redact

if TYPE_CHECKING:
    from remirror.facts.scope import SiteScope

USAGE = "usage: remirror agent [--serve]  (run by the controller over SSH; requests are JSON on stdin)"


def main(args: list[str]) -> int:
    """Answer the requests on stdin; the exit code."""
    if args not in ([], ["--serve"]):
        sys.stderr.write(f"{USAGE}\n" if args in (["-h"], ["--help"]) else f"remirror: {USAGE}\n")
        return 0 if args in (["-h"], ["--help"]) else EXIT_BAD_INPUT
    asked = os.environ.get("SSH_ORIGINAL_COMMAND")
    if asked is not None and not _is_agent_command(asked):
        # authorized_keys' command="remirror agent --serve" runs us whatever the client asked for.
        _refuse(f"this SSH key may only speak remirror's agent protocol; not run: {asked[:200]}")
        return EXIT_BAD_INPUT
    setup_logging(0, False)
    # The kernel resolves a relative path in a device-mapper table (and any relative path a
    # command is given) from the working directory: "/", as a daemon's, holds no block device.
    os.chdir("/")
    # From another host (sshd sets SSH_CONNECTION, and a client cannot unset it): the closed
    # protocol. Started on the site itself, by its root, it answers as the in-process agent does.
    gate = _Gate(checked="SSH_CONNECTION" in os.environ)
    if gate.checked:
        from remirror.agent import taken_down

        taken_down.FROM_ANOTHER_HOST = True  # points its operator took down stay down at its word
    if not args:
        try:
            request = json.loads(sys.stdin.buffer.read())
        except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested past the stack
            sys.stdout.write(json.dumps(gate.not_json(error)) + "\n")
            return EXIT_BAD_INPUT
        sys.stdout.write(json.dumps(gate.refusal(request) or _handle(gate.as_taken(request))) + "\n")
        return 0
    _own_process_group()
    # A forced promotion at this site ends an agent that holds or waits for its lock
    # (remirror.agent.lock.end_remote_holders): it ends as when its controller goes.
    signal.signal(
        signal.SIGTERM, lambda _signal, _frame: _end_abandoned("this site's forced promotion ended it")
    )
    requests = _Requests(sys.stdin.fileno())
    lease = lock.lease_seconds()
    while (line := requests.next(lease if lock.held() else None)) is not None:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError) as error:  # not JSON, not UTF-8, nested past Python's stack
            answer = gate.not_json(error)
        else:
            answer = gate.refusal(request) or _answer_unless_abandoned(gate.as_taken(request), requests)
            if answer.get("locked") is not None:
                answer["lease"] = lease  # the controller keeps its hold alive well within it
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    return 0


def _is_agent_command(command: str) -> bool:
    """Whether an SSH client's command is remirror's controller starting its agent: `remirror agent
    [--serve]`, after the `env NAME=VALUE ...` the SSH runner puts in front (remirror.runner.ssh)."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if words[:1] == ["env"]:
        words = words[1:]
        while words and "=" in words[0] and not words[0].startswith("="):
            words = words[1:]
    return (
        len(words) in (2, 3)
        and Path(words[0]).name == "remirror"
        and words[1:]
        in (
            ["agent"],
            ["agent", "--serve"],
        )
    )


class _Gate:
    """Every request checked against the protocol and this site's own profiles (remirror.agent.policy)."""

    def __init__(self, checked: bool) -> None:
        from remirror.agent import policy

        self.policy = policy
        self.checked = checked
        self.broken: str | None = None
        self.scope: SiteScope | None = None
        self._read: object = None  # the state of the site's profiles when they were last read
        self._read_profiles()

    def _read_profiles(self) -> None:
        """The scope of the site's profiles as they are now: read again when one was written,
        added or removed since (an agent kept by a controller's process lives on)."""
        if not self.checked or self._read == (state := self.policy.profiles_state()):
            return
        self._read, self.broken, self.scope = state, None, None
        try:
            self.scope = self.policy.load_scope()
        except self.policy.Refused as refusal:
            self.broken = str(refusal)  # every request is refused: the site cannot say what is its own
        except Exception as error:  # noqa: BLE001 - whatever it is, the site cannot say what is its own
            self.broken = f"this site's profiles could not be read ({type(error).__name__}: {error})"

    def not_json(self, error: Exception) -> dict[str, Any]:
        """The answer to a line that is not a JSON request; refused and logged where checked."""
        why = str(error)[:200] if isinstance(error, json.JSONDecodeError) else type(error).__name__
        message = f"the request is not JSON: {why}"
        if self.checked:
            _refuse(f"refused: {message}")
        return {"error": message}

    def refusal(self, request: Any) -> dict[str, Any] | None:
        """The answer to a request outside the protocol; None for one inside it."""
        from remirror.agent.protocol import PROTOCOL_VERSION

        if not self.checked:
            return None
        self._read_profiles()
        why = self.broken
        if why is None:
            try:
                self.policy.check_request(request if isinstance(request, dict) else {}, self.scope)
                if request.get("op") == "lock" and lock.held_elsewhere(lock.FORCED_LOCK):
                    raise self.policy.Refused(
                        "lock: a forced promotion runs at this site: its lock waits for it"
                    )
                return None
            except self.policy.Refused as refusal:
                why = str(refusal)
            except Exception as error:  # noqa: BLE001 - whatever a request breaks, it is refused and logged
                why = f"malformed request ({type(error).__name__})"  # its text could quote the request
        # Not redacted: no refusal quotes a password (the checks name a password's key, never its
        # value), and text the sender chose to hide would hide from this log what it tried.
        message = f"refused: {why}"
        _refuse(message)
        return {"protocol": PROTOCOL_VERSION, "error": message, "refused": True, "commands": 0}

    def as_taken(self, request: dict[str, Any]) -> dict[str, Any]:
        """The request as this site carries it out: a point with this site's own retention (the
        policy refused one for a mirror without it); a remote controller's lock held under a
        holder this site states (the SSH client's address and this agent's pid, for the busy
        message its own verbs give, and for its operator to end it), the sender's own words
        after it, one line of at most 100 printable characters."""
        if not self.checked:
            return request
        if request.get("op") == "cdp" and request.get("do") == "point" and self.scope is not None:
            # Its retention is this site's own (a `keep: 0` from another site would prune it all).
            # Nor are its hooks run at another site's word, when and as often as it asks: an
            # application frozen from afar is an outage (its own `cdp run` runs them).
            every, keep = self.scope.retention[request["mirror"]]
            return {**request, "every": every, "keep": keep.as_json(), "hooks": None, "force": False}
        if request.get("op") != "lock":
            return request
        client = os.environ.get("SSH_CLIENT", "").split(" ")[0] or "another host"
        said = "".join(c for c in str(request.get("holder", "")) if c.isprintable())[:100]
        holder = f"remirror's agent (pid {os.getpid()}) for a controller at {client} over SSH, saying: {said}"
        return {**request, "holder": holder}


LOGGED_CHARACTERS = 600


def _refuse(message: str) -> None:
    """Say so on stderr (the controller's log) and in this site's system log, for its operator."""
    import syslog

    client = os.environ.get("SSH_CLIENT", "").split(" ")[0] or "a local process"
    # One printable line of bounded length, whatever the request held (a NUL ends a syslog line).
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)[:LOGGED_CHARACTERS]
    sys.stderr.write(f"remirror: agent: {message}\n")
    syslog.openlog("remirror-agent", 0, syslog.LOG_AUTH)
    syslog.syslog(syslog.LOG_WARNING, f"request from {client} {message}")


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    from remirror.agent import handle

    return handle(request)


class _Requests:
    """The request lines on stdin, read past Python's buffering so that `select` tells the truth."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buffer = b""
        self.closed = False

    def next(self, lease: float | None = None) -> bytes | None:
        """The next line, as sent (read as JSON by the caller: not UTF-8 is not JSON); None once
        stdin is closed. `lease`: the agent holds a lock for its controller, which must send
        within that many seconds, or the hold lapses (_end_lapsed)."""
        while b"\n" not in self.buffer:
            if lease is not None and not select.select([self.fd], [], [], lease)[0]:
                _end_lapsed(lease)
            if not self.fill():
                # A last request without its newline (a controller of one request per agent,
                # run as --serve by a forced command) is still a request.
                line, self.buffer = self.buffer, b""
                return line if line.strip() else None
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

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
    The worker says it is done through a pipe, watched beside stdin: the
    answer leaves as soon as it is ready (a poll of stdin with a time-out
    would hold every answer back until its next tick).
    """
    from remirror.agent import handle

    box: dict[str, dict[str, Any]] = {}
    done_read, done_write = os.pipe()

    def work() -> None:
        try:
            box["answer"] = handle(request)
        except BaseException as error:  # noqa: BLE001 - said to the controller, not lost in a thread
            # And its traceback on stderr, which reaches the controller's log: both without the
            # request's secrets, which an unexpected error's text may quote.
            from remirror.agent.steps import secrets_of  # loaded by handle() already

            hidden = secrets_of(request.get("steps"))
            said = f"the agent failed: {type(error).__name__}: {error}"
            box["answer"] = {"error": redact(said, hidden)}
            sys.stderr.write(redact("".join(traceback.format_exception(error)), hidden))
        finally:
            os.write(done_write, b"x")

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    while not requests.closed:  # once closed, it sent more requests: it waits for their answers
        readable, _, _ = select.select([requests.fd, done_read], [], [])
        if done_read in readable:
            break
        if not requests.fill() and b"\n" not in requests.buffer:
            _end_abandoned("the controller went away mid-request")
    worker.join()
    os.close(done_read)  # only now: the worker no longer writes to it
    os.close(done_write)
    return box.get("answer", {"error": "the agent failed to answer"})


def _own_process_group() -> None:
    """Lead a process group of our own, so that ending it ends our commands and nothing else."""
    if os.getpgrp() != os.getpid():
        with contextlib.suppress(OSError):  # a session leader already leads its group
            os.setpgid(0, 0)


def _end_lapsed(lease: float) -> NoReturn:
    """A controller that holds this site's lock and sent nothing for `lease` seconds (suspended,
    hung, or holding it on purpose) loses it: the agent ends, and the kernel lets go of its locks.
    Ending, rather than refusing what comes next, leaves no hold to renew: the controller's next
    request finds the agent gone, and a new command takes the lock again, in turn."""
    held = ", ".join(lock.held())
    _log_ending(f"sent nothing for {lease:g} s while holding this site's {held} lock: its hold lapsed")
    os._exit(1)  # no request runs (one running counts as the controller's): nothing to end with it


def _end_abandoned(why: str) -> NoReturn:
    """End the agent and the commands it started, a section that must finish first (a leg move):
    its controller went, or the site's forced promotion ended it (SIGTERM)."""
    from remirror.agent.critical import wait_for_sections

    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: a second SIGTERM must not start it again
    _log_ending(f"{why}: ending what it asked for")
    wait_for_sections()  # and none starts after it: the process ends next
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGTERM)  # the commands this agent started
    os._exit(1)  # the kernel lets go of the locks with the process


def _log_ending(message: str) -> None:
    """Say why the agent ends, on stderr and in the system log, never blocking on stderr: a
    controller that stopped reading (its link cut, or on purpose) must not keep the agent alive.
    Only here, on the way out: the commands the agent runs share its stderr."""
    import syslog

    client = os.environ.get("SSH_CLIENT", "").split(" ")[0] or "a local process"
    with contextlib.suppress(OSError):
        os.set_blocking(2, False)
        os.write(2, f"remirror: agent: {message}\n".encode())
    syslog.openlog("remirror-agent", 0, syslog.LOG_AUTH)
    syslog.syslog(syslog.LOG_WARNING, f"controller from {client} {message}")
