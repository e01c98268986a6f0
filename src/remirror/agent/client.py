"""The controller's side of the agent: one object per site, local or over SSH."""

from __future__ import annotations

import atexit
import json
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from remirror.agent.protocol import PROTOCOL_VERSION
from remirror.errors import CommandError, RemirrorError, SiteBusy, SiteError
from remirror.profile.model import Site
from remirror.runner.base import INSTALL_DIRS, NOT_FOUND, redact
from remirror.runner.sites import runner_for_site

if TYPE_CHECKING:
    from remirror.runner.ssh import SshRunner, SshStream

AGENT_TIMEOUT = 600.0
# The steps that say how long they take: a whole disk read (prove_blank), bytes across the link
# (copy_spans). The controller waits for them beyond AGENT_TIMEOUT.
TIMED_STEPS = ("prove_blank", "copy_spans")
# How long an agent has to answer a request it answers at once (a kept agent's round trip
# before it is taken up again, an unlock): well under a second over a working link; a link that
# black-holes it costs this, then the agent is dropped (it ends, and its locks with it) and a new
# connection fails as fast as the profile's connect timeout says.
ROUND_TRIP_WAIT = 5.0
# A kept agent idle longer is ended rather than taken up: a remirror upgraded at the site, a key
# revoked or a host key changed then meet the next command, as they would a new connection.
KEPT_AGENT_IDLE = 60.0
# A remote site's lock is a lease (remirror.agent.lock.LEASE_SECONDS) that lapses after the site's
# lease without a request: between requests, the controller sends a no-op round trip this often
# (a share of the lease the site states), and waits this long at most for its answer.
KEEPALIVES_PER_LEASE = 4
KEEPALIVE_WAIT = 30.0
AGENT_ARGV = ["remirror", "agent", "--serve"]


class _KeptAgents:
    """Remote agents kept between the commands of one process, by the exact ssh command line
    that started them (host, port, user, key, known_hosts, bastion: the profile's site) and the
    state of its key and known_hosts files.

    A process that runs one verb after another (the lab's tests, a script of verbs in Python)
    would otherwise pay an SSH handshake and a Python start at the site for each: seconds on a
    small host. A kept agent holds no lock (`AgentClient.close` lets go of them first; a stream
    left in any other state, a request cut short, is ended, never kept) and reads the site's
    profiles again when they change (remirror.agent.serve), so the next command gets what a new
    one would. It must answer a round trip of a size chosen for it, or it is ended with the
    others of its site and a new one is started. Every agent ends with this process (their ssh
    clients read the end of their input).
    """

    def __init__(self) -> None:
        self.enabled = False  # keep_agents_between_commands(): a process that runs many asks for it
        self._guard = threading.Lock()
        self._kept: dict[tuple[str, ...], list[tuple[float, SshStream]]] = {}
        atexit.register(self.close_all)

    def keep(self, key: tuple[str, ...], stream: SshStream) -> None:
        if not self.enabled:
            stream.close()  # the remote agent ends, as it does after every command of the CLI
            return
        with self._guard:
            self._kept.setdefault(key, []).append((time.monotonic(), stream))

    def take(self, key: tuple[str, ...], runner: SshRunner) -> SshStream | None:
        """The agent kept last for `key`, if it answers; None otherwise."""
        with self._guard:
            kept = self._kept.pop(key, [])
            now = time.monotonic()
            idle = [stream for since, stream in kept if now - since >= KEPT_AGENT_IDLE]
            young = [(since, stream) for since, stream in kept if now - since < KEPT_AGENT_IDLE]
            stream = young.pop()[1] if young else None
            if young:
                self._kept[key] = young
        for each in idle:
            each.close()
        if stream is None:
            return None
        if _answers(stream):
            stream.adopt(runner)
            return stream
        stream.close()
        with self._guard:  # its link or its site went: the others kept for it went with it
            others = [each for _, each in self._kept.pop(key, [])]
        for each in others:
            each.close()
        return None

    def close_all(self) -> None:
        with self._guard:
            streams = [stream for kept in self._kept.values() for _, stream in kept]
            self._kept.clear()
        for stream in streams:
            stream.close()


