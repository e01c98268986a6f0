"""The controller's side of the agent: one object per site, local or over SSH."""

from __future__ import annotations

import json
from typing import Any

from remirror.errors import SiteError
from remirror.profile.model import Site
from remirror.runner.sites import runner_for_site

AGENT_TIMEOUT = 600.0


class AgentClient:
    """Sends requests to a site's agent: in-process for `local`, `remirror agent` over SSH otherwise."""

    def __init__(self, name: str, site: Site) -> None:
        self.name = name
        self.site = site
        self._runner = None if site.is_local else runner_for_site(name, site)
        self.bytes_received = 0  # answers' size: what crossed the link from a remote site

    def request(self, request: dict[str, Any], secrets: list[str] | None = None) -> dict[str, Any]:
        """One request and its answer."""
        answer: dict[str, Any]
        if self._runner is None:
            from remirror.agent import handle

            answer = handle(request)
        else:
            done = self._runner.run(
                ["remirror", "agent"], stdin=json.dumps(request), timeout=AGENT_TIMEOUT, secrets=secrets or []
            )
            self.bytes_received += len(done.stdout.encode())
            try:
                answer = json.loads(done.stdout)
            except json.JSONDecodeError:
                raise SiteError(
                    self.name, f"the agent answered something that is not JSON: {done.stdout[:200]!r}"
                ) from None
        if "error" in answer:
            raise SiteError(self.name, f"agent: {answer['error']}")
        return answer

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

    def run(self, steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Run steps; one result per step attempted."""
        secrets = [s for step in steps for s in step.get("secrets", [])]
        results: list[dict[str, Any]] = self.request({"op": "run", "steps": steps}, secrets)["results"]
        return results

    def close(self) -> None:
        """Drop the SSH connection, if any."""
        if self._runner is not None:
            self._runner.close()
