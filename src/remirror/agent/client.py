"""The controller's side of the agent: one object per site, local or over SSH."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, cast

from remirror.agent.protocol import PROTOCOL_VERSION
from remirror.errors import CommandError, RemirrorError, SiteBusy, SiteError
from remirror.profile.model import Site
from remirror.runner.base import INSTALL_DIRS, NOT_FOUND
from remirror.runner.sites import runner_for_site

if TYPE_CHECKING:
    from remirror.runner.ssh import SshRunner, SshStream

AGENT_TIMEOUT = 600.0


class AgentClient:
    """Sends requests to a site's agent: in-process for `local`; over SSH otherwise, to one
    `remirror agent --serve` per site, started at the first request and kept until `close`."""

    def __init__(self, name: str, site: Site) -> None:
        self.name = name
        self.site = site
        self._runner = None if site.is_local else runner_for_site(name, site)
        self._stream: SshStream | None = None
        self._serve = True  # False: the site's remirror predates --serve; one agent per request
        self.bytes_received = 0  # answers' size: what crossed the link from a remote site
        self.requests = 0
        self.commands_run = 0  # on the site, as its agent counted them
        self.locks: set[str] = set()  # held on the site for this command (remirror.agent.lock)

    def request(
        self, request: dict[str, Any], secrets: list[str] | None = None, timeout: float = AGENT_TIMEOUT
    ) -> dict[str, Any]:
        """One request and its answer (within `timeout` seconds, from a remote site)."""
        answer: dict[str, Any]
        if self._runner is None:
            from remirror.agent import handle

            answer = handle(request)
        else:
            text = self._remote(json.dumps(request), secrets or [], timeout)
            self.bytes_received += len(text.encode())
            try:
                answer = json.loads(text)
            except json.JSONDecodeError:
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
            raise SiteError(self.name, f"agent: {answer['error']}")
        return answer

    def _remote(self, request: str, secrets: list[str], timeout: float = AGENT_TIMEOUT) -> str:
        """The remote agent's answer to one request (a line of JSON)."""
        runner = cast("SshRunner", self._runner)  # remote sites have SSH runners (runner_for_site)
        if not self._serve:
            done = runner.run(["remirror", "agent"], stdin=request, timeout=timeout, secrets=secrets)
            return done.stdout
        if self._stream is None:
            self._stream = runner.open_stream(["remirror", "agent", "--serve"])
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
        except RemirrorError:  # timed out, or the connection went: the stream is unusable
            self._drop_stream()
            raise

    def _drop_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
            self.locks.clear()  # the remote agent ends with its stream, and its locks with it

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

    def digests(self, disk: str, spans: list[tuple[int, int]]) -> list[str]:
        """A digest of each (offset, length) of the mirror's data on this site's leg `disk`."""
        answer = self.request({"op": "digest", "disk": disk, "spans": [list(s) for s in spans]})
        found: list[str] = answer["digests"]
        return found

    def lock(self, name: str, holder: str, wait: float) -> None:
        """Hold the site's lock `name` until `unlock` or `close` (SiteBusy if another holds it)."""
        if name in self.locks:
            return
        # A site whose remirror predates `agent --serve` (one agent per request, which could
        # not hold a lock) answers in protocol 1, which `request` refuses.
        self.request({"op": "lock", "name": name, "holder": holder, "wait": wait})
        self.locks.add(name)

    def unlock(self, name: str) -> None:
        """Let go of the site's lock `name` (a remote site that went away let go of it already)."""
        if name not in self.locks:
            return
        self.locks.discard(name)
        try:
            self.request({"op": "unlock", "name": name})
        except RemirrorError:
            self._drop_stream()  # its agent ends, and its locks with it

    def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run steps; one result per step attempted. The wait for the answer covers the steps
        that say how long they take (a whole disk read), beyond the usual limit."""
        secrets = [s for step in steps for s in step.get("secrets", [])]
        timeout = max(AGENT_TIMEOUT, sum(float(s["timeout"]) for s in steps if s["kind"] == "prove_blank"))
        answer = self.request({"op": "run", "steps": steps}, secrets, timeout)
        results: list[dict[str, Any]] = answer["results"]
        return results

    def close(self) -> None:
        """Let go of the locks, end the remote agent and drop the SSH connection, if any."""
        if self._runner is None:
            for name in sorted(self.locks):
                self.unlock(name)  # this process holds them: it may live on (the lab tests, watch)
        self.locks.clear()
        self._drop_stream()  # a remote agent's end releases its locks
        if self._runner is not None:
            self._runner.close()