def _error_chain(error: BaseException) -> str:
    """`error` and the errors attached to it (its cause and context, suppressed or not), as text."""
    text, seen = "", set()
    linked: BaseException | None = error
    while linked is not None and id(linked) not in seen:
        seen.add(id(linked))
        text += f"{type(linked).__name__}: {linked}\n"
        linked = linked.__cause__ or linked.__context__
    return text


def _answers(stream: SshStream) -> bool:
    """Whether a kept agent answers a round trip with what was sent (a size chosen for it: a
    late answer to an earlier request cannot pass for it)."""
    size = 1 + secrets.randbelow(64)
    try:
        text = stream.exchange(json.dumps({"op": "sink", "data": "x" * size}), ROUND_TRIP_WAIT, [])
        answer = json.loads(text)
    except (RemirrorError, ValueError, OSError):
        return False
    except BaseException:
        stream.close()
        raise
    return (
        isinstance(answer, dict)
        and answer.get("protocol") == PROTOCOL_VERSION
        and answer.get("received") == size
    )


_kept_agents = _KeptAgents()


def keep_agents_between_commands(enabled: bool = True) -> None:
    """Keep remote agents between this process's commands (the lab's tests, which run hundreds
    of verbs in one process). Off by default: the CLI runs one command per process, and a
    long-lived process of its own (`watch`) keeps its controller's agents as it always did."""
    _kept_agents.enabled = enabled
    if not enabled:
        _kept_agents.close_all()


def end_kept_agents() -> None:
    """End every kept agent (a test about to crash a site: its agents die with it)."""
    _kept_agents.close_all()


class AgentClient:
    """Sends requests to a site's agent: in-process for `local`; over SSH otherwise, to one
    `remirror agent --serve` per site, started at the first request (or a kept one taken up:
    _KeptAgents) and kept until `close`."""

    def __init__(self, name: str, site: Site) -> None:
        self.name = name
        self.site = site
        self._runner = None if site.is_local else runner_for_site(name, site)
        self._stream: SshStream | None = None
        self._stream_key: tuple[str, ...] = ()  # what it was started with (_agent_key)
        self._serve = True  # False: the site's remirror predates --serve; one agent per request
        self.bytes_received = 0  # answers' size: what crossed the link from a remote site
        self.requests = 0
        self.commands_run = 0  # on the site, as its agent counted them
        self.locks: set[str] = set()  # held on the site for this command (remirror.agent.lock)
        # Why the remote agent that held this command's locks went (None: it did not): nothing more
        # is asked of the site until the command lets go of them (`unlock`, `close`).
        self._lost: str | None = None
        self._exchange = threading.Lock()  # one request at a time on the stream: a keepalive waits
        self._last_sent = 0.0
        self._keepalive_stop: threading.Event | None = None

    def request(
        self, request: dict[str, Any], secrets: list[str] | None = None, timeout: float = AGENT_TIMEOUT
    ) -> dict[str, Any]:
        """One request and its answer (within `timeout` seconds, from a remote site)."""
        answer: dict[str, Any]
        if self._runner is None:
            from remirror.agent import handle

            try:
                answer = handle(request)
            except Exception as error:
                # An unexpected error's text, or an error chained to it, may quote what it was
                # sent: then said without the secrets, as a remote agent's worker says it
                # (agent/serve.py), and raised out of the handler, with nothing attached.
                told = _error_chain(error)
                if redact(told, secrets or []) == told:
                    raise
                said: str | None = redact(f"{type(error).__name__}: {error}", secrets or [])
            else:
                said = None
            if said is not None:
                raise SiteError(self.name, f"the agent failed: {said}")
        else:
            with self._exchange:
                self._refuse_if_lost()  # (a keepalive's failure drops the stream meanwhile)
                text = self._remote(json.dumps(request), secrets or [], timeout)
                self._last_sent = time.monotonic()
            self.bytes_received += len(text.encode())
            try:
                answer = json.loads(text)
            except json.JSONDecodeError:
                self._drop_stream()  # what it answers next may be this answer's rest
                raise SiteError(
                    self.name, f"the agent answered something that is not JSON: {text[:200]!r}"
                ) from None
        self.requests += 1
        self.commands_run += int(answer.get("commands", 0))
        if "protocol" in answer and answer["protocol"] != PROTOCOL_VERSION:
            raise SiteError(
                self.name,
                f"its remirror agent speaks protocol {answer['protocol']}, this controller"
                f" {PROTOCOL_VERSION}: install the same remirror on every site",
            )
        if answer.get("busy"):
            raise SiteBusy(self.name, answer["error"])
        if "error" in answer:
            # Redacted here too: an agent may quote what it was sent (an older one did, unredacted).
            raise SiteError(self.name, f"agent: {redact(str(answer['error']), secrets or [])}")
        return answer

    def _refuse_if_lost(self) -> None:
        """Nothing more is asked of a site where this command's hold of its lock ended: what it
        observed there under the lock may no longer be so."""
        if self._lost is not None:
            raise SiteError(self.name, f"this command's hold of its lock there ended: {self._lost}")

    def _remote(self, request: str, secrets: list[str], timeout: float = AGENT_TIMEOUT) -> str:
        """The remote agent's answer to one request (a line of JSON)."""
        runner = cast("SshRunner", self._runner)  # remote sites have SSH runners (runner_for_site)
        if not self._serve:
            done = runner.run(["remirror", "agent"], stdin=request, timeout=timeout, secrets=secrets)
            return done.stdout
        if self._stream is None:
            self._stream_key = self._agent_key()
            self._stream = _kept_agents.take(self._stream_key, runner) or runner.open_stream(AGENT_ARGV)
        try:
            return self._stream.exchange(request, timeout, secrets)
        except CommandError as error:
            self._drop_stream()
            if "No such option: --serve" in error.stderr_tail:  # an older remirror on the site
                self._serve = False
                return self._remote(request, secrets, timeout)
            if error.returncode == NOT_FOUND:
                raise SiteError(
                    self.name,
                    "remirror is not installed there (looked for in /usr/local/bin, "
                    + ", ".join(INSTALL_DIRS)
                    + "): install the same remirror on every site (README, Install on your sites)",
                ) from None
            raise
        except BaseException:  # timed out, the connection went, or cut short: the stream is unusable
            self._drop_stream()
            raise

    def _agent_key(self) -> tuple[str, ...]:
        """What a kept agent must have been started with to be taken up: the same ssh command
        line, and the same key and known_hosts files (a key replaced, a host key changed)."""
        runner = cast("SshRunner", self._runner)
        files = []
        for path in (runner.identity_file, runner.known_hosts):
            try:
                seen = Path(path).stat() if path else None
            except OSError:
                seen = None
            files.append(f"{path}:{seen.st_ino}:{seen.st_ctime_ns}" if seen else f"{path}:-")
        return (*runner.ssh_argv(AGENT_ARGV), *files)

    def _drop_stream(self, why: str = "its agent was ended (a request failed or timed out)") -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            if self.locks:  # the remote agent ends with its stream, and its locks with it
                self._lost = why
            self.locks.clear()
            self._stop_keepalive()  # a new hold (the reconciler's next pass) starts its own

    def _keep_alive(self, period: float, stop: threading.Event) -> None:
        """Keep the site's lease on this command's locks (remirror.agent.lock.LEASE_SECONDS) while
        the controller works elsewhere or waits for its operator: a no-op round trip whenever no
        request went for `period` seconds (one running counts at the site). A round trip that
        fails ends the hold: the command's next request there says so."""
        while not stop.wait(period):
            if not self._exchange.acquire(blocking=False):
                continue  # a request runs: the site counts it
            try:
                if self._stream is None or not self.locks:
                    return
                if time.monotonic() - self._last_sent < period:
                    continue
                try:
                    text = self._stream.exchange(json.dumps({"op": "sink", "data": ""}), KEEPALIVE_WAIT, [])
                    answer = json.loads(text)
                except (RemirrorError, ValueError, OSError) as error:
                    self._drop_stream(f"its lease was not kept alive ({error})")
                    return
                if not isinstance(answer, dict) or answer.get("received") != 0:
                    self._drop_stream(f"its agent answered a keepalive with {text[:100]!r}")
                    return
                self._last_sent = time.monotonic()
            finally:
                self._exchange.release()

    def _stop_keepalive(self) -> None:
        if self._keepalive_stop is not None:
            self._keepalive_stop.set()
            self._keepalive_stop = None

    def observe(
        self,
        disks: list[str],
        portals: list[str] | None = None,
        probe: list[str] | None = None,
        records: list[str] | None = None,
    ) -> dict[str, Any]:
        """This site's raw facts: round trips to `portals`, the first sector of each disk in `probe`,
        the leg record of each in `records`."""
        request = {
            "op": "observe",
            "disks": disks,
            "portals": portals or [],
            "probe": probe or [],
            "records": records or [],
        }
        facts: dict[str, Any] = self.request(request)["facts"]
        return facts

    def digests(self, disk: str, spans: list[tuple[int, int]], raw: bool = False) -> list[str]:
        """A digest of each (offset, length) of the mirror's data on this site's leg `disk`
        (`raw`: of the disk from its byte 0, where no array is made over it yet)."""
        request = {"op": "digest", "disk": disk, "spans": [list(s) for s in spans]}
        answer = self.request({**request, "raw": True} if raw else request)
        found: list[str] = answer["digests"]
        return found

    def lock(self, name: str, holder: str, wait: float) -> None:
        """Hold the site's lock `name` until `unlock` or `close` (SiteBusy if another holds it)."""
        if name in self.locks:
            return
        # A site whose remirror predates `agent --serve` (one agent per request, which could
        # not hold a lock) answers in protocol 1, which `request` refuses.
        answer = self.request({"op": "lock", "name": name, "holder": holder, "wait": wait})
        self.locks.add(name)
        lease = answer.get("lease")  # a remote agent's: the hold lapses without a request
        if isinstance(lease, (int, float)) and lease > 0 and self._keepalive_stop is None:
            self._keepalive_stop = threading.Event()
            period = max(0.1, float(lease) / KEEPALIVES_PER_LEASE)
            threading.Thread(
                target=self._keep_alive,
                args=(period, self._keepalive_stop),
                daemon=True,
                name=f"keepalive-{self.name}",
            ).start()

    def unlock(self, name: str) -> None:
        """Let go of the site's lock `name` (a remote site that went away let go of it already)."""
        if name not in self.locks:
            self._lost = None  # a hold that ended: the command lets go of it, and may lock again
            return
        self.locks.discard(name)
        if not self.locks:
            self._stop_keepalive()
        try:
            self.request({"op": "unlock", "name": name}, timeout=ROUND_TRIP_WAIT)
        except RemirrorError:
            self._drop_stream()  # its agent ends, and its locks with it

    def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run steps; one result per step attempted. The wait for the answer covers the steps
        that say how long they take (a whole disk read), beyond the usual limit."""
        secrets = [s for step in steps for s in step.get("secrets", [])]
        timeout = max(AGENT_TIMEOUT, sum(float(s["timeout"]) for s in steps if s["kind"] in TIMED_STEPS))
        answer = self.request({"op": "run", "steps": steps}, secrets, timeout)
        results: list[dict[str, Any]] = answer["results"]
        return results

    def close(self) -> None:
        """Let go of the locks; keep the remote agent for this process's next command (_KeptAgents)."""
        for name in sorted(self.locks):
            self.unlock(name)  # this process, or the kept agent, may live on (the lab tests, watch)
        self._stop_keepalive()
        self._lost = None
        if self._stream is not None:  # answered all it was asked (anything else dropped it)
            _kept_agents.keep(self._stream_key, self._stream)
            self._stream = None
        if self._runner is not None:
            self._runner.close()
